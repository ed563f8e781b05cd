// Server: the tern web server assembled from its parts: an HttpServer on the
// configured addresses, the sites and their locations on one handler chain
// (server/chain.h: static files with an open-file cache per loop, FastCGI,
// the users app, redirects), the access log, the blocklist, and the
// reactions to signals:
//   SIGTERM, SIGINT  stop accepting, let in-flight responses finish (up to
//                    shutdown_timeout), close idle keep-alive connections, exit
//   SIGQUIT          the same, but in-flight responses finish however long
//                    they take (a second signal of either kind: exit now)
//   SIGHUP           re-read the config file and apply it without dropping
//                    connections: logging, access log, blocklist, timeouts
//                    and limits, [static], sites and locations, listening
//                    addresses, FastCGI blocks (new pools; the old ones
//                    serve the requests that began under them) and TLS
//                    certificates (renewed ones for the connections from
//                    then on; established ones keep theirs). A file,
//                    root or address that fails keeps the running
//                    configuration.
//                    What needs a restart (workers, [auth], ...) keeps its
//                    running value and is named in the log.
//   SIGUSR1          reopen the log files (after logrotate moved them)
//   SIGUSR2          binary upgrade: start the executable again with the
//                    listening sockets handed over (server/process/upgrade.h)
//   SIGRTMIN         start / stop a CPU profile (-DTERN_PROFILER=ON builds)
//
// Owned by main(); runs on the main thread's loop.
#pragma once

#include <atomic>
#include <mutex>
#include <vector>
#include <memory>
#include <string>

#include "auth/users_app.h"
#include "base/task_pool.h"
#include "http/http_server.h"
#include "net/loop_local.h"
#include "net/signal_set.h"
#include "server/observability/access_log.h"
#include "server/config/config.h"
#include "server/process/control.h"
#include "server/ip_filter.h"
#include "files/mime_types.h"
#include "server/tls_setup.h"

namespace tern::net {
class InheritedSockets;
}

namespace tern::server {

class AcmeChallenges;
class AcmeManager;
class Chain;
class CacheZones;
class ChainLoop;
class KeyLimits;
class Metrics;
struct MetricsSnapshot;
struct Upstreams;

class Server {
 public:
  // `config_path` is re-read on SIGHUP; empty when running on defaults.
  Server(net::EventLoop* loop, Config config, std::string config_path);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds and starts serving. Throws std::runtime_error with a message for
  // the operator when it cannot (address in use, root missing).
  void start();

  void reload();
  void reopen_logs();
  // Stops accepting and exits once every connection closed: within
  // shutdown_timeout (`bounded`), or whenever the last response is done.
  void stop_gracefully(bool bounded = true);
  // Tells the service manager the server is ready (main(), once the
  // privileges are dropped), then where it stands every few seconds.
  void announce_ready();
  // Where the server stands in one line: its connections and addresses
  // (the service manager's STATUS).
  std::string status_line() const;
  // SIGRTMIN: starts or stops a CPU profile (builds with -DTERN_PROFILER=ON).
  void toggle_profiler();
  // SIGUSR2: starts the new binary beside this process (server/process/upgrade.h).
  void upgrade();

  // For upgrade(): the executable and the arguments to start it with.
  void set_command_line(std::string executable, std::vector<std::string> argv);
  // Listening sockets handed to this process, taken by start() for the
  // addresses they are bound to. Not owned; before start().
  void set_inherited_sockets(net::InheritedSockets* sockets) { inherited_ = sockets; }

  const Config& config() const { return *config_; }
  const std::vector<net::InetAddress>& listen_addresses() const;

 private:
  void on_signal(int signo);
  void check_drained();
  // Frees the retired blocks no chain names any more (main loop thread).
  void prune_retired_blocks();
  void start_users_app(const Config& config);
  // The chain for `config` (sites compiled, roots opened); throws
  // std::runtime_error.
  std::shared_ptr<const Chain> build_chain(const Config& config, Upstreams* upstreams,
                                          std::shared_ptr<const AcmeChallenges> acme) const;
  // ACME for `config`'s sites with tls.acme: the manager and the answers to
  // the CA's validations, new when `config` asks for other than the running
  // ones (null when no site has acme); the stand-in certificates written.
  // Throws std::runtime_error.
  std::shared_ptr<AcmeChallenges> acme_challenges_for(const Config& config) const;
  void start_acme(const Config& config, std::shared_ptr<AcmeChallenges> challenges);
  // The sites' certificate files changed (ACME): the TLS contexts load them
  // for new handshakes. Main loop thread.
  void reload_certificates();
  // The TLS settings of `config`'s addresses marked "tls"; throws ConfigError.
  // `acme`: the ACME validations its addresses answer (null: none).
  std::vector<TlsAddress> tls_for(const Config& config, const Chain& chain, const AcmeChallenges* acme) const;
  // Installs them: contexts for new addresses, updates for known ones.
  void apply_tls(std::vector<TlsAddress> addresses);
  void log_tls_stats();
  // Handshakes so far over every TLS address. Any thread.
  tls::Stats tls_totals() const;
  // Requests by series and connections by phase are counted while `config`
  // has a metrics location.
  void count_by_series(const Config& config);
  // chain_'s [[limit]] tables to the scrapes, and its limit_connections to
  // new connections.
  void apply_key_limits(const Config& config);
  // The addresses `config` marks proxy_protocol expect the header from
  // its senders (before they are listened on); the senders replaced.
  void expect_proxy_protocol(const Config& config);
  // What Metrics' snapshot takes from the server: connections, bytes, TLS, logs.
  void add_server_figures(MetricsSnapshot* snapshot) const;

  net::EventLoop* const loop_;
  std::string config_path_;
  std::shared_ptr<const Config> config_;
  // Before everything that counts into it (the upstream pools, the loops).
  std::unique_ptr<Metrics> metrics_;
  AccessLog access_log_;
  // Read on accepting threads, replaced on SIGHUP.
  mutable std::mutex limits_mu_;  // key_limits_: changed on the main thread, read by a scrape
  std::shared_ptr<const KeyLimits> key_limits_;  // chain_'s, guarded by limits_mu_
  mutable std::mutex blocked_mu_;
  std::shared_ptr<const IpFilter> blocked_;  // guarded by blocked_mu_
  // The networks that may send a PROXY protocol header; guarded by blocked_mu_.
  std::shared_ptr<const std::vector<Cidr>> proxy_senders_;
  // Addresses told to expect the header (TcpServer::set_proxy_protocol).
  std::vector<net::InetAddress> proxy_addresses_;
  std::unique_ptr<CacheZones> caches_;    // before the handlers that name them, after them gone
  std::unique_ptr<Upstreams> upstreams_;  // FastCGI blocks and proxy groups
  // Upstreams a reload replaced, winding down (Upstreams::retire_loop),
  // with the chains that named them: closed and freed once none of those
  // is left, that is once no request that began under them is in flight.
  struct RetiredBlocks {
    std::unique_ptr<Upstreams> routes;
    std::vector<std::weak_ptr<const Chain>> chains;
  };
  std::vector<RetiredBlocks> retired_upstreams_;
  std::vector<std::weak_ptr<const Chain>> upstream_chains_;  // the chains on upstreams_
  net::TimerId prune_timer_;
  std::unique_ptr<auth::UsersApp> users_;   // null without [auth]
  std::shared_ptr<const Chain> chain_;      // replaced on SIGHUP
  net::LoopLocal<ChainLoop> chains_;        // each loop's side of chain_
  std::atomic<int64_t> last_shed_request_ms_{0};  // the release callback's last ask to other loops
  // HTTPS: one context per address marked "tls" (kept for the server's life,
  // as TcpServer keeps them), the ticket keys all of them share. Before
  // http_: a scrape on a loop reads them until the loops are joined.
  std::shared_ptr<tls::TicketKeys> ticket_keys_;
  mutable std::mutex tls_mu_;  // tls_: changed on the main thread, read by a scrape
  std::vector<std::pair<net::InetAddress, std::shared_ptr<tls::ServerContext>>> tls_;
  // ACME: the answers to the CA's validations (every chain has them) and
  // the thread that orders and renews the sites' certificates; null
  // without a site with acme.
  std::shared_ptr<AcmeChallenges> acme_challenges_;
  mutable std::mutex acme_mu_;  // acme_: replaced on the main thread, read by a scrape
  std::unique_ptr<AcmeManager> acme_;
  // Before http_, so that it outlives the loops that submit to it; its
  // threads are joined first (~Server: shutdown()), while the loops its
  // tasks post to still run.
  std::unique_ptr<TaskPool> tasks_;
  std::unique_ptr<http::HttpServer> http_;
  tls::Stats tls_logged_;  // the figures of the last TLS line in the log
  net::TimerId tls_stats_timer_;
  net::TimerId status_timer_;  // STATUS to the service manager, when one listens
  std::unique_ptr<net::SignalSet> signals_;
  bool stopping_ = false;
  bool ready_ = false;  // announce_ready() ran: the process is who it will stay
  bool stop_bounded_ = true;
  // The process: its pid file (written by start()), how to start it again,
  // the sockets it was handed, and a new binary it started on SIGUSR2.
  std::unique_ptr<PidFile> pid_file_;
  std::string executable_;
  std::vector<std::string> argv_;
  net::InheritedSockets* inherited_ = nullptr;
  pid_t upgrade_child_ = 0;
  net::TimerId upgrade_timer_;
  void watch_upgrade();
#ifdef TERN_PROFILER
  bool profiling_ = false;
  std::string profile_path_;
#endif
  std::chrono::steady_clock::time_point stop_deadline_;
};

// Applies the logging part of a config (error log file, level, rotation).
void apply_log_config(const LogConfig& log);

// The settings that differ between the running config and a fresh one and
// that only a restart applies ("workers", "[auth]", "listen ... (now
// tls)", ...), named for the warning; each is set back to its running
// value in `fresh` (server.cc's one table of them). Empty when a reload
// applies all.
std::vector<std::string> keep_restart_settings(const Config& running, Config& fresh);

}  // namespace tern::server
