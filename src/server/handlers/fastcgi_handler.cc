#include "server/handlers/fastcgi_handler.h"

#include <sys/stat.h>

#include <latch>

#include "base/log.h"
#include "fastcgi/call.h"
#include "fastcgi/params.h"
#include "http/http_connection.h"
#include "http/uri.h"
#include "net/connection_pool.h"
#include "net/event_loop.h"
#include "net/tcp_connection.h"

namespace tern::server {
namespace {

// A pattern of the form literal + '$' ("\.php$") is a suffix test: no regex
// engine on the hot path for the common case.
std::optional<std::string> literal_suffix(std::string_view pattern) {
  if (pattern.empty() || pattern.back() != '$') return std::nullopt;
  pattern.remove_suffix(1);
  std::string literal;
  for (size_t i = 0; i < pattern.size(); ++i) {
    char c = pattern[i];
    if (c == '\\') {
      if (++i == pattern.size()) return std::nullopt;
      c = pattern[i];
      if (std::isalnum(static_cast<unsigned char>(c))) return std::nullopt;  // \d, \w, ...
    } else if (std::string_view("^$.*+?()[]{}|").find(c) != std::string_view::npos) {
      return std::nullopt;
    }
    literal.push_back(c);
  }
  return literal;
}

bool is_regular_file(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

}  // namespace

struct FastCgiRoutes::Block {
  FastCgiConfig config;
  std::string root;  // without a trailing '/'
  std::optional<std::string> suffix;
  std::regex pattern;
  std::string log_name;
  std::unique_ptr<ResponseCache> cache;
  http::ExchangeHandler handler;
  size_t index = 0;  // position in blocks_ and in each LoopState's pools

  bool matches(std::string_view path) const {
    if (suffix) return path.ends_with(*suffix);
    return std::regex_search(path.begin(), path.end(), pattern);
  }
};

struct FastCgiRoutes::LoopState {
  net::EventLoop* loop = nullptr;
  std::vector<std::unique_ptr<net::ConnectionPool>> pools;  // one per block
  std::string path;    // scratch for decoding
  std::string script;  // scratch for the script name
};

namespace {
thread_local FastCgiRoutes::LoopState* t_loop_state = nullptr;
}

FastCgiRoutes::FastCgiRoutes(const std::vector<FastCgiConfig>& blocks,
                             const std::string& static_root, std::string software)
    : software_(std::move(software)) {
  for (const FastCgiConfig& config : blocks) {
    auto block = std::make_unique<Block>();
    block->config = config;
    block->root = config.root.empty() ? static_root : config.root;
    while (block->root.size() > 1 && block->root.back() == '/') block->root.pop_back();
    block->suffix = literal_suffix(config.match);
    if (!block->suffix) block->pattern = std::regex(config.match, std::regex::ECMAScript);
    block->log_name = "fastcgi " + config.address.to_string();
    if (config.cache) {
      block->cache = std::make_unique<ResponseCache>(config.cache_size, config.cache_ttl);
    }
    block->index = blocks_.size();
    TERN_LOG_INFO("fastcgi: {} -> {}, up to {} connection(s) per worker (php-fpm needs "
                  "pm.max_children >= that x workers){}",
                  config.match, config.address.to_string(), config.pool,
                  config.cache ? ", response cache on" : "");
    Block* raw = block.get();
    block->handler = [this, raw](http::Exchange& exchange) { handle(*raw, exchange); };
    blocks_.push_back(std::move(block));
  }
}

FastCgiRoutes::~FastCgiRoutes() = default;

void FastCgiRoutes::init_loop(net::EventLoop* loop) {
  auto state = std::make_unique<LoopState>();
  state->loop = loop;
  for (const auto& block : blocks_) {
    net::ConnectionPoolOptions options;
    options.address = block->config.address;
    options.name = block->log_name;
    options.max_connections = block->config.pool;
    options.max_waiting = block->config.queue;
    options.connect_timeout = block->config.connect_timeout;
    options.queue_timeout = block->config.queue_timeout;
    state->pools.push_back(std::make_unique<net::ConnectionPool>(loop, options));
  }
  t_loop_state = state.get();
  std::lock_guard lock(loops_mu_);
  loops_.push_back(std::move(state));
}

void FastCgiRoutes::shutdown(const std::vector<net::EventLoop*>& loops) {
  std::lock_guard lock(loops_mu_);
  for (auto& state : loops_) {
    LoopState* raw = state.get();
    auto close = [raw] {
      raw->pools.clear();
      if (t_loop_state == raw) t_loop_state = nullptr;
    };
    if (raw->loop->is_in_loop_thread()) {
      close();
      continue;
    }
    bool running = false;
    for (net::EventLoop* loop : loops) running = running || loop == raw->loop;
    if (!running) continue;
    std::latch done(1);
    raw->loop->run_in_loop([&] {
      close();
      done.count_down();
    });
    done.wait();
  }
}

bool FastCgiRoutes::match(const http::Request& request, const Block** found,
                          std::string* script) const {
  LoopState& state = *t_loop_state;
  if (!http::normalize_path(request.path(), &state.path)) return false;  // 400 from static
  const std::string& path = state.path;
  for (const auto& block : blocks_) {
    if (path.back() == '/' && !block->config.index.empty()) {
      script->assign(path).append(block->config.index);
      if (block->matches(*script) && is_regular_file(block->root + *script)) {
        *found = block.get();
        return true;
      }
      continue;
    }
    if (block->matches(path)) {
      script->assign(path);
      *found = block.get();
      return true;
    }
  }
  return false;
}

const http::ExchangeHandler* FastCgiRoutes::route(const http::Request& request) {
  if (t_loop_state == nullptr) return nullptr;
  const Block* block = nullptr;
  if (!match(request, &block, &t_loop_state->script)) return nullptr;
  return &block->handler;
}

void FastCgiRoutes::handle(const Block& block, http::Exchange& exchange) {
  const http::Request& request = exchange.request();
  LoopState& state = *t_loop_state;
  const Block* matched = nullptr;
  std::string script;
  if (!match(request, &matched, &script) || matched != &block) {
    // route() chose this block for the same request a moment ago.
    http::write_error_page(exchange.writer(), 500);
    return exchange.finish();
  }
  std::string filename = block.root + script;
  if (!is_regular_file(filename)) {
    http::write_error_page(exchange.writer(), 404);
    return exchange.finish();
  }

  std::unique_ptr<fastcgi::ResponseTap> tap;
  if (block.cache && (request.method() == http::Method::kGet || request.method() == http::Method::kHead) &&
      !request.has_header("Authorization")) {
    std::string key = ResponseCache::key(request);
    auto now = std::chrono::steady_clock::now();
    if (auto hit = block.cache->find(key, now)) {
      http::ResponseWriter& w = exchange.writer();
      w.start(hit->status);
      for (const auto& [name, value] : hit->headers) w.header(name, value);
      w.header("X-Cache", "HIT");
      w.header("Age", static_cast<uint64_t>(
                          std::chrono::duration_cast<std::chrono::seconds>(now - hit->stored).count()));
      w.body(hit->body);
      return exchange.finish();
    }
    if (request.method() == http::Method::kGet) tap = block.cache->filler(std::move(key));
  }

  fastcgi::CallOptions options;
  options.read_timeout = block.config.read_timeout;
  options.log_name = block.log_name;
  if (block.cache) {
    options.extra_header_name = "X-Cache";
    options.extra_header_value = "MISS";
  }
  // What PARAMS need beyond the request, owned by the writer (it runs again
  // if the request is retried, and for a chunked body at its end).
  const net::TcpConnection& conn = exchange.connection();
  std::string_view host = request.host();
  if (size_t colon = host.rfind(':');
      colon != std::string_view::npos && host.find(']', colon) == std::string_view::npos) {
    host = host.substr(0, colon);
  }
  std::string server_name = host.empty() ? conn.local_address().to_ip() : std::string(host);
  auto head_writer = [&request, filename = std::move(filename), script, uri = state.path,
                      root = block.root, server_name = std::move(server_name),
                      local = conn.local_address(), peer = conn.peer_address(),
                      software = std::string_view(software_)](net::Buffer& out,
                                                             std::optional<uint64_t> length) {
    fastcgi::append_begin_request(out, 1, fastcgi::Role::kResponder, /*keep_conn=*/true);
    fastcgi::ParamsWriter params(out, 1);
    fastcgi::CgiContext cgi;
    cgi.script_filename = filename;
    cgi.script_name = script;
    cgi.document_root = root;
    cgi.document_uri = uri;
    cgi.server_software = software;
    cgi.server_name = server_name;
    cgi.server_address = local;
    cgi.remote_address = peer;
    fastcgi::write_cgi_params(params, request, cgi, length);
    params.finish();
  };
  fastcgi::Call::start(exchange, *state.pools[block.index], options, std::move(head_writer),
                       std::move(tap));
}

}  // namespace tern::server
