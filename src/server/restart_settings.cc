// The settings a reload cannot change (server.h, keep_restart_settings):
// one table names them for SIGHUP's warning and keeps their running values.
#include <algorithm>
#include <string>
#include <vector>

#include "server/config/config.h"
#include "server/server.h"

namespace tern::server {

namespace {

// An AuthConfig as written, wherever in the file it sits.
template <typename T>
T without_line(T value) {
  value.line = 0;
  return value;
}

// A setting only a restart applies: how to tell it changed, and how a
// reload keeps the running value (null: nothing to keep, the listening
// sockets keep what they are). One table for both, so that no setting is
// reported without being kept, or kept without being reported.
struct RestartSetting {
  const char* key;
  bool (*same)(const Config& running, const Config& fresh);
  void (*keep)(const Config& running, Config& fresh);
};

template <auto Member>
constexpr RestartSetting setting(const char* key) {
  return {key, [](const Config& a, const Config& b) { return a.*Member == b.*Member; },
          [](const Config& running, Config& fresh) { fresh.*Member = running.*Member; }};
}

bool auto_copy(const Config& c) { return c.static_files.zero_copy == StaticConfig::ZeroCopy::kAuto; }

constexpr RestartSetting kRestartSettings[] = {
    setting<&Config::workers>("workers"),
    setting<&Config::accept_mode>("accept_mode"),
    setting<&Config::dispatch_policy>("dispatch_policy"),
    setting<&Config::trigger>("trigger"),
    setting<&Config::io>("io"),
    setting<&Config::defer_accept>("defer_accept"),
    setting<&Config::send_lowat>("send_lowat"),
    setting<&Config::tcp_nopush>("tcp_nopush"),
    {"[static] zero_copy", [](const Config& a, const Config& b) { return auto_copy(a) == auto_copy(b); },
     [](const Config& running, Config& fresh) { fresh.static_files.zero_copy = running.static_files.zero_copy; }},
    setting<&Config::cpu_affinity>("cpu_affinity"),
    setting<&Config::max_connections_per_worker>("max_connections"),
    setting<&Config::task_threads>("task_threads"),
    setting<&Config::server_name>("server_name"),
    {"temp_dir", [](const Config& a, const Config& b) { return a.temp_dir == b.temp_dir; },
     [](const Config& running, Config& fresh) { fresh.temp_dir = fresh.limits.temp_dir = running.temp_dir; }},
    {"user, group", [](const Config& a, const Config& b) { return a.user == b.user && a.group == b.group; },
     [](const Config& running, Config& fresh) {
       fresh.user = running.user;
       fresh.group = running.group;
     }},
    setting<&Config::pid_file>("pid_file"),
    setting<&Config::caches>("[[cache]]"),
    {"[auth]", [](const Config& a, const Config& b) { return without_line(a.auth) == without_line(b.auth); },
     [](const Config& running, Config& fresh) { fresh.auth = running.auth; }},
    setting<&Config::http2>("[http2]"),
    setting<&Config::tls_sessions>(
        "[tls] session_tickets, ticket_key_rotation, session_cache, session_timeout, handshake_timeout, kernel_tls"),
    setting<&Config::resolver>("resolver"),
    setting<&Config::resolve_interval>("resolve_interval"),
    {"listen ... h2c",
     [](const Config& a, const Config& b) {
       return flagged_addresses(a, &ListenConfig::h2c) == flagged_addresses(b, &ListenConfig::h2c);
     },
     nullptr},
};

}  // namespace

std::vector<std::string> keep_restart_settings(const Config& running, Config& fresh) {
  std::vector<std::string> keys;
  for (const RestartSetting& setting : kRestartSettings) {
    if (setting.same(running, fresh)) continue;
    keys.emplace_back(setting.key);
    if (setting.keep != nullptr) setting.keep(running, fresh);
  }
  // An address that stays but turns HTTPS or plain keeps its listening
  // socket, and so what it was. So does one that begins or stops
  // expecting a PROXY protocol header.
  const auto has = [](const std::vector<net::InetAddress>& list, const net::InetAddress& address) {
    return std::find(list.begin(), list.end(), address) != list.end();
  };
  const std::vector<net::InetAddress> a_tls = tls_addresses(running);
  const std::vector<net::InetAddress> b_tls = tls_addresses(fresh);
  const std::vector<net::InetAddress> a_proxy = flagged_addresses(running, &ListenConfig::proxy_protocol);
  const std::vector<net::InetAddress> b_proxy = flagged_addresses(fresh, &ListenConfig::proxy_protocol);
  const std::vector<net::InetAddress> b_all = listen_addresses(fresh);
  for (const net::InetAddress& address : listen_addresses(running)) {
    if (!has(b_all, address)) continue;
    if (has(a_tls, address) != has(b_tls, address)) {
      keys.push_back("listen " + address.to_ip_port() + (has(b_tls, address) ? " (now tls)" : " (no longer tls)"));
    }
    if (has(a_proxy, address) != has(b_proxy, address)) {
      keys.push_back("listen " + address.to_ip_port() +
                     (has(b_proxy, address) ? " (now proxy_protocol)" : " (no longer proxy_protocol)"));
    }
  }
  return keys;
}

}  // namespace tern::server
