#include "server/server.h"

#include <algorithm>
#include <csignal>
#include <stdexcept>
#include <string>

#include <sodium.h>
#include <unistd.h>

#include "base/log.h"
#include "http2/http2_connection.h"

#ifndef TERN_VERSION
#define TERN_VERSION "0.0.0"
#endif
#include "net/event_loop.h"
#include "net/inherited_sockets.h"
#include "net/tcp_connection.h"
#include "server/acme/acme_manager.h"
#include "server/cache_zones.h"
#include "server/chain.h"
#include "server/limits/key_limits.h"
#include "server/handlers/fastcgi_handler.h"
#include "server/handlers/proxy_handler.h"
#include "server/observability/metrics.h"
#include "server/upstreams.h"
#include "server/sites.h"

namespace tern::server {
namespace {

http::HttpServerOptions http_options(const Config& config) {
  http::HttpServerOptions options;
  net::TcpServerOptions& tcp = options.tcp;
  tcp.name = "tern";
  // One worker means one thread that accepts and serves, as nginx's
  // worker_processes 1; more get an I/O thread each.
  tcp.io_threads = config.workers > 1 ? config.workers : 0;
  tcp.accept_mode = config.accept_mode;
  tcp.dispatch_policy = config.dispatch_policy;
  tcp.trigger = config.trigger;
  tcp.defer_accept = std::chrono::seconds(config.defer_accept ? 1 : 0);
  tcp.send_lowat = config.send_lowat;
  tcp.tcp_nopush = config.tcp_nopush;
  tcp.map_files_for_local_peers = config.static_files.zero_copy == StaticConfig::ZeroCopy::kAuto;
  tcp.cpu_affinity = config.cpu_affinity;
  tcp.max_connections_per_loop = config.max_connections_per_worker;
  options.limits = config.limits;
  if (config.http2.enabled) {
    http2::SessionLimits limits;
    limits.max_concurrent_streams = config.http2.max_concurrent_streams;
    limits.stream_window = config.http2.stream_window;
    limits.connection_window = config.http2.connection_window;
    options.http2 = http2::http2_protocol(limits);
    if (std::vector<net::InetAddress> h2c = flagged_addresses(config, &ListenConfig::h2c); !h2c.empty()) {
      options.http2_cleartext = [h2c = std::move(h2c)](const net::InetAddress& local) {
        return std::any_of(h2c.begin(), h2c.end(), [&](const net::InetAddress& a) { return a.covers(local); });
      };
    }
  }
  return options;
}

std::shared_ptr<const files::MimeTypes> mime_types(const Config& config) {
  auto mime = std::make_shared<files::MimeTypes>();
  for (const auto& [extension, type] : config.static_files.mime) mime->set(extension, type);
  return mime;
}

}  // namespace

void apply_log_config(const LogConfig& config) {
  log::Options options;
  options.level = config.level;
  options.file = config.error_log;
  options.max_file_bytes = config.max_file_bytes;
  options.max_files = config.max_files;
  options.flush_interval = config.flush_interval;
  log::init(options);
}

Server::Server(net::EventLoop* loop, Config config, std::string config_path)
    : loop_(loop),
      config_path_(std::move(config_path)),
      config_(std::make_shared<const Config>(std::move(config))),
      metrics_(std::make_unique<Metrics>()),
      blocked_(std::make_shared<const IpFilter>(config_->blocked)),
      proxy_senders_(std::make_shared<const std::vector<Cidr>>(proxy_protocol_senders(*config_))) {}

Server::~Server() {
  // Its thread posts to the main loop: joined first.
  std::unique_ptr<AcmeManager> acme;
  {
    std::lock_guard lock(acme_mu_);
    acme = std::move(acme_);
  }
  acme.reset();
  // Tasks post their answers to the loops: done before the loops stop. A
  // loop that submits from now on is refused (a 503).
  if (tasks_) tasks_->shutdown();
  if (prune_timer_.valid()) loop_->cancel(prune_timer_);
  if (tls_stats_timer_.valid()) loop_->cancel(tls_stats_timer_);
  if (status_timer_.valid()) loop_->cancel(status_timer_);
  if (upgrade_timer_.valid()) loop_->cancel(upgrade_timer_);
  // The pools belong to the I/O loops' threads: closed there while they run.
  if (!http_) return;
  if (upstreams_) {
    upstreams_->stop_health_checks();
    upstreams_->shutdown(http_->tcp_server().io_loops());
  }
  for (RetiredBlocks& retired : retired_upstreams_) retired.routes->shutdown(http_->tcp_server().io_loops());
}

void Server::expect_proxy_protocol(const Config& config) {
  {
    auto senders = std::make_shared<const std::vector<Cidr>>(proxy_protocol_senders(config));
    std::lock_guard lock(blocked_mu_);
    proxy_senders_ = std::move(senders);
  }
  for (const net::InetAddress& address : flagged_addresses(config, &ListenConfig::proxy_protocol)) {
    if (std::find(proxy_addresses_.begin(), proxy_addresses_.end(), address) != proxy_addresses_.end()) continue;
    proxy_addresses_.push_back(address);
    net::ProxyProtocolOptions options;
    options.timeout = config.limits.header_timeout;
    options.trusted = [this](const net::InetAddress& peer) {
      std::shared_ptr<const std::vector<Cidr>> senders;
      {
        std::lock_guard lock(blocked_mu_);
        senders = proxy_senders_;
      }
      return std::any_of(senders->begin(), senders->end(), [&](const Cidr& cidr) { return cidr.contains(peer); });
    };
    http_->tcp_server().set_proxy_protocol(address, std::move(options));
    TERN_LOG_INFO("listening: {} expects a PROXY protocol header (versions 1 and 2) from real_ip.from",
                  address.to_ip_port());
  }
}

const std::vector<net::InetAddress>& Server::listen_addresses() const {
  return http_->tcp_server().listen_addresses();
}

void Server::start() {
  loop_->assert_in_loop_thread();
  const Config& config = *config_;
  // Before any thread of ours: libsodium's set-up (its generator, the
  // hash functions it picks for this CPU) is not safe against their use.
  if (sodium_init() < 0) throw std::runtime_error("libsodium failed to initialise");
  // Signals first: SignalSet blocks them in this thread, and the I/O threads
  // started below inherit the mask (main() blocks them earlier still).
  signals_ = std::make_unique<net::SignalSet>(
      loop_, std::initializer_list<int>{SIGTERM, SIGINT, SIGQUIT, SIGHUP, SIGUSR1, SIGUSR2, SIGRTMIN},
      [this](int signo) { on_signal(signo); });
  access_log_.set_format(config.access_log_format);
  access_log_.open(config.access_log);

  http::HttpServerOptions options = http_options(config);
  options.tcp.inherited = inherited_;
  http_ = std::make_unique<http::HttpServer>(loop_, server::listen_addresses(config), std::move(options));
  if (!config.http2.enabled) {
    TERN_LOG_INFO("http2: off ([http2] enabled = false)");
  } else {
    for (const net::InetAddress& address : flagged_addresses(config, &ListenConfig::h2c)) {
      TERN_LOG_INFO("http2: {} takes HTTP/2 with prior knowledge (h2c) beside HTTP/1.1", address.to_ip_port());
    }
  }
  count_by_series(config);
  metrics_->set_extra([this](MetricsSnapshot* snapshot) { add_server_figures(snapshot); });
  // Blocking work (the users app's database and hashes, auth_basic's
  // password checks, the caches' large copies) off the loops.
  tasks_ = std::make_unique<TaskPool>("task", config.task_threads, 4096);
  caches_ = std::make_unique<CacheZones>(config.caches, config.user, config.group, tasks_.get());
  upstreams_ = std::make_unique<Upstreams>(config, metrics_.get(), caches_.get());
  upstreams_->start_health_checks(loop_);
  if (config.auth.enabled) start_users_app(config);
  // Fails early, on the main thread, if a root cannot be opened.
  std::shared_ptr<AcmeChallenges> acme = acme_challenges_for(config);
  chain_ = build_chain(config, upstreams_.get(), acme);
  upstream_chains_.push_back(chain_);
  apply_key_limits(config);
  if (config.tls_sessions.tickets) {
    ticket_keys_ = std::make_shared<tls::TicketKeys>(config.tls_sessions.ticket_key_rotation);
  }
  apply_tls(tls_for(config, *chain_, acme.get()));
  start_acme(config, std::move(acme));
  // Every request head is resolved by the sites, a handler of the
  // HttpServer's chain (its Router has no routes here).
  http_->add_handler(std::make_unique<SitesHandler>(&chains_));
  http_->set_thread_init_callback([this](net::EventLoop* loop) {
    upstreams_->init_loop(loop);
    chains_.emplace(loop, chain_, &metrics_->loop(loop));
  });
  // Installed even when the log is off: SIGHUP may turn it on.
  http_->set_response_callback(
      [this](const http::Request& r, const net::TcpConnection& c, const http::ResponseWriter& w) {
        metrics_->record(c.loop(), r, w.logged_status());
        access_log_.log(r, c, w);
      });
  // Out of descriptors at accept: connections come before cached files.
  // The accepting loop's caches give way at once; the other loops' (at most
  // every 100 ms) for the connections after this one.
  http_->tcp_server().set_release_callback([this](net::EventLoop* accepting) {
    size_t closed = 0;
    const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::steady_clock::now().time_since_epoch()).count();
    int64_t last = last_shed_request_ms_.load(std::memory_order_relaxed);
    const bool ask_others =
        now_ms - last >= 100 && last_shed_request_ms_.compare_exchange_strong(last, now_ms);
    std::vector<net::EventLoop*> others;
    chains_.for_each([&](net::EventLoop* loop, ChainLoop& chain) {
      if (loop == accepting) {
        closed += chain.shed_descriptors() + caches_->shed_descriptors();
      } else if (ask_others) {
        others.push_back(loop);
      }
    });
    for (net::EventLoop* loop : others) {
      loop->queue_in_loop([this, loop] {
        if (ChainLoop* chain = chains_.get(loop)) (void)chain->shed_descriptors();
        (void)caches_->shed_descriptors();
      });
    }
    return closed;
  });
  expect_proxy_protocol(config);
  http_->tcp_server().set_accept_filter([this](const net::InetAddress& peer) {
    std::shared_ptr<const IpFilter> filter;
    {
      std::lock_guard lock(blocked_mu_);
      filter = blocked_;
    }
    bool refused = filter->blocked(peer);
    if (refused) TERN_LOG_DEBUG("refused connection from blocked address {}", peer.to_ip());
    return !refused;
  });
  const size_t handed = inherited_ != nullptr ? inherited_->size() : 0;
  if (auto started = http_->start(); !started) {
    std::string addresses;
    for (const auto& a : server::listen_addresses(config)) addresses += (addresses.empty() ? "" : ", ") + a.to_ip_port();
    throw std::runtime_error("cannot listen on " + addresses + ": " + started.error().message());
  }
  if (handed > 0) {
    const std::vector<net::InetAddress> unused = inherited_->close_rest();
    const char* from = std::getenv("TERN_UPGRADE_FROM");
    TERN_LOG_INFO("listening: took {} of the {} listening socket(s) handed over by {}", handed - unused.size(),
                  handed, from != nullptr ? fmt::format("process {} (upgrade)", from) : "the service manager");
    for (const net::InetAddress& address : unused) {
      TERN_LOG_WARN("listening: closed the socket handed over for {}: the config does not listen there",
                    address.to_ip_port());
    }
  }
  pid_file_ = std::make_unique<PidFile>(config.pid_file);
}

void Server::start_users_app(const Config& config) {
  const AuthConfig& a = config.auth;
  auto store = auth::open_user_store(a.store, a.db_pool);
  if (!store) throw std::runtime_error("auth.store " + a.store + ": " + store.error().message());
  auth::UsersOptions options;
  options.secret = a.secret;
  if (options.secret.empty()) {
    // Only SQLite gets here (the config requires a secret otherwise): the
    // key lives beside the database.
    std::string path = a.store.substr(std::string_view("sqlite:").size());
    size_t slash = path.rfind('/');
    std::string key_path = (slash == std::string::npos ? std::string(".") : path.substr(0, slash)) +
                           "/session.key";
    auto secret = auth::load_or_create_secret(key_path);
    if (!secret) throw std::runtime_error(key_path + ": " + secret.error().message());
    options.secret = *secret;
  }
  options.password_ops = a.password_ops;
  options.password_memory = a.password_memory;
  options.session_ttl = std::chrono::duration_cast<std::chrono::seconds>(a.session_ttl);
  options.login_attempts = a.login_attempts;
  options.register_attempts = a.register_attempts;
  options.account_login_failures = a.account_login_failures;
  users_ = std::make_unique<auth::UsersApp>(std::move(*store), options, tasks_.get());
  TERN_LOG_INFO("users: {} (argon2id ops {}, memory {} KiB), {} task threads",
                users_->store().describe(), a.password_ops, a.password_memory / 1024,
                config.task_threads);
}

std::shared_ptr<const Chain> Server::build_chain(const Config& config, Upstreams* upstreams,
                                                std::shared_ptr<const AcmeChallenges> acme) const {
  auto sites = std::make_shared<const Sites>(config, metrics_.get());
  // The running limits' tables carry on where the new ones keep them.
  auto limits = std::make_shared<const KeyLimits>(config.key_limits, chain_ ? chain_->key_limits().get() : nullptr);
  return std::make_shared<const Chain>(std::move(sites), config, mime_types(config), upstreams->fastcgi.get(),
                                       upstreams->proxy.get(), users_.get(), &chains_, metrics_.get(),
                                       std::move(limits), tasks_.get(), std::move(acme));
}

void Server::apply_key_limits(const Config& config) {
  std::shared_ptr<net::ConnectionGate> gate;
  if (!config.limit_connections.empty()) {
    gate = std::make_shared<ConnectionLimits>(chain_->key_limits(), config.limit_connections);
  }
  http_->tcp_server().set_gate(std::move(gate));
  std::lock_guard lock(limits_mu_);
  key_limits_ = chain_->key_limits();
}

void Server::reload() {
  if (config_path_.empty()) {
    TERN_LOG_WARN("SIGHUP: running without a config file, nothing to reload");
    return;
  }
  Config fresh;
  try {
    fresh = load_config(config_path_);
  } catch (const ConfigError& e) {
    TERN_LOG_ERROR("SIGHUP: keeping the running configuration: {}", e.what());
    return;
  }
  const Config& old = *config_;
  // Settings only a restart applies keep their running values.
  std::vector<std::string> restart = keep_restart_settings(old, fresh);
  rebuild_implicit_site(fresh);
  // What could fail is checked before anything changes; the listening
  // addresses last, since changing them is the first change.
  // New FastCGI blocks or proxy groups get new pools; the old ones wind
  // down behind the requests that began under them.
  const bool new_blocks = !Upstreams::same(fresh, old);
  std::unique_ptr<Upstreams> upstreams;
  std::shared_ptr<const Chain> chain;
  std::vector<TlsAddress> tls;
  std::shared_ptr<AcmeChallenges> acme;
  try {
    if (new_blocks) upstreams = std::make_unique<Upstreams>(fresh, metrics_.get(), caches_.get());
    acme = acme_challenges_for(fresh);
    chain = build_chain(fresh, new_blocks ? upstreams.get() : upstreams_.get(), acme);
    tls = tls_for(fresh, *chain, acme.get());
  } catch (const ConfigError& e) {
    TERN_LOG_ERROR("SIGHUP: keeping the running configuration: {}", e.what());
    return;
  } catch (const std::exception& e) {
    TERN_LOG_ERROR("SIGHUP: keeping the running configuration: {}: {}", config_path_, e.what());
    return;
  }
  // Contexts before addresses: a new TLS address accepts with its own.
  try {
    apply_tls(std::move(tls));
  } catch (const std::exception& e) {
    TERN_LOG_ERROR("SIGHUP: keeping the running configuration: {}: {}", config_path_, e.what());
    return;
  }
  if (!stopping_) {
    expect_proxy_protocol(fresh);
    if (auto listening = http_->tcp_server().set_listen_addresses(server::listen_addresses(fresh)); !listening) {
      TERN_LOG_ERROR("SIGHUP: keeping the running configuration: {}: cannot listen: {}", config_path_,
                     listening.error().message());
      return;
    }
  }

  if (fresh.log.error_log != old.log.error_log || fresh.log.max_file_bytes != old.log.max_file_bytes ||
      fresh.log.max_files != old.log.max_files || fresh.log.flush_interval != old.log.flush_interval) {
    try {
      apply_log_config(fresh.log);
    } catch (const std::exception& e) {
      TERN_LOG_ERROR("SIGHUP: cannot open error log {}: {}", fresh.log.error_log, e.what());
      fresh.log = old.log;
    }
  }
  log::set_level(fresh.log.level);
  count_by_series(fresh);
  try {
    access_log_.set_format(fresh.access_log_format);
    access_log_.open(fresh.access_log);
  } catch (const std::exception& e) {
    TERN_LOG_ERROR("SIGHUP: cannot open access log {}: {}", fresh.access_log, e.what());
  }
  {
    auto filter = std::make_shared<const IpFilter>(fresh.blocked);
    std::lock_guard lock(blocked_mu_);
    blocked_ = std::move(filter);
  }
  http_->set_limits(fresh.limits);
  chain_ = chain;
  apply_key_limits(fresh);
  Upstreams* fresh_blocks = new_blocks ? upstreams.get() : nullptr;
  Upstreams* old_blocks = new_blocks ? upstreams_.get() : nullptr;
  if (new_blocks) {
    // The new groups' checks begin before the loops' groups that read them.
    upstreams_->stop_health_checks();
    upstreams->start_health_checks(loop_);
  }
  for (net::EventLoop* loop : http_->tcp_server().io_loops()) {
    // One step per loop: its pools exist before its chain names them.
    loop->run_in_loop([this, loop, chain, fresh_blocks, old_blocks] {
      if (fresh_blocks != nullptr) fresh_blocks->init_loop(loop);
      try {
        chains_.emplace(loop, chain, &metrics_->loop(loop));
      } catch (const std::exception& e) {
        TERN_LOG_ERROR("SIGHUP: sites keep their running settings: {}", e.what());
      }
      if (old_blocks != nullptr) old_blocks->retire_loop(loop);
    });
  }
  if (new_blocks) {
    // Kept while requests that began under them still use them.
    retired_upstreams_.push_back({std::move(upstreams_), std::move(upstream_chains_)});
    upstreams_ = std::move(upstreams);
    upstream_chains_.clear();
  }
  std::erase_if(upstream_chains_, [](const std::weak_ptr<const Chain>& c) { return c.expired(); });
  upstream_chains_.push_back(chain);
  prune_retired_blocks();
  config_ = std::make_shared<const Config>(std::move(fresh));
  start_acme(*config_, std::move(acme));
  TERN_LOG_INFO("SIGHUP: configuration reloaded from {}", config_path_);
  if (!restart.empty()) {
    std::string keys;
    for (const std::string& key : restart) keys += (keys.empty() ? "" : ", ") + key;
    TERN_LOG_WARN("SIGHUP: not applied until a restart (running values kept): {}", keys);
  }
}

void Server::prune_retired_blocks() {
  if (prune_timer_.valid()) loop_->cancel(prune_timer_);
  prune_timer_ = net::TimerId{};
  std::erase_if(retired_upstreams_, [this](RetiredBlocks& retired) {
    const bool in_use = std::any_of(retired.chains.begin(), retired.chains.end(),
                                    [](const std::weak_ptr<const Chain>& c) { return !c.expired(); });
    if (in_use) return false;
    retired.routes->shutdown(http_->tcp_server().io_loops());
    TERN_LOG_INFO("fastcgi, proxy: the pools of replaced blocks are closed (no request uses them)");
    return true;
  });
  // Requests in flight end on their own time: look again later.
  if (!retired_upstreams_.empty()) {
    prune_timer_ = loop_->run_after(std::chrono::seconds(5), [this] {
      prune_timer_ = net::TimerId{};
      prune_retired_blocks();
    });
  }
}

}  // namespace tern::server
