#include "fastcgi/script_handler.h"

#include <stdexcept>
#include <utility>
#include <vector>

#include "fastcgi/params.h"
#include "fastcgi/protocol.h"
#include "fastcgi/relay.h"
#include "fastcgi/script_path.h"
#include "files/static_files.h"
#include "http/error_page.h"
#include "http/exchange.h"
#include "http/uri.h"
#include "net/event_loop.h"

namespace tern::fastcgi {
namespace {

// `prefix` normalised, without its final '/' ("" for "/").
std::string normalized_prefix(std::string_view prefix) {
  auto normalized = http::normalize_prefix(prefix);
  if (!normalized) throw std::invalid_argument("a handler's prefix is a path starting with '/': " + std::string(prefix));
  return std::move(*normalized);
}

// SERVER_NAME when none is set: the request's host without its port
// ("example.com:8080", "[::1]:8080").
std::string_view host_name(std::string_view host) {
  if (host.starts_with('[')) return host.substr(0, host.find(']') + 1);
  return host.substr(0, host.rfind(':'));
}

files::OpenFileCacheOptions script_cache_options() {
  files::OpenFileCacheOptions options;
  options.memory_max_file_bytes = 0;
  options.open_for_reading = false;  // the application reads them, not us
  return options;
}

}  // namespace

struct ScriptHandler::LoopScripts {
  explicit LoopScripts(const std::string& root) : scripts(root, script_cache_options()) {}
  files::OpenFileCache scripts;  // which scripts exist
  std::string path;   // scratch: the normalised path
  std::string probe;  // scratch: a directory's index script
};

ScriptHandler::ScriptHandler(ScriptHandlerOptions options)
    : options_(std::move(options)),
      prefix_(normalized_prefix(options_.prefix)),
      log_name_("fastcgi " + options_.application.to_string()),
      groups_([this](net::EventLoop* loop) {
        net::ConnectionPoolOptions pool;
        pool.max_connections = options_.connections;
        pool.max_idle = options_.connections;
        pool.max_waiting = options_.queue;
        pool.connect_timeout = options_.connect_timeout;
        upstream::GroupServer server;
        server.spec.address = options_.application.to_string();
        server.address = options_.application;
        return std::make_unique<upstream::Group>(loop, log_name_, std::vector<upstream::GroupServer>{server},
                                                 upstream::Balancer::Method::kRoundRobin, pool);
      }) {
  while (options_.root.size() > 1 && options_.root.back() == '/') options_.root.pop_back();
  if (options_.extension.empty()) throw std::invalid_argument("a script handler needs an extension (\".php\")");
  if (options_.index.find('/') != std::string::npos) {
    throw std::invalid_argument("an index script is a name, not a path: " + options_.index);
  }
  files::OpenFileCache probe(options_.root, script_cache_options());  // throws for a root it cannot open
}

ScriptHandler::~ScriptHandler() = default;

ScriptHandler::LoopScripts& ScriptHandler::loop_scripts() {
  net::EventLoop* loop = net::EventLoop::current();
  LoopScripts* mine = loops_.get(loop);
  return mine != nullptr ? *mine : loops_.emplace(loop, options_.root);
}

ScriptHandler::Found ScriptHandler::find(std::string_view request_path, LoopScripts& loop) const {
  Found found;
  bool dot_segment = false;
  auto normalized = http::normalized_path(request_path, &loop.path, &dot_segment);
  if (!normalized) {
    found.status = -1;
    return found;
  }
  const std::string_view path = *normalized;
  found.path = path;
  std::string_view rest;
  if (!http::path_beneath(prefix_, path, &rest)) {
    found.status = -1;
    return found;
  }
  if (dot_segment && files::names_a_dotfile(path)) {
    // "/.git/hooks/x.php": nothing beneath a dot directory runs, and the
    // files after this refuse it too.
    found.status = path.ends_with(options_.extension) ? 403 : -1;
    return found;
  }
  const auto now = net::EventLoop::current()->clock().now();
  auto is_script = [&](std::string_view candidate, int* error) {
    files::OpenFileCache::FileResult file = loop.scripts.find(candidate, now);
    if (file && file.value()->is_regular()) return true;
    *error = file ? 404 : files::OpenFileCache::http_status(file.error());
    return false;
  };
  const ScriptPath script = find_script_path(
      path, options_.index, prefix_.size(), &loop.probe,
      [this](std::string_view name) { return name.ends_with(options_.extension); }, is_script);
  found.status = script.status;
  found.script = script.script;
  found.path_info = script.path_info;
  return found;
}

http::Claim ScriptHandler::claim(http::Route& route) {
  const Found found = find(route.path, loop_scripts());
  if (found.status < 0) return http::Claim::kPass;
  if (found.status > 0) return http::Claim::kRespond;
  if (options_.max_body != 0) route.max_body = options_.max_body;
  return http::Claim::kExchange;
}

void ScriptHandler::respond(const http::Route& route, http::ResponseWriter& writer) {
  const Found found = find(route.path, loop_scripts());
  http::write_error_page(writer, found.status > 0 ? found.status : 404);
}

void ScriptHandler::start(const http::Route& route, http::Exchange& exchange) {
  // Found again: over HTTP/2 a request may start after others were claimed.
  const Found found = find(route.path, loop_scripts());
  if (found.status != 0) {
    http::write_error_page(exchange.writer(), found.status > 0 ? found.status : 404);
    return exchange.finish();
  }
  upstream::CallOptions options;
  options.read_timeout = options_.read_timeout;
  options.log_name = log_name_;
  options.temp_dir = options_.temp_dir;
  options.request_buffering = options_.buffering;
  options.response_buffering = options_.buffering;
  // What PARAMS need, held by the writer: it runs again if the request is
  // retried, and at the end of a gathered body.
  const std::string_view server_name = options_.server_name.empty() ? host_name(exchange.request().host())
                                                                    : std::string_view(options_.server_name);
  HeldCgiContext held(exchange, {options_.root, std::string(found.script), std::string(found.path_info),
                                 std::string(found.path)},
                      server_name, options_.server_software);
  auto head_writer = [&request = exchange.request(), held = std::move(held)](net::Buffer& out,
                                                                             std::optional<uint64_t> length) {
    append_begin_request(out, 1, Role::kResponder, /*keep_conn=*/true);
    ParamsWriter params(out, 1);
    write_cgi_params(params, request, held.view(), length);
    params.finish();
  };

  relay(exchange, groups_.current(), options, std::move(head_writer), nullptr);
}

void ScriptHandler::close_loop(net::EventLoop* loop) { groups_.close(loop); }

}  // namespace tern::fastcgi
