#include "server/config/config.h"

#include <toml++/toml.h>

#include "server/observability/access_log_format.h"
#include "server/config/config_section.h"
#include "server/process/privileges.h"
#include "server/regex.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <thread>
#include <charconv>
#include <initializer_list>
#include <set>
#include <utility>

namespace tern::server {
namespace {

using config_detail::Section;

void read_server(Section& s, Config& c) {
  if (s.node("listen") != nullptr) {
    c.listen_line = static_cast<int>(s.node("listen")->source().begin.line);
    config_detail::read_listen(s, &c.listen);
  }
  if (const toml::node* node = s.node("workers")) {
    if (node->is_string() && node->as_string()->get() == "auto") {
      c.workers = cpu_count();
    } else {
      s.get_int("workers", &c.workers, 1, 1024);
    }
  }
  s.get_string("server_name", &c.server_name);
  if (const toml::node* node = s.node("temp_dir")) {
    s.get_string("temp_dir", &c.temp_dir);
    if (c.temp_dir.empty() || c.temp_dir.front() != '/') {
      s.fail(*node, "temp_dir", "expected an absolute directory path");
    }
  }
  s.get_choice("accept_mode", &c.accept_mode,
               {{"dispatch", net::AcceptMode::kDispatch}, {"reuseport", net::AcceptMode::kReusePort}});
  s.get_choice("dispatch_policy", &c.dispatch_policy,
               {{"round-robin", net::DispatchPolicy::kRoundRobin},
                {"least-loaded", net::DispatchPolicy::kLeastLoaded}});
  s.get_choice("io", &c.io, {{"epoll", net::IoBackend::kEpoll}, {"io_uring", net::IoBackend::kIoUring}});
  s.get_choice("trigger", &c.trigger, {{"level", net::TriggerMode::kLevel}, {"edge", net::TriggerMode::kEdge}});
  s.get_bool("defer_accept", &c.defer_accept);
  s.get_size("send_lowat", &c.send_lowat, 0);
  s.get_bool("tcp_nopush", &c.tcp_nopush);
  s.get_int("max_connections", &c.max_connections_per_worker, 1, 10'000'000);
  s.get_duration("shutdown_timeout", &c.shutdown_timeout);
  s.get_int("task_threads", &c.task_threads, 1, 256);
  s.get_string("user", &c.user);
  s.get_string("group", &c.group);
  if (const toml::node* node = s.node("group"); node != nullptr && c.user.empty()) {
    s.fail(*node, "group", "needs a user");
  }
  if (const toml::node* node = s.node("user")) {
    std::string error;
    if (!resolve_identity(c.user, "", &error)) s.fail(*node, "user", error);
    if (!c.group.empty() && !resolve_identity(c.user, c.group, &error)) s.fail(*s.node("group"), "group", error);
  }
  if (const toml::node* node = s.node("pid_file")) {
    s.get_string("pid_file", &c.pid_file);
    if (c.pid_file.empty() || c.pid_file.front() != '/') s.fail(*node, "pid_file", "expected an absolute file path");
  }
}

void read_auth(Section s, int line, Config& c) {
  AuthConfig& a = c.auth;
  a.enabled = true;
  a.line = line;
  s.get_string("store", &a.store);
  const bool sqlite = a.store.starts_with("sqlite:") && a.store.size() > 7;
  const bool mysql = a.store.starts_with("mysql://") || a.store.starts_with("mariadb://");
  if (!sqlite && !mysql) {
    s.fail(*s.node("store"), "store",
           "expected \"sqlite:PATH\" or \"mysql://user:pass@host:port/database\"");
  }
  s.get_string("secret", &a.secret);
  if (const toml::node* node = s.node("secret"); node != nullptr && a.secret.size() < 32) {
    s.fail(*node, "secret", "must be at least 32 characters");
  }
  if (mysql && a.secret.empty()) {
    throw ConfigError(s.file(), line, s.prefix() + "secret",
                      "required with a mysql store (every node must sign sessions alike)");
  }
  s.get_int("password_ops", &a.password_ops, 1, 1000);
  s.get_size("password_memory", &a.password_memory, 8192);
  s.get_duration("session_ttl", &a.session_ttl);
  if (a.session_ttl.count() < 1000) s.fail(*s.node("session_ttl"), "session_ttl", "must be at least 1s");
  s.get_int("login_attempts", &a.login_attempts, 1, 1'000'000);
  s.get_int("register_attempts", &a.register_attempts, 1, 1'000'000);
  s.get_int("account_login_failures", &a.account_login_failures, 1, 1'000'000);
  s.get_int("db_pool", &a.db_pool, 1, 1000);
  s.finish();
}

void read_cpu_affinity(Section& s, Config& c) {
  const toml::node* node = s.node("cpu_affinity");
  if (node == nullptr) return;
  if (!node->is_array()) s.fail(*node, "cpu_affinity", "expected an array of CPU numbers");
  c.cpu_affinity.clear();
  for (const toml::node& item : *node->as_array()) {
    if (!item.is_integer() || item.as_integer()->get() < 0 || item.as_integer()->get() > 4095) {
      s.fail(item, "cpu_affinity", "expected an array of CPU numbers");
    }
    c.cpu_affinity.push_back(static_cast<int>(item.as_integer()->get()));
  }
}

void read_blocked(Section& s, Config& c) {
  if (s.node("blocked") != nullptr) c.blocked = config_detail::read_cidrs(s, "blocked");
}

void read_timeouts(Section s, Config& c) {
  s.get_duration("header", &c.limits.header_timeout);
  s.get_duration("body", &c.limits.body_timeout);
  s.get_duration("keepalive", &c.limits.keepalive_timeout);
  s.get_duration("send", &c.limits.send_timeout);
  s.get_duration("linger", &c.limits.linger_timeout);
  s.finish();
}

void read_limits(Section s, Config& c) {
  s.get_size("header_bytes", &c.limits.parser.max_head_bytes, 256);
  s.get_size("uri_bytes", &c.limits.parser.max_target, 16);
  s.get_int("headers", &c.limits.parser.max_headers, 1, 100000);
  s.get_size("body_bytes", &c.limits.max_body_bytes, 0);
  s.get_size("body_buffer", &c.limits.body_buffer_bytes, 0);
  s.finish();
}

void read_static(Section s, Config& c) {
  StaticConfig& st = c.static_files;
  s.get_string("root", &st.root);
  if (auto index = s.get_strings("index")) {
    st.index.clear();
    for (const auto& [name, node] : *index) {
      if (name.empty() || name.find('/') != std::string::npos) s.fail(*node, "index", "expected file names");
      st.index.push_back(name);
    }
  }
  s.get_bool("allow_symlinks_outside_root", &st.allow_symlinks_outside_root);
  s.get_bool("gzip_static", &st.gzip_static);
  s.get_choice("zero_copy", &st.zero_copy,
               {{"auto", StaticConfig::ZeroCopy::kAuto},
                {"sendfile", StaticConfig::ZeroCopy::kSendfile},
                {"mmap", StaticConfig::ZeroCopy::kMmap}});
  s.get_int("cache_entries", &st.cache_entries, 0, 1'000'000);
  s.get_size("cache_size", &st.cache_bytes, 0);
  s.get_duration("cache_valid", &st.cache_valid);
  s.get_size("memory_file_bytes", &st.memory_file_bytes, 0);
  s.get_bool("deny_dotfiles", &st.deny_dotfiles);
  if (const toml::table* mime = s.get_table("mime")) {
    for (const auto& [ext, node] : *mime) {
      if (!node.is_string()) s.fail(node, "mime." + std::string(ext.str()), "expected a MIME type string");
      st.mime[std::string(ext.str())] = node.as_string()->get();
    }
  }
  s.finish();
}

void read_compression(Section s, Config& c) {
  CompressionConfig& z = c.compression;
  s.get_bool("enabled", &z.enabled);
  s.get_bool("gzip", &z.policy.gzip);
  s.get_bool("brotli", &z.policy.brotli);
  s.get_int("gzip_level", &z.policy.gzip_level, 1, 9);
  s.get_int("brotli_quality", &z.policy.brotli_quality, 0, 11);
  s.get_size("min_size", &z.policy.min_length, 0);
  s.get_size("max_file", &z.policy.max_file, 0);
  if (auto types = s.get_strings("types")) {
    z.policy.types.clear();
    for (const auto& [type, node] : *types) {
      if (type.find('/') == std::string::npos || type.find_first_of(" ;") != std::string::npos) {
        s.fail(*node, "types", "expected media types such as \"text/html\"");
      }
      z.policy.types.push_back(type);
    }
  }
  s.finish();
}

void read_http2(Section s, Config& c) {
  Http2Config& h = c.http2;
  s.get_bool("enabled", &h.enabled);
  s.get_int("max_concurrent_streams", &h.max_concurrent_streams, 1, 100000);
  // RFC 9113 6.9.1: a window is at most 2^31-1; less than the initial
  // 65,535 would starve uploads.
  auto window = [&s](const char* key, uint32_t* out) {
    uint64_t value = *out;
    s.get_size(key, &value, 65535);
    if (value > 0x7fffffff) s.fail(*s.node(key), key, "expected a size of at most 2147483647 bytes (2^31-1)");
    *out = static_cast<uint32_t>(value);
  };
  window("stream_window", &h.stream_window);
  window("connection_window", &h.connection_window);
  s.finish();
}

void read_log(Section s, Config& c) {
  using log::Level;
  s.get_choice("level", &c.log.level,
               {{"trace", Level::trace}, {"debug", Level::debug}, {"info", Level::info},
                {"warn", Level::warn}, {"error", Level::error}, {"critical", Level::critical},
                {"off", Level::off}});
  s.get_string("error_log", &c.log.error_log);
  s.get_size("max_size", &c.log.max_file_bytes, 4096);
  s.get_int("max_files", &c.log.max_files, 0, 1000);
  std::chrono::milliseconds flush = c.log.flush_interval;
  s.get_duration("flush_interval", &flush);
  c.log.flush_interval = std::chrono::duration_cast<std::chrono::seconds>(flush);
  if (c.log.flush_interval.count() < 1) c.log.flush_interval = std::chrono::seconds(1);
  s.finish();
}

}  // namespace

namespace config_detail {

FastCgiConfig read_fastcgi(Section s, int line, const char* default_match) {
  FastCgiConfig f;
  f.line = line;
  if (default_match != nullptr) f.match = default_match;
  s.get_string("match", &f.match);
  if (const toml::node* node = s.node("match")) {
    try {
      Regex check(f.match);
    } catch (const std::invalid_argument& e) {
      s.fail(*node, "match", std::string("not a valid regular expression: ") + e.what());
    }
  } else if (default_match == nullptr) {
    throw ConfigError(s.file(), line, s.prefix() + "match", "required (a regular expression such as '\\.php$')");
  }
  s.get_string("pass", &f.pass);
  if (const toml::node* node = s.node("pass")) {
    auto address = net::SocketAddress::parse(f.pass);
    const bool name = !address && !f.pass.empty() && f.pass.find_first_of(":/") == std::string::npos;
    if (address) {
      f.address = *address;
    } else if (name) {
      f.group = f.pass;  // checked against the [[upstream]] names once they are all read
    } else if (!parse_host_port(f.pass, &f.host, &f.port)) {
      s.fail(*node, "pass", "expected \"unix:/path/to.sock\", \"127.0.0.1:9000\", \"php:9000\" or an [[upstream]]'s name");
    }
    f.pass_line = static_cast<int>(node->source().begin.line);
  } else {
    throw ConfigError(s.file(), line, s.prefix() + "pass", "required (\"unix:/run/php/php-fpm.sock\" or \"127.0.0.1:9000\")");
  }
  s.get_string("root", &f.root);
  s.get_string("index", &f.index);
  if (f.index.find('/') != std::string::npos) s.fail(*s.node("index"), "index", "expected a file name");
  s.get_duration("connect_timeout", &f.connect_timeout);
  s.get_duration("read_timeout", &f.read_timeout);
  s.get_duration("queue_timeout", &f.queue_timeout);
  s.get_int("pool", &f.pool, 1, 10000);
  s.get_int("queue", &f.queue, 0, 1'000'000);
  f.cache = read_cache_use(s);
  for (const char* old : {"cache_size", "cache_ttl"}) {
    if (const toml::node* node = s.node(old)) {
      s.fail(*node, old, "replaced by [[cache]] zones: max_size and memory are the zone's, a lifetime without "
                         "Cache-Control is cache = { zone = \"NAME\", valid = { 200 = \"10m\" } }");
    }
  }
  s.get_bool("request_buffering", &f.request_buffering);
  s.get_bool("response_buffering", &f.response_buffering);
  s.get_size("response_buffer", &f.response_buffer, 0);
  s.get_size("max_temp_file", &f.max_temp_file, 0);
  s.get_size("response_header_bytes", &f.response_head.max_head_bytes, 1024);
  s.get_int("response_headers", &f.response_head.max_headers, 1, 100000);
  if (auto methods = s.get_strings("methods")) {
    f.methods.clear();
    for (const auto& [name, node] : *methods) {
      const bool token = !name.empty() && std::all_of(name.begin(), name.end(), [](char ch) {
        return (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '-' || ch == '_';
      });
      if (!token) s.fail(*node, "methods", "expected method names such as \"GET\" (upper case)");
      f.methods.push_back(name);
    }
  }
  s.finish();
  return f;
}

}  // namespace config_detail

std::optional<std::chrono::milliseconds> parse_duration(std::string_view text) {
  uint64_t number = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), number);
  if (ec != std::errc() || end == text.data()) return std::nullopt;
  std::string_view unit(end, static_cast<size_t>(text.data() + text.size() - end));
  uint64_t scale;
  if (unit == "ms") {
    scale = 1;
  } else if (unit == "s" || unit.empty()) {
    scale = 1000;
  } else if (unit == "m") {
    scale = 60 * 1000;
  } else if (unit == "h") {
    scale = 3600 * 1000;
  } else if (unit == "d") {
    scale = 24 * 3600 * 1000;
  } else if (unit == "w") {
    scale = 7ULL * 24 * 3600 * 1000;
  } else if (unit == "y") {
    scale = 365ULL * 24 * 3600 * 1000;
  } else {
    return std::nullopt;
  }
  if (number > (uint64_t{1} << 40) / scale) return std::nullopt;
  return std::chrono::milliseconds(static_cast<int64_t>(number * scale));
}

std::optional<uint64_t> parse_size(std::string_view text) {
  uint64_t number = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), number);
  if (ec != std::errc() || end == text.data()) return std::nullopt;
  std::string unit(end, static_cast<size_t>(text.data() + text.size() - end));
  for (char& ch : unit) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  int shift;
  if (unit.empty() || unit == "b") {
    shift = 0;
  } else if (unit == "k" || unit == "kib" || unit == "kb") {
    shift = 10;
  } else if (unit == "m" || unit == "mib" || unit == "mb") {
    shift = 20;
  } else if (unit == "g" || unit == "gib" || unit == "gb") {
    shift = 30;
  } else {
    return std::nullopt;
  }
  if (number > (UINT64_MAX >> shift)) return std::nullopt;
  return number << shift;
}

int cpu_count() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) == 0) return std::clamp(CPU_COUNT(&set), 1, 1024);
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(std::min(n, 1024u));
}

Config default_config() {
  Config c;
  c.listen.all.push_back(net::InetAddress(8080, true));
  c.workers = cpu_count();
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) == 0 && host[0] != '\0') c.server_name = host;
  if (const char* tmp = std::getenv("TMPDIR"); tmp != nullptr && tmp[0] == '/') c.temp_dir = tmp;
  c.limits.temp_dir = c.temp_dir;
  config_detail::finish_sites(c.source, c);
  return c;
}

void rebuild_implicit_site(Config& config) { config_detail::finish_sites(config.source, config); }

Config load_config(const std::string& path) {
  toml::table root = config_detail::parse_config_file(path);
  Config c = default_config();
  c.source = path;
  Section top(path, root, "");
  read_server(top, c);
  read_cpu_affinity(top, c);
  read_blocked(top, c);
  if (auto servers = top.get_strings("resolver")) {
    for (const auto& [text, node] : *servers) {
      const bool address = net::InetAddress::parse(text) || net::InetAddress::from_ip_port(text, 53);
      if (!address) top.fail(*node, "resolver", "\"" + text + "\" is not an address (\"10.0.0.2\", \"127.0.0.1:5353\")");
      c.resolver.push_back(text);
    }
  }
  top.get_duration("resolve_interval", &c.resolve_interval);
  top.get_string("access_log", &c.access_log);
  if (const toml::node* node = top.node("access_log_format")) {
    top.get_string("access_log_format", &c.access_log_format);
    std::string error;
    if (!AccessLogFormat::parse(c.access_log_format, &error)) top.fail(*node, "access_log_format", error);
  }
  if (const toml::table* t = top.get_table("real_ip")) config_detail::read_real_ip(top.sub(*t, "real_ip"), *t, &c.real_ip);
  if (const toml::table* t = top.get_table("timeouts")) read_timeouts(top.sub(*t, "timeouts"), c);
  if (const toml::table* t = top.get_table("limits")) read_limits(top.sub(*t, "limits"), c);
  if (const toml::table* t = top.get_table("static")) read_static(top.sub(*t, "static"), c);
  if (const toml::table* t = top.get_table("log")) read_log(top.sub(*t, "log"), c);
  if (const toml::table* t = top.get_table("http2")) read_http2(top.sub(*t, "http2"), c);
  if (const toml::table* t = top.get_table("compression")) read_compression(top.sub(*t, "compression"), c);
  if (const toml::table* t = top.get_table("auth")) {
    read_auth(top.sub(*t, "auth"), static_cast<int>(t->source().begin.line), c);
  }
  if (const toml::node* node = top.node("fastcgi")) {
    if (!node->is_array_of_tables()) top.fail(*node, "fastcgi", "expected [[fastcgi]] blocks");
    size_t i = 0;
    for (const toml::node& block : *node->as_array()) {
      const std::string name = "fastcgi[" + std::to_string(i++) + "]";
      c.fastcgi.push_back(config_detail::read_fastcgi(Section(path, *block.as_table(), name + "."),
                                                      static_cast<int>(block.source().begin.line),
                                                      nullptr));
    }
  }
  if (const toml::table* t = top.get_table("tls")) {
    Section s = top.sub(*t, "tls");
    config_detail::read_tls(s, static_cast<int>(t->source().begin.line), &c.tls);
    config_detail::read_tls_sessions(s, c);
    s.finish();
  }
  if (const toml::table* t = top.get_table("acme")) {
    Section s = top.sub(*t, "acme");
    config_detail::read_acme(s, static_cast<int>(t->source().begin.line), c);
    s.finish();
  }
  if (const toml::node* node = top.node("limit")) config_detail::read_key_limits(top, *node, c);
  config_detail::read_connection_limits(top, c);
  if (const toml::node* node = top.node("upstream")) config_detail::read_upstreams(top, *node, c);
  if (const toml::node* node = top.node("cache")) config_detail::read_cache_zones(top, *node, c);
  if (const toml::node* node = top.node("server")) config_detail::read_sites(top, *node, c);
  std::vector<std::string> chain{path};
  config_detail::read_includes(top, c, chain);
  top.finish();
  config_detail::finish_sites(path, c);
  config_detail::check_proxies(path, c);
  config_detail::check_proxy_protocol(path, c);
  config_detail::check_key_limits(path, c);
  config_detail::check_cache_uses(path, c);
  if (c.access_log == "off") c.access_log.clear();
  c.limits.temp_dir = c.temp_dir;
  return c;
}

}  // namespace tern::server
