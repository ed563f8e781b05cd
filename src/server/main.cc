// tern: the web server executable.
//
//   tern                      serve ./www on 127.0.0.1:8080
//   tern -c conf/tern.toml    serve what the file says
//   tern -t -c conf/tern.toml check the file and exit
//
// Flags override the config file. A bad flag or config value is one line on
// stderr naming the file, line and key, and exit status 2.
#include <CLI/CLI.hpp>

#include <csignal>
#include <cstdio>
#include <string>
#include <vector>

#include "base/log.h"
#include "net/event_loop.h"
#include "net/signal_set.h"
#include "server/config.h"
#include "server/handlers/static_files.h"
#include "server/server.h"

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
      auto address = tern::net::InetAddress::parse(text);
      if (!address) usage_error("--listen: \"" + text + "\" is not ADDRESS:PORT (\"[::1]:8080\" for IPv6)");
      config.listen.push_back(*address);
    }
  }
  if (!flags.root.empty()) config.static_files.root = flags.root;
  if (flags.workers > 0) config.workers = flags.workers;
  if (!flags.access_log.empty()) config.access_log = flags.access_log == "off" ? "" : flags.access_log;
  if (!flags.log_level.empty()) {
    auto level = tern::log::parse_level(flags.log_level);
    if (!level) usage_error("--log-level: \"" + flags.log_level + "\" is not trace, debug, info, warn, error, critical or off");
    config.log.level = *level;
  }
  return config;
}

}  // namespace

int main(int argc, char** argv) {
  // Before any thread exists, so that every thread inherits the mask and the
  // signals reach the main loop's signalfd (see net/signal_set.h).
  tern::net::SignalSet::block({SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2});

  Flags flags;
  CLI::App app("tern: a small, fast HTTP/1.1 web server", "tern");
  app.add_option("-c,--config", flags.config_file, "TOML configuration file")->check(CLI::ExistingFile);
  app.add_option("--listen", flags.listen, "ADDRESS:PORT to listen on (repeatable; [::1]:8080 for IPv6)");
  app.add_option("--root", flags.root, "document root");
  app.add_option("--workers", flags.workers, "worker threads")->check(CLI::Range(1, 1024));
  app.add_option("--log-level", flags.log_level, "trace, debug, info, warn, error, critical or off");
  app.add_option("--access-log", flags.access_log, "access log file, or off");
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
    if (flags.test_only) {
      // Opening the root is part of the check, as nginx -t checks its files.
      tern::server::StaticFiles probe({config.static_files.root, config.static_files.index});
      std::printf("tern: configuration %s is ok\n", config.source.c_str());
      return 0;
    }
    tern::server::apply_log_config(config.log);
    if (!flags.log_level.empty()) tern::log::set_level(config.log.level);  // the flag beats TERN_LOG_LEVEL
  } catch (const tern::server::ConfigError& e) {
    usage_error(e.what());
  } catch (const std::exception& e) {
    usage_error(config.source + ": " + e.what());
  }

  tern::net::EventLoop loop;
  tern::server::Server server(&loop, std::move(config), flags.config_file);
  try {
    server.start();
  } catch (const std::exception& e) {
    TERN_LOG_CRITICAL("{}", e.what());
    tern::log::shutdown();
    std::fprintf(stderr, "tern: %s\n", e.what());
    return 1;
  }
  loop.loop();
  tern::log::shutdown();
  return 0;
}
