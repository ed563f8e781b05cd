// tern: the web server executable.
//
//   tern                      serve ./www on 127.0.0.1:8080
//   tern -c conf/tern.toml    serve what the file says
//   tern -t -c conf/tern.toml check the file and exit
//   tern -s reload -c ...     signal the running tern (reload, reopen, stop,
//                             quit; server/process/control.h)
//
// Flags override the config file. A bad flag or config value is one line on
// stderr naming the file, line and key, and exit status 2.
#include <CLI/CLI.hpp>
#include <sys/resource.h>
#include <unistd.h>

#include <csignal>
#include <memory>
#include <cstdio>
#include <string>
#include <vector>

#include "base/log.h"
#include "base/spool.h"
#include "net/event_loop.h"
#include "net/signal_set.h"
#include "auth/htpasswd.h"
#include "server/acme/acme_manager.h"
#include "server/config/config.h"
#include "net/inherited_sockets.h"
#include "server/process/control.h"
#include "server/process/privileges.h"
#include "server/process/upgrade.h"
#include "server/sites.h"
#include "server/server.h"
#include "server/tls_setup.h"

#ifndef TERN_VERSION
#define TERN_VERSION "0.0.0"
#endif
#ifndef TERN_BUILD_NOTE
#define TERN_BUILD_NOTE "malloc: system"
#endif

namespace {

constexpr int kUsageError = 2;

struct Flags {
  std::string config_file;
  std::vector<std::string> listen;
  std::string root;
  int workers = 0;
  std::string log_level;
  std::string access_log;
  std::string io;
  std::string tls_cert;
  std::string tls_key;
  std::string pid_file;
  std::string signal;
  bool test_only = false;
};

[[noreturn]] void usage_error(const std::string& message) {
  std::fprintf(stderr, "tern: %s\n", message.c_str());
  std::exit(kUsageError);
}

tern::server::Config build_config(const Flags& flags) {
  using tern::server::Config;
  Config config = flags.config_file.empty() ? tern::server::default_config()
                                            : tern::server::load_config(flags.config_file);
  if (!flags.listen.empty()) {
    config.listen.clear();
    for (const std::string& text : flags.listen) {
      std::string error;
      if (!config.listen.add(text, &error)) usage_error("--listen: " + error);
    }
  }
  if (flags.tls_cert.empty() != flags.tls_key.empty()) usage_error("--tls-cert and --tls-key go together");
  if (!flags.tls_cert.empty()) {
    // Every top-level address speaks HTTPS with this pair, and every site
    // without certificates of its own presents it.
    config.tls.certificates = {{flags.tls_cert, flags.tls_key}};
    config.tls.where = "--tls-cert";
    config.listen.tls = config.listen.all;
    config.listen.h2c.clear();
    for (auto& site : config.sites) {
      if (site.tls.certificates.empty()) site.tls.certificates = config.tls.certificates;
    }
  }
  tern::server::rebuild_implicit_site(config);
  if (!flags.root.empty()) config.static_files.root = flags.root;
  if (!flags.io.empty()) {
    auto io = tern::net::parse_io_backend(flags.io);
    if (!io) usage_error("--io: \"" + flags.io + "\" is not epoll or io_uring");
    config.io = *io;
  }
  if (flags.workers > 0) config.workers = flags.workers;
  if (!flags.pid_file.empty()) {
    if (flags.pid_file.front() != '/') usage_error("--pid-file: \"" + flags.pid_file + "\" is not an absolute path");
    config.pid_file = flags.pid_file;
  }
  if (!flags.access_log.empty()) config.access_log = flags.access_log == "off" ? "" : flags.access_log;
  if (!flags.log_level.empty()) {
    auto level = tern::log::parse_level(flags.log_level);
    if (!level) usage_error("--log-level: \"" + flags.log_level + "\" is not trace, debug, info, warn, error, critical or off");
    config.log.level = *level;
  }
  return config;
}

// Temp files for bodies and responses must be possible before the first
// request needs one.
// -t reads the htpasswd files auth_basic names, as serving would.
void check_htpasswd_files(const tern::server::Config& config) {
  for (const tern::server::SiteConfig& site : config.sites) {
    for (size_t j = 0; j < site.locations.size(); ++j) {
      const auto& auth = site.locations[j].auth_basic;
      if (!auth || !auth->on()) continue;
      std::vector<std::string> warnings;
      try {
        (void)tern::auth::Htpasswd::load(auth->users, &warnings);
      } catch (const std::runtime_error& e) {
        throw tern::server::ConfigError(site.file.empty() ? config.source : site.file, auth->line,
                                        site.where + ".location[" + std::to_string(j) + "].auth_basic.users",
                                        e.what());
      }
      for (const std::string& warning : warnings) std::fprintf(stderr, "tern: warning: %s\n", warning.c_str());
    }
  }
}

void check_temp_dir(const std::string& dir) {
  tern::Result<int> fd = tern::open_temp_file(dir);
  if (!fd) throw std::runtime_error("temp_dir " + dir + ": " + fd.error().message());
  ::close(*fd);
}

// Every connection is a descriptor: the soft limit goes up to the hard one
// (what nginx's worker_rlimit_nofile asks for by hand), and a limit below
// what the configuration may open is said at start rather than found out
// when clients are refused at accept.
void raise_descriptor_limit(const tern::server::Config& config) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  if (limit.rlim_cur < limit.rlim_max) {
    rlimit raised = limit;
    raised.rlim_cur = limit.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) {
      TERN_LOG_INFO("descriptors: soft limit raised from {} to {}", limit.rlim_cur, raised.rlim_cur);
      limit = raised;
    }
  }
  // Beside its connections each worker holds an epoll, an eventfd, a timer,
  // listening sockets, its open-file caches and its upstream pools.
  const uint64_t workers = static_cast<uint64_t>(config.workers);
  uint64_t per_worker = 16 + config.listen.all.size() + config.static_files.cache_entries;
  for (const auto& block : config.fastcgi) per_worker += block.pool + config.static_files.cache_entries;
  const uint64_t reserve = 64 + workers * per_worker;
  const uint64_t need = workers * config.max_connections_per_worker + reserve;
  if (limit.rlim_cur != RLIM_INFINITY && need > limit.rlim_cur) {
    TERN_LOG_WARN("descriptors: the limit is {}, but {} worker(s) x max_connections {} plus {} "
                  "for files and sockets need {}: connections past the limit will be refused; "
                  "raise it (ulimit -n, systemd LimitNOFILE=) or lower max_connections",
                  limit.rlim_cur, workers, config.max_connections_per_worker, reserve, need);
  }
}

// Binds, opens what needs root, gives root up, serves until stopped.
int serve(tern::server::Config config, const std::string& config_file, std::vector<std::string> argv) {
  const std::string user = config.user;
  const std::string group = config.group;
  const std::string temp_dir = config.temp_dir;
  // Sockets handed over by systemd or by the tern this one upgrades.
  tern::net::InheritedSockets inherited = tern::net::InheritedSockets::from_environment();
  tern::net::EventLoop loop(config.io);
  tern::server::Server server(&loop, std::move(config), config_file);
  server.set_command_line(tern::server::executable_path(), std::move(argv));
  server.set_inherited_sockets(&inherited);
  try {
    server.start();  // binds (or takes what was handed over), writes the pid file
    tern::server::drop_privileges(user, group);
    check_temp_dir(temp_dir);  // again, as the user who will write there
  } catch (const tern::server::ConfigError& e) {
    tern::log::shutdown();
    usage_error(e.what());
  } catch (const std::exception& e) {
    TERN_LOG_CRITICAL("{}", e.what());
    std::fprintf(stderr, "tern: %s\n", e.what());
    return 1;
  }
  server.announce_ready();
  loop.loop();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Before any thread exists, so that every thread inherits the mask and the
  // signals reach the main loop's signalfd (see net/signal_set.h).
  tern::net::SignalSet::block({SIGTERM, SIGINT, SIGQUIT, SIGHUP, SIGUSR1, SIGUSR2, SIGRTMIN});

  Flags flags;
  CLI::App app("tern: a small, fast HTTP/1.1 web server", "tern");
  app.add_option("-c,--config", flags.config_file, "TOML configuration file")->check(CLI::ExistingFile);
  app.add_option("--listen", flags.listen, "ADDRESS:PORT to listen on, then tls, h2c, no-h2 or proxy_protocol (repeatable; [::1]:8080 for IPv6)");
  app.add_option("--root", flags.root, "document root");
  app.add_option("--workers", flags.workers, "worker threads")->check(CLI::Range(1, 1024));
  app.add_option("--log-level", flags.log_level, "trace, debug, info, warn, error, critical or off");
  app.add_option("--access-log", flags.access_log, "access log file, or off");
  app.add_option("--io", flags.io, "I/O backend: epoll or io_uring (beats the config's io)");
  app.add_option("--tls-cert", flags.tls_cert, "certificate chain (PEM): every --listen address speaks HTTPS")
      ->check(CLI::ExistingFile);
  app.add_option("--tls-key", flags.tls_key, "the certificate's private key (PEM), with --tls-cert")
      ->check(CLI::ExistingFile);
  app.add_option("--pid-file", flags.pid_file, "where the process id goes (beats the config's pid_file)");
  app.add_option("-s,--signal", flags.signal, "tell the running tern (its pid file) to reload, reopen, stop or quit")
      ->check(CLI::IsMember({"reload", "reopen", "stop", "quit"}));
  app.add_flag("-t,--test", flags.test_only, "check the configuration and exit");
  app.set_version_flag("-v,--version", "tern " TERN_VERSION " (" TERN_BUILD_NOTE ")");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    usage_error(e.what());
  }

  tern::server::Config config;
  try {
    config = build_config(flags);
    if (!flags.signal.empty()) {
      if (config.pid_file.empty()) usage_error("-s " + flags.signal + ": no pid file to read: set pid_file in the config or pass --pid-file");
      std::string error = tern::server::send_control_signal(config.pid_file, flags.signal);
      if (error.empty()) return 0;
      std::fprintf(stderr, "tern: -s %s: %s\n", flags.signal.c_str(), error.c_str());
      return 1;
    }
    if (flags.test_only) {
      // Opening the root is part of the check, as nginx -t checks its
      // files, and so is loading every certificate and key.
      auto sites = std::make_shared<const tern::server::Sites>(config);
      // A site with acme loads what its start would: the CA's certificate,
      // or the stand-in written now into the storage.
      tern::server::AcmeManager::prepare(config);
      std::vector<std::string> warnings;
      (void)tern::server::tls_settings(config, sites, nullptr, &warnings);
      for (const std::string& warning : warnings) std::fprintf(stderr, "tern: warning: %s\n", warning.c_str());
      check_htpasswd_files(config);
      check_temp_dir(config.temp_dir);
      std::printf("tern: configuration %s is ok\n", config.source.c_str());
      return 0;
    }
    check_temp_dir(config.temp_dir);
    // Before the first thread (the log's) starts: the flag is per thread.
    tern::server::forbid_new_privileges(config.user);
    tern::server::apply_log_config(config.log);
    if (!flags.log_level.empty()) tern::log::set_level(config.log.level);  // the flag beats TERN_LOG_LEVEL
    raise_descriptor_limit(config);
  } catch (const tern::server::ConfigError& e) {
    usage_error(e.what());
  } catch (const std::exception& e) {
    usage_error(config.source + ": " + e.what());
  }

  int status = serve(std::move(config), flags.config_file, std::vector<std::string>(argv, argv + argc));
  tern::log::shutdown();
  return status;
}
