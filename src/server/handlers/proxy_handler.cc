#include "server/handlers/proxy_handler.h"

#include "base/log.h"
#include "http/chars.h"
#include "http/error_page.h"
#include "http/field_values.h"
#include "http/uri.h"
#include "net/event_loop.h"
#include "proxy/http_codec.h"
#include "server/handlers/location_handlers.h"
#include "server/observability/metrics.h"
#include "server/sites.h"
#include "server/upstreams.h"
#include "tls/client_context.h"
#include "upstream/call.h"

namespace tern::server {

// A proxy's TLS settings with the name filled in: nginx's $proxy_host, the
// group's name or the address's IP (a Unix socket needs a name: the config
// says so). `declared`: whether its group is an [[upstream]].
std::optional<UpstreamTlsConfig> proxy_tls(const ProxyConfig& proxy, bool declared) {
  if (!proxy.tls) return std::nullopt;
  UpstreamTlsConfig tls = *proxy.tls;
  if (tls.name.empty()) {
    auto address = net::SocketAddress::parse(proxy.group);
    if (declared) {
      tls.name = proxy.group;
    } else if (address && !address->is_unix()) {
      tls.name = address->inet().to_ip();
    }
  }
  return tls;
}

// How long a proxy's connects may take: the location's own, else its
// [[upstream]]'s (`declared`, null for an address), else the default.
std::chrono::milliseconds proxy_connect_timeout(const ProxyConfig& proxy, const UpstreamConfig* declared) {
  if (proxy.connect_timeout) return *proxy.connect_timeout;
  return declared != nullptr ? declared->connect_timeout : UpstreamConfig().connect_timeout;
}

std::string_view proxy_host(const ProxyConfig& proxy) {
  return proxy.group.starts_with("unix:") ? std::string_view("localhost") : std::string_view(proxy.group);
}

std::vector<UpstreamConfig> proxy_groups(const Config& config) {
  // A group per upstream and scheme: the [[upstream]]s a proxy passes to
  // over http:// (or none does), then one per [[upstream]] or address and
  // TLS settings passed to over https://, then one per address named
  // directly over http://, in the order first named.
  auto passes = [&config](const std::string& name, bool tls) {
    for (const SiteConfig& site : config.sites) {
      for (const LocationConfig& l : site.locations) {
        for (const ProxyConfig* proxy : location_proxies(l)) {
          if (proxy->group == name && proxy->tls.has_value() == tls) return true;
        }
      }
    }
    return false;
  };
  std::vector<UpstreamConfig> groups;
  for (const UpstreamConfig& group : config.upstreams) {
    if (passes(group.name, false) || !passes(group.name, true)) groups.push_back(group);
  }
  auto find = [&groups](const std::string& name, const std::optional<UpstreamTlsConfig>& tls,
                        std::chrono::milliseconds connect_timeout) {
    return std::any_of(groups.begin(), groups.end(), [&](const UpstreamConfig& g) {
      return g.name == name && g.tls == tls && g.connect_timeout == connect_timeout;
    });
  };
  for (const bool tls_pass : {true, false}) {
    for (const SiteConfig& site : config.sites) {
      for (const LocationConfig& l : site.locations) {
        for (const ProxyConfig* proxy : location_proxies(l)) {
          if (proxy->tls.has_value() != tls_pass) continue;
          const std::string& name = proxy->group;
          auto declared = std::find_if(config.upstreams.begin(), config.upstreams.end(),
                                       [&](const UpstreamConfig& g) { return g.name == name; });
          const std::optional<UpstreamTlsConfig> tls = proxy_tls(*proxy, declared != config.upstreams.end());
          const std::chrono::milliseconds connect_timeout =
              proxy_connect_timeout(*proxy, declared != config.upstreams.end() ? &*declared : nullptr);
          if (find(name, tls, connect_timeout)) continue;
          UpstreamConfig group;
          if (declared != config.upstreams.end()) {
            group = *declared;
          } else {
            UpstreamServerConfig server;
            if (auto address = net::SocketAddress::parse(name)) {
              server.address = *address;
            } else if (!parse_host_port(name, &server.host, &server.port)) {
              continue;  // the config refused it already
            }
            group.name = name;
            group.line = proxy->line;
            server.address_text = name;
            server.max_fails = 0;  // a single server is never taken out
            group.servers.push_back(server);
          }
          group.tls = tls;
          group.connect_timeout = connect_timeout;
          groups.push_back(std::move(group));
        }
      }
    }
  }
  return groups;
}

ProxyRoutes::ProxyRoutes(const Config& config)
    : groups_(proxy_groups(config)),
      secure_(groups_.size()),
      temp_dir_(config.temp_dir),
      names_(std::make_unique<UpstreamNames>(groups_, config)),
      loops_([this](net::EventLoop* loop, size_t index) { return make_group(loop, index); }) {
  declared_ = config.upstreams;
  for (size_t i = 0; i < groups_.size(); ++i) {
    const UpstreamConfig& group = groups_[i];
    std::string servers;
    for (const UpstreamServerConfig& server : group.servers) {
      servers += servers.empty() ? "" : ", ";
      servers += server.address_text;
      if (server.weight != 1) servers += " weight " + std::to_string(server.weight);
      if (server.backup) servers += " (backup)";
    }
    std::string tls;
    if (group.tls) {
      // A context per server: each resumes the sessions its server gave.
      tls::ClientSettings settings;
      settings.name = group.tls->name;
      settings.verify = group.tls->verify;
      settings.ca = group.tls->ca;
      settings.client = {group.tls->cert, group.tls->key};
      settings.handshake_timeout = group.connect_timeout;
      for (size_t j = 0; j < group.servers.size(); ++j) {
        try {
          secure_[i].push_back(std::make_shared<tls::ClientContext>(settings));
        } catch (const std::exception& e) {
          throw std::runtime_error("proxy to " + group.name + " over TLS: " + e.what());
        }
      }
      tls = " over TLS (" + (settings.name.empty() ? std::string("no name") : settings.name) +
            (!settings.verify          ? ", not verified"
             : settings.ca.empty() ? ", verified against the system's CAs"
                                   : ", verified against " + settings.ca) +
            ")";
    }
    TERN_LOG_INFO("proxy: upstream {}{}: {}; per worker and server, {} idle connection(s) kept, {}", group.name,
                  tls, servers, group.keepalive,
                  group.connections == 0 ? std::string("no cap on connections")
                                         : fmt::format("up to {} connection(s), then a queue of {}", group.connections,
                                                       group.queue));
  }
}

ProxyRoutes::~ProxyRoutes() { names_->stop(); }

std::vector<upstream::GroupServer> ProxyRoutes::servers(size_t index) const {
  const bool named = names_->named(index);
  std::vector<upstream::GroupServer> servers = group_servers(named ? names_->resolved(index) : groups_[index]);
  // A group given by name shares one TLS context among the addresses it
  // resolves to; otherwise each server has its own.
  for (size_t j = 0; j < servers.size() && !secure_[index].empty(); ++j) {
    servers[j].secure = secure_[index][named ? 0 : std::min(j, secure_[index].size() - 1)];
  }
  return servers;
}

ProxyRoutes::Generation ProxyRoutes::generation(size_t index) const {
  Generation made;
  made.servers = servers(index);
  const UpstreamConfig& config = groups_[index];
  if (config.health) {
    made.health = std::make_shared<upstream::HealthCheck>(main_loop_, "proxy " + config.name, made.servers,
                                                          *config.health);
    made.health->start();
  }
  return made;
}

void ProxyRoutes::start_health_checks(net::EventLoop* loop) {
  main_loop_ = loop;
  std::vector<Generation> made;
  for (size_t i = 0; i < groups_.size(); ++i) {
    made.push_back(generation(i));
    if (groups_[i].health) {
      TERN_LOG_INFO("proxy: upstream {}: health check GET {} every {} ms", groups_[i].name,
                    groups_[i].health->path, groups_[i].health->interval.count());
    }
  }
  {
    std::lock_guard lock(mu_);
    current_ = std::move(made);
  }
  names_->start(loop, [this](size_t index) { names_changed(index); });
}

void ProxyRoutes::stop_health_checks() {
  names_->stop();
  std::lock_guard lock(mu_);
  for (Generation& made : current_) {
    if (made.health) made.health->stop();
  }
}

std::unique_ptr<upstream::Group> ProxyRoutes::make_group(net::EventLoop* loop, size_t index) const {
  const UpstreamConfig& config = groups_[index];
  Generation made;
  bool started = false;
  {
    std::lock_guard lock(mu_);
    if (index < current_.size()) {
      made = current_[index];
      started = true;
    }
  }
  // Health checks not started (a program of one's own): the servers as they
  // are, unchecked.
  if (!started) made.servers = servers(index);
  net::ConnectionPoolOptions options;
  options.max_connections = config.connections == 0 ? net::ConnectionPoolOptions::kNoLimit : config.connections;
  options.max_idle = config.keepalive;
  options.max_waiting = config.queue;
  options.connect_timeout = config.connect_timeout;
  options.queue_timeout = config.queue_timeout;
  auto group = std::make_unique<upstream::Group>(loop, "proxy " + config.name, made.servers,
                                                 group_method(config.method), options);
  if (metrics_ != nullptr) metrics_->count_group(loop, "proxy", config.name, *group, made.servers);
  if (made.health) group->watch(made.health->up(), made.health);
  return group;
}

void ProxyRoutes::init_loop(net::EventLoop* loop) { loops_.init_loop(loop, groups_.size()); }

// Main loop. The old check stops, and goes once the loops' groups that
// read it are gone.
void ProxyRoutes::names_changed(size_t index) {
  Generation made = generation(index);
  {
    std::lock_guard lock(mu_);
    Generation& current = current_[index];
    if (current.health) {
      current.health->stop();
      stopped_health_.push_back(std::move(current.health));
    }
    current = std::move(made);
    std::erase_if(stopped_health_, [](const auto& old) { return old.use_count() == 1; });
  }
  loops_.remake(index);
}

void ProxyRoutes::shutdown(const std::vector<net::EventLoop*>& loops) { loops_.close(loops); }

void ProxyRoutes::retire_loop(net::EventLoop* loop) { loops_.retire_loop(loop); }

int ProxyRoutes::find(const ProxyConfig& proxy) const {
  auto declared = std::find_if(declared_.begin(), declared_.end(),
                               [&proxy](const UpstreamConfig& group) { return group.name == proxy.group; });
  const UpstreamConfig* group = declared != declared_.end() ? &*declared : nullptr;
  const std::optional<UpstreamTlsConfig> tls = proxy_tls(proxy, group != nullptr);
  const std::chrono::milliseconds connect_timeout = proxy_connect_timeout(proxy, group);
  for (size_t i = 0; i < groups_.size(); ++i) {
    if (groups_[i].name == proxy.group && groups_[i].tls == tls && groups_[i].connect_timeout == connect_timeout) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

upstream::Group* ProxyRoutes::group(size_t index) const {
  return loops_.get(index);
}

ProxyHandler::ProxyHandler(const ProxyRoutes* routes, const Location& location, const Chain* chain)
    : routes_(routes),
      chain_(chain),
      config_(*location.config.proxy),
      group_(routes->find(*location.config.proxy)),
      log_name_("proxy " + location.config.proxy->group),
      edits_{location.config.proxy->set_headers, location.config.proxy->remove_headers} {
  if (config_.path) {
    prefix_ = location.config.pattern;
    if (config_.redirect) rewrite_from_ = (config_.tls ? "https://" : "http://") + config_.group + *config_.path;
  }
  if (group_ >= 0) {
    const UpstreamConfig& group = routes->config(static_cast<size_t>(group_));
    if (group.method == UpstreamConfig::Method::kHash) hash_ = group.hash;
    proxy_protocol_ = group.proxy_protocol != 0;
  }
  if (config_.cache) cache_ = make_upstream_cache(routes->caches(), *config_.cache, routes->metrics());
}

std::string ProxyHandler::hash_key(const Route& route) const {
  if (hash_.empty()) return {};
  const http::Request& request = *route.request;
  if (hash_ == "$remote_addr") return route.client->to_ip();
  if (hash_ == "$request_uri") return std::string(request.uri());
  if (hash_.starts_with("$cookie_")) return std::string(cookie_value(request, std::string_view(hash_).substr(8)));
  return std::string(field_value(request, std::string_view(hash_).substr(6)));  // "$http_"

}

void ProxyHandler::start(const Route& route, http::Exchange& exchange) {
  upstream::Group* group = group_ >= 0 ? routes_->group(static_cast<size_t>(group_)) : nullptr;
  if (group == nullptr) {
    TERN_LOG_ERROR("{}: no such group on this worker", log_name_);
    http::write_error_page(exchange.writer(), 502);
    return exchange.finish();
  }
  UpstreamCache::Miss miss;
  if (cache_ && cache_->answer(route, exchange, &miss)) return;
  const http::Request& request = exchange.request();
  std::string target;
  if (config_.path) {
    // The location's prefix becomes the path of `pass`; the rest of the
    // (normalised) path follows, encoded again, then the query.
    target = *config_.path;
    std::string_view rest = route.path;
    if (rest.starts_with(prefix_)) rest.remove_prefix(prefix_.size());
    if (!target.empty() && target.back() == '/' && rest.starts_with('/')) rest.remove_prefix(1);
    http::append_percent_encoded_path(rest, &target);
    if (!request.query().empty()) target.append("?").append(request.query());
  } else {
    target = std::string(request.uri());
  }
  proxy::ForwardOptions forward;
  forward.target = target;
  forward.host = config_.host;
  // nginx's $proxy_host, for a request without a host (HTTP/1.0).
  forward.upstream_host = proxy_host(config_);
  forward.client = &exchange.client_address();
  forward.hop = route.connection_client;
  forward.edits = &edits_;
  forward.secure = exchange.secure() != nullptr;
  forward.client_certificate = forward.secure ? exchange.secure()->peer_certificate() : nullptr;

  upstream::CallOptions options;
  options.read_timeout = config_.read_timeout;
  options.send_timeout = config_.send_timeout;
  options.log_name = log_name_;
  options.request_buffering = config_.request_buffering;
  options.response_buffering = config_.response_buffering;
  options.response_memory = config_.response_buffer;
  options.max_temp_file = config_.max_temp_file;
  options.temp_dir = routes_->temp_dir();
  options.hash_key = hash_key(route);
  options.internal_redirect = accel_redirect(chain_, route.site);
  if (proxy_protocol_) {
    net::ProxyHeader& client = options.proxy_client.emplace();
    client.local = false;
    client.source = exchange.client_address();
    client.destination = exchange.local_address();
  }
  options.next_server = config_.next_upstream;
  options.next_on_error = config_.next_on_error;
  options.next_on_timeout = config_.next_on_timeout;
  options.next_on_status = config_.next_on_status;
  options.next_non_idempotent = config_.next_non_idempotent;
  options.max_tries = config_.next_upstream_tries;
  options.next_server_timeout = config_.next_upstream_timeout;
  if (!rewrite_from_.empty()) {
    options.rewrite_from = rewrite_from_;
    options.rewrite_to = prefix_;
  }
  options.response_head = config_.response_head;
  if (!cache_) {
    return upstream::Call::start<proxy::HttpCodec>(exchange, *group, options, nullptr, request, forward,
                                                   options.response_head);
  }
  // Everything the call needs of the route, held: it may start after a
  // wait for another request's fill.
  options.extra_header_name = "Cache-Status";
  cache_->fetch(exchange, std::move(miss),
                [this, options = std::move(options), forward, target = std::move(target)](
                    http::Exchange& ex, UpstreamCache::Forward cached) mutable {
                  // Looked up now: a moved name may have made the loop's
                  // group again while the request waited.
                  upstream::Group* now = routes_->group(static_cast<size_t>(group_));
                  if (now == nullptr) {
                    http::write_error_page(ex.writer(), 502);
                    return ex.finish();
                  }
                  options.extra_header_value = cached.status;
                  // The exchange may be a refresh of the server's own
                  // (background_exchange.h): what names the client comes
                  // from it, not from the one that began.
                  forward.client = &ex.client_address();
                  forward.hop = &ex.connection_client();
                  forward.client_certificate = ex.secure() != nullptr ? ex.secure()->peer_certificate() : nullptr;
                  forward.target = target;
                  forward.whole_response = cached.asks.whole_response;
                  forward.method = cached.asks.method;
                  forward.added = cached.asks.conditions;
                  upstream::Call::start<proxy::HttpCodec>(ex, *now, options, std::move(cached.tap), ex.request(),
                                                          forward, options.response_head);
                });
}

}  // namespace tern::server
