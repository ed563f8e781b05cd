#include "server/observability/metrics.h"
#include "server/handlers/fastcgi_handler.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <stdexcept>

#include "base/log.h"
#include "fastcgi/params.h"
#include "fastcgi/script_path.h"
#include "http/error_page.h"
#include "http/uri.h"
#include "net/connection_pool.h"
#include "net/event_loop.h"
#include "net/tcp_connection.h"
#include "files/static_files.h"
#include "server/handlers/upstream_cache.h"
#include "server/regex.h"
#include "server/upstreams.h"
#include "files/open_file_cache.h"

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

std::string join(const std::vector<std::string>& items, std::string_view separator) {
  std::string out;
  for (const std::string& item : items) {
    if (!out.empty()) out += separator;
    out += item;
  }
  return out;
}

}  // namespace

struct FastCgiRoutes::Block {
  FastCgiConfig config;
  upstream::Balancer::Method balance = upstream::Balancer::Method::kRoundRobin;
  std::string root;  // without a trailing '/'
  std::optional<std::string> suffix;
  std::optional<Regex> pattern;
  std::string log_name;
  std::string allow;  // the methods, for a 405's Allow
  std::unique_ptr<UpstreamCache> cache;  // null without one
  http::ExchangeHandler handler;
  size_t index = 0;  // position in blocks_ and in each LoopState's script caches
  size_t pool = 0;   // position in pools_ and in each LoopState's groups

  bool matches(std::string_view path) const {
    if (suffix) return path.ends_with(*suffix);
    return pattern->search(path);
  }
  bool allows(std::string_view method) const {
    for (const std::string& m : config.methods) {
      if (m == method) return true;
    }
    return false;
  }
};

struct FastCgiRoutes::LoopState {
  // What route() found, for the handle() that runs right after it.
  struct Route {
    const Block* block = nullptr;
    std::string script;     // the script's URI path
    std::string path_info;  // what followed it
    int status = 0;         // 0, or the error to answer (404, 403)
  };

  std::vector<std::unique_ptr<files::OpenFileCache>> scripts;      // one per block: what exists
  std::string path;   // scratch for the normalised path
  std::string probe;  // scratch for a candidate script
  Route route;
};

FastCgiRoutes::FastCgiRoutes(const Config& config, const std::vector<FastCgiConfig>& blocks,
                             std::string software, const CacheZones* caches, Metrics* metrics)
    : software_(std::move(software)),
      server_name_(config.server_name),
      temp_dir_(config.temp_dir),
      symlinks_anywhere_(config.static_files.allow_symlinks_outside_root),
      cache_valid_(config.static_files.cache_valid),
      groups_([this](net::EventLoop* loop, size_t pool) { return make_group(loop, pool); }) {
  metrics_ = metrics;
  for (const FastCgiConfig& block_config : blocks) {
    auto block = std::make_unique<Block>();
    block->config = block_config;
    block->root = block_config.root.empty() ? config.static_files.root : block_config.root;
    while (block->root.size() > 1 && block->root.back() == '/') block->root.pop_back();
    // Checked here, on the main thread: the loops open it again for their
    // script caches and must not fail.
    int fd = ::open(block->root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
      throw std::runtime_error("fastcgi block at line " + std::to_string(block_config.line) +
                               ": cannot open root " + block->root);
    }
    ::close(fd);
    block->suffix = literal_suffix(block_config.match);
    if (!block->suffix) block->pattern.emplace(block_config.match);
    // Its php-fpm servers: the address of `pass`, the name, or the
    // [[upstream]] it names.
    UpstreamConfig application;
    if (block_config.group.empty()) {
      UpstreamServerConfig server;
      server.address = block_config.address;
      server.host = block_config.host;
      server.port = block_config.port;
      server.address_text = block_config.host.empty() ? block_config.address.to_string() : block_config.pass;
      application.name = server.address_text;
      application.servers.push_back(std::move(server));
    } else {
      for (const UpstreamConfig& group : config.upstreams) {
        if (group.name == block_config.group) application = group;
      }
      if (application.name.empty()) {
        throw std::runtime_error("fastcgi block at line " + std::to_string(block_config.line) +
                                 ": no [[upstream]] named " + block_config.group);
      }
    }
    block->balance = group_method(application.method);
    block->log_name = "fastcgi " + application.name;
    block->allow = join(block_config.methods, ", ");
    if (block_config.cache) block->cache = make_upstream_cache(caches, *block_config.cache, metrics);
    block->index = blocks_.size();
    TERN_LOG_INFO("fastcgi: {} -> {}, up to {} connection(s) per worker (php-fpm needs "
                  "pm.max_children >= that x workers), request buffering {}, response "
                  "buffering {}{}",
                  block_config.match, block_config.pass, block_config.pool,
                  block_config.request_buffering ? "on" : "off",
                  block_config.response_buffering ? "on" : "off",
                  block_config.cache ? ", cache " + block_config.cache->zone : std::string());
    Block* raw = block.get();
    // What route() hands the chain to say "this block's"; FastCgiHandler
    // runs the block through start(), with the request's route.
    block->handler = [](http::Exchange& exchange) {
      http::write_error_page(exchange.writer(), 500);
      exchange.finish();
    };
    // The application and how it is pooled: blocks alike share one pool.
    const FastCgiConfig& c = block_config;
    const std::string key = fmt::format("{}|{}|{}|{}|{}", c.group.empty() ? application.name : "group " + c.group,
                                        c.pool, c.queue, c.connect_timeout.count(), c.queue_timeout.count());
    auto pool = std::find_if(pools_.begin(), pools_.end(), [&key](const Pool& p) { return p.key == key; });
    if (pool == pools_.end()) {
      block->pool = pools_.size();
      pools_.push_back({key, raw});
      applications_.push_back(std::move(application));
    } else {
      block->pool = static_cast<size_t>(pool - pools_.begin());
      TERN_LOG_INFO("fastcgi: {} shares the connections of the block at line {}", block_config.match,
                    pool->first->config.line);
    }
    blocks_.push_back(std::move(block));
  }
  names_ = std::make_unique<UpstreamNames>(applications_, config);
}

FastCgiRoutes::~FastCgiRoutes() { names_->stop(); }

std::vector<upstream::GroupServer> FastCgiRoutes::servers(size_t pool) const {
  return group_servers(names_->named(pool) ? names_->resolved(pool) : applications_[pool]);
}

std::unique_ptr<upstream::Group> FastCgiRoutes::make_group(net::EventLoop* loop, size_t pool) const {
  const Block& block = *pools_[pool].first;
  net::ConnectionPoolOptions options;
  options.max_connections = block.config.pool;
  options.max_idle = block.config.pool;
  options.max_waiting = block.config.queue;
  options.connect_timeout = block.config.connect_timeout;
  options.queue_timeout = block.config.queue_timeout;
  const std::vector<upstream::GroupServer> servers = this->servers(pool);
  auto group = std::make_unique<upstream::Group>(loop, block.log_name, servers, block.balance, options);
  if (metrics_ != nullptr) metrics_->count_group(loop, "fastcgi", applications_[pool].name, *group, servers);
  return group;
}

void FastCgiRoutes::start_names(net::EventLoop* loop) {
  names_->start(loop, [this](size_t pool) { groups_.remake(pool); });
}

void FastCgiRoutes::stop_names() { names_->stop(); }

void FastCgiRoutes::init_loop(net::EventLoop* loop) {
  groups_.init_loop(loop, pools_.size());
  LoopState* state = &loops_.emplace(loop);
  for (const auto& block : blocks_) {
    files::OpenFileCacheOptions scripts;
    scripts.valid_for = cache_valid_;
    scripts.symlinks = symlinks_anywhere_ ? files::SymlinkPolicy::kAnywhere : files::SymlinkPolicy::kInsideRoot;
    scripts.memory_max_file_bytes = 0;
    scripts.open_for_reading = false;  // php-fpm reads them, not us
    state->scripts.push_back(std::make_unique<files::OpenFileCache>(block->root, scripts));
  }
}

void FastCgiRoutes::shutdown(const std::vector<net::EventLoop*>& loops) { groups_.close(loops); }

void FastCgiRoutes::retire_loop(net::EventLoop* loop) { groups_.retire_loop(loop); }

const http::ExchangeHandler* FastCgiRoutes::route(size_t index, std::string_view normalized) {
  LoopState* state = loops_.current();
  if (state == nullptr || index >= blocks_.size()) return nullptr;
  state->path.assign(normalized);
  const std::string& path = state->path;
  const auto now = net::EventLoop::current()->clock().now();
  LoopState::Route& route = state->route;
  auto is_script = [&](const Block& block, std::string_view candidate, int* error) {
    files::OpenFileCache::FileResult found = state->scripts[block.index]->find(candidate, now);
    if (found && found.value()->is_regular()) return true;
    *error = found ? 404 : files::OpenFileCache::http_status(found.error());
    return false;
  };
  const auto& block = blocks_[index];
  const fastcgi::ScriptPath found = fastcgi::find_script_path(
      path, block->config.index, 0, &state->probe, [&](std::string_view name) { return block->matches(name); },
      [&](std::string_view name, int* error) { return is_script(*block, name, error); });
  if (found.status < 0) return nullptr;
  // A status: its kind of path, but no script; answered here, not by the
  // static files (which would send the source of a script they can read).
  route = {block.get(), found.status == 0 ? std::string(found.script) : path, std::string(found.path_info),
           found.status};
  return &block->handler;
}

void FastCgiRoutes::start(size_t block, const Route& route, http::Exchange& exchange, InternalRedirect redirect) {
  handle(*blocks_[block], route, exchange, std::move(redirect));
}

void FastCgiRoutes::handle(const Block& block, const Route& chain_route, http::Exchange& exchange,
                           InternalRedirect redirect) {
  const http::Request& request = exchange.request();
  LoopState& state = *loops_.current();
  const LoopState::Route& route = state.route;
  if (route.block != &block) {
    // route() chose this block for this request a moment ago.
    http::write_error_page(exchange.writer(), 500);
    return exchange.finish();
  }
  if (route.status != 0) {
    http::write_error_page(exchange.writer(), route.status);
    return exchange.finish();
  }
  // A PURGE the cache takes (from a network its `purge` allows) is the
  // cache's method, not one the application must accept.
  UpstreamCache::Miss miss;
  const bool purge = block.cache && request.method() == http::Method::kPurge;
  if (purge && block.cache->answer(chain_route, exchange, &miss)) return;
  if (!block.allows(request.method_text())) {
    http::write_error_page(exchange.writer(), 405, block.allow);
    return exchange.finish();
  }
  if (block.cache && !purge && block.cache->answer(chain_route, exchange, &miss)) return;

  upstream::CallOptions options;
  options.read_timeout = block.config.read_timeout;
  // Several php-fpm pools: a failed attempt may go to another.
  upstream::Group* group = groups_.get(block.pool);
  options.next_server = group->size() > 1;
  if (block.balance == upstream::Balancer::Method::kHash) options.hash_key = exchange.client_address().to_ip();
  options.log_name = block.log_name;
  options.request_buffering = block.config.request_buffering;
  options.response_buffering = block.config.response_buffering;
  options.response_memory = block.config.response_buffer;
  options.max_temp_file = block.config.max_temp_file;
  options.response_head = block.config.response_head;
  options.temp_dir = temp_dir_;
  options.internal_redirect = std::move(redirect);
  // What PARAMS need beyond the request, held by the writer (it runs again
  // if the request is retried, and for a buffered body at its end). The
  // request is given to it: the call's exchange may be a cache's refresh
  // (background_exchange.h), with a copy of this one.
  auto head_writer = [held = fastcgi::HeldCgiContext(exchange, {block.root, route.script, route.path_info, state.path},
                                                     server_name_, software_)](
                         net::Buffer& out, const http::Request& asked, std::optional<uint64_t> length,
                         const UpstreamCache::Asks& cache) {
    fastcgi::append_begin_request(out, 1, fastcgi::Role::kResponder, /*keep_conn=*/true);
    fastcgi::ParamsWriter params(out, 1);
    fastcgi::CgiContext cgi = held.view();
    cgi.whole_response = cache.whole_response;
    cgi.added = cache.conditions;
    cgi.method = cache.method;
    fastcgi::write_cgi_params(params, asked, cgi, length);
    params.finish();
  };

  if (!block.cache) {
    return fastcgi::relay(exchange, *group, options,
                          [&request, writer = std::move(head_writer)](net::Buffer& out,
                                                                      std::optional<uint64_t> length) mutable {
                            writer(out, request, length, UpstreamCache::Asks{});
                          },
                          nullptr);
  }
  // The writer holds what it needs of the route: the call may start after
  // a wait for another request's fill.
  options.extra_header_name = "Cache-Status";
  block.cache->fetch(exchange, std::move(miss),
                     [this, pool = block.pool, options = std::move(options), head_writer = std::move(head_writer)](
                         http::Exchange& ex, UpstreamCache::Forward cached) mutable {
                       // Looked up now: the loop's pools may have been made
                       // again while the request waited.
                       upstream::Group* now = groups_.get(pool);
                       if (now == nullptr) {
                         http::write_error_page(ex.writer(), 502);
                         return ex.finish();
                       }
                       options.extra_header_value = cached.status;
                       // The conditions' views live as long as the tap, in the call.
                       fastcgi::relay(ex, *now, options,
                                      // The exchange's own request: it may be a
                                      // refresh of the server's (background_exchange.h).
                                      [&request = ex.request(), writer = std::move(head_writer), asks = cached.asks](
                                          net::Buffer& out, std::optional<uint64_t> length) mutable {
                                        writer(out, request, length, asks);
                                      },
                                      std::move(cached.tap));
                     });
}

}  // namespace tern::server
