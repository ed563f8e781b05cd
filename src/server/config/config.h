// Config: everything the tern executable can be told, from a TOML file and
// then from command-line flags (flags win).
//
// Loading is strict, as a config file should be: an unknown key, a value of
// the wrong type or a bad value is a ConfigError naming the file, the line
// and the key, and the executable exits with status 2 (see main.cc). Example
// in conf/tern.toml.
//
// A value type, built on the main thread before the loops start (and again on
// SIGHUP, then handed to the loops).
#pragma once

#include <chrono>
#include <map>
#include <stdexcept>
#include <optional>
#include <string>
#include <vector>

#include "base/log.h"
#include "http/compression.h"
#include "http/http_limits.h"
#include "http1/response_parser.h"
#include "net/callbacks.h"
#include "net/inet_address.h"
#include "net/poller.h"
#include "net/socket_address.h"
#include "net/tcp_server.h"
#include "server/ip_filter.h"
#include "server/config/acme_config.h"
#include "server/config/upstream_config.h"
#include "server/real_ip.h"

namespace tern::server {

// "tern.toml:12: timeouts.header: expected a duration like \"10s\""
class ConfigError : public std::runtime_error {
 public:
  ConfigError(const std::string& file, int line, const std::string& key, const std::string& what)
      : std::runtime_error(file + ":" + std::to_string(line) + ": " + key + ": " + what) {}
};

struct StaticConfig {
  std::string root = "www";
  std::vector<std::string> index = {"index.html"};
  bool allow_symlinks_outside_root = false;
  bool gzip_static = true;
  // How file bodies leave: kSendfile; kMmap, written from a mapping of the
  // file; kAuto, sendfile but for large files to a client on this host,
  // which are written from a mapping (net::TcpServerOptions::map_files_for_local_peers).
  enum class ZeroCopy { kAuto, kSendfile, kMmap } zero_copy = ZeroCopy::kAuto;
  std::map<std::string, std::string> mime;  // extension -> type overrides
  size_t cache_entries = 10000;     // open-file cache: descriptors held per worker and root
  size_t cache_bytes = 32 << 20;    // open-file cache: memory held per worker and root
  std::chrono::milliseconds cache_valid{1000};
  size_t memory_file_bytes = 16 * 1024;  // hot cached files up to this size are kept in memory
  // Paths with a segment starting with '.' (.git/, .env) are 403, except
  // under /.well-known/; for PHP too.
  bool deny_dotfiles = true;
};

// One [[fastcgi]] block: requests whose decoded path matches go to a
// FastCGI application (php-fpm).
struct FastCgiConfig {
  std::string match;  // PCRE2 regular expression, searched in the decoded path
  // "unix:/run/php/php-fpm.sock", "127.0.0.1:9000", a name and port
  // ("php:9000"), or an [[upstream]]'s name.
  std::string pass;
  net::SocketAddress address = net::InetAddress();
  std::string host;  // the name of "php:9000", resolved as an upstream's
  uint16_t port = 0;
  std::string group;  // the [[upstream]] pass names (its servers: several php-fpm pools)
  std::string root;   // empty: the location's (the static root)
  std::string index = "index.php";  // run for a request naming a directory, if present
  std::chrono::milliseconds connect_timeout{2000};
  std::chrono::milliseconds read_timeout{30000};
  std::chrono::milliseconds queue_timeout{10000};
  size_t pool = 8;     // persistent connections per worker
  size_t queue = 256;  // requests waiting for one, per worker
  std::optional<CacheUseConfig> cache;  // responses kept in a [[cache]]
  // The whole request body is received (memory, then a temp file) before a
  // connection to the application is taken.
  bool request_buffering = true;
  // The response is read as fast as the application writes it (memory up
  // to response_buffer, then a temp file up to max_temp_file).
  bool response_buffering = true;
  size_t response_buffer = 64 * 1024;
  uint64_t max_temp_file = uint64_t{1} << 30;
  // The response head's bounds: its bytes, and a backstop on its fields.
  http::ResponseParser::Limits response_head;
  // Methods passed to the application; others get 405 (TRACE is not among
  // them unless listed).
  std::vector<std::string> methods = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"};
  int line = 0;  // where the block starts, for messages
  int pass_line = 0;  // where its pass is
  bool operator==(const FastCgiConfig&) const = default;
};

// A response a location gives without a handler (nginx's return).
struct ReturnConfig {
  int status = 0;        // 0: none
  std::string url;       // 301, 302, 303, 307, 308: the Location, with variables
  std::string body;      // other statuses: the body (empty: the error page)
  std::string type = "text/plain; charset=utf-8";
  bool operator==(const ReturnConfig&) const = default;
};

// One [[limit]]: requests for one key (a client address, a cookie, a
// combination: `key` with variables) at most `rate` a second, nginx's
// limit_req. Requests beyond the rate are held up to `burst`: the first
// `delay` of them go at once, the rest wait their turn; beyond the burst,
// `status` (429) with Retry-After. Locations name the limits they take.
// Or, with `connections` instead of a rate, the connections a client
// address holds at once (the top level's limit_connections).
struct KeyLimitConfig {
  std::string name;
  std::string key = "$remote_addr";
  // Either a rate: requests a second in thousandths ("10r/s": 10000,
  // "30r/m": 500); or (rate 0) `connections` per key at once.
  uint64_t rate_milli = 0;
  uint32_t connections = 0;
  uint32_t burst = 0;
  uint32_t delay = 0;  // nodelay: burst
  int status = 429;
  size_t size = 100'000;  // keys kept (the least recently used go)
  std::string file;  // where it is, for messages
  int line = 0;
  bool operator==(const KeyLimitConfig&) const = default;
};

// auth_basic of a site or a location: a user of the htpasswd file `users`
// and their password, or 401 with the `realm` (an empty realm: off, a
// location's "off" under a site's). At most `attempts` password checks an
// address a minute (cached successes aside), then 429.
struct AuthBasicConfig {
  std::string realm;
  std::string users;
  uint32_t attempts = 10;
  int line = 0;
  bool on() const { return !realm.empty(); }
  bool operator==(const AuthBasicConfig&) const = default;
};

// auth_forward of a site or a location (nginx's auth_request, Caddy's
// forward_auth): before the location's handler, a GET to `check`'s pass
// (an address or [[upstream]], over http:// or https:// as a proxy's;
// without a path, the client's URI) carrying the request's fields and where
// it was going (X-Forwarded-Method, X-Forwarded-Uri, ...). A 2xx answer
// lets the request through with the fields named in copy_headers taken
// from it; 401, 403 and redirects go to the client as they came; anything else,
// or no answer within `timeout` (the whole check), is 500. No check: off
// (a location's "off" under a site's).
struct AuthForwardConfig {
  std::optional<ProxyConfig> check;
  std::vector<std::string> copy_headers;
  std::chrono::milliseconds timeout{5000};
  int line = 0;
  bool on() const { return check.has_value(); }
  bool operator==(const AuthForwardConfig&) const = default;
};

// One [[server.location]]: where a request path goes within a site.
struct LocationConfig {
  // kNamed: "@app", matched by no path; try_files' last entry goes there.
  enum class Match { kPrefix, kExact, kRegex, kRegexCaseless, kNamed };
  Match match = Match::kPrefix;
  std::string pattern;      // the path, or the regular expression
  bool skip_regex = false;  // as the longest prefix, no regex is tried (nginx "^~")
  std::string root;         // empty: the site's
  std::string alias;        // prefix locations: the directory that replaces the prefix
  std::vector<std::string> index;      // empty: the site's
  std::vector<std::string> try_files;  // candidates, then a URI or "=404"
  ReturnConfig ret;
  using Fields = std::vector<std::pair<std::string, std::string>>;
  // Added to 200, 201, 204, 206, 301, 302, 303, 304, 307, 308, over the
  // site's of the same name; an empty value takes the field out instead.
  Fields headers;
  Fields headers_always;  // the same, on every response
  std::vector<std::string> headers_remove;  // taken out of every response, with the site's
  std::optional<std::chrono::seconds> expires;  // Cache-Control: max-age on 2xx/3xx
  bool deny_all = false;
  std::vector<Cidr> allow;  // non-empty: only these clients
  std::vector<Cidr> deny;
  // nginx's allow/deny in order ("deny 10.0.0.1", "allow 10.0.0.0/8",
  // "deny all"): the first rule whose network holds the client decides;
  // none: allowed. Not with allow, deny.
  std::vector<AccessRule> access;
  std::vector<std::string> methods;  // empty: any; others get 405
  std::vector<std::string> limit;  // the [[limit]]s it takes, by name
  // Its own auth_basic; none: the site's (finish_sites copies it here).
  std::optional<AuthBasicConfig> auth_basic;
  // Its own auth_forward; none: the site's (finish_sites copies it here).
  std::optional<AuthForwardConfig> auth_forward;
  // A request without a verified client certificate is refused (400): set
  // here, or by the site's verify_client = "on" (finish_sites).
  bool require_client_cert = false;
  bool internal = false;  // reached only through try_files (not by a client)
  bool autoindex = false;  // an HTML listing for a directory without an index
  std::optional<bool> compress;  // unset: [compression].enabled
  std::optional<uint64_t> body_bytes;  // unset: [limits].body_bytes
  // status -> a path of the site served in place of the built-in page
  // (nginx's error_page); empty: the site's.
  std::vector<std::pair<int, std::string>> error_pages;
  bool static_files = true;
  bool users = false;                  // the users app ([auth]) answers its paths
  // "prometheus": the server's metrics as Prometheus text; "status": the
  // status page, and its figures as JSON (?format=json). Empty: neither.
  std::string metrics;
  std::vector<FastCgiConfig> fastcgi;  // tried in order before the static files
  std::optional<ProxyConfig> proxy;    // every request of the location goes there
  int line = 0;
  bool operator==(const LocationConfig&) const = default;
};

// [tls] (every site's defaults, and the implicit site's) or [server.tls]
// (one site's): the certificates a site presents on addresses marked
// "tls", and how it negotiates. Empty strings: Mozilla's "intermediate"
// policy (tls/server_context.h).
struct TlsConfig {
  // (certificate chain file, key file), PEM; an ECDSA and an RSA pair may
  // sit side by side. A site without its own has the [tls] ones.
  std::vector<std::pair<std::string, std::string>> certificates;
  std::string min_protocol = "TLSv1.2";
  std::string max_protocol = "TLSv1.3";
  std::string ciphers;       // TLS 1.2, in OpenSSL's syntax
  std::string ciphersuites;  // TLS 1.3
  std::string curves;
  bool prefer_server_ciphers = false;
  // Client certificates (mutual TLS): the CAs that issue them (PEM), their
  // revocation lists (PEM; optional), "on" (every request of the site needs
  // a verified one), "optional" (asked for; a location may need it:
  // require_client_cert) or "off"; with client_ca, "on" unless said.
  std::string client_ca;
  std::string client_crl;
  std::string verify_client = "off";
  int verify_depth = 1;  // CAs between a client's certificate and client_ca's
  // [server.tls] acme = true: the certificate comes from the [acme] CA, for
  // the site's names (exact ones); `certificates` then names its files in
  // the ACME storage (config_acme.cc).
  bool acme = false;
  std::string where = "tls";  // the table, for messages ("server[1].tls")
  std::string file;           // the file it is in; empty: the main one
  int line = 0;
  bool operator==(const TlsConfig&) const = default;
};

// [tls] keys for every TLS connection of the process.
struct TlsSessionConfig {
  bool tickets = true;  // resumption by session ticket
  std::chrono::seconds ticket_key_rotation{3600};
  size_t cache_entries = 20000;  // sessions kept for TLS 1.2 clients without tickets; 0: none
  std::chrono::seconds lifetime{3600};
  std::chrono::milliseconds handshake_timeout{10000};
  // Connections hand their sending to kernel TLS where the kernel has it
  // (files then leave by sendfile).
  bool kernel_tls = true;
  bool operator==(const TlsSessionConfig&) const = default;
};

// What follows ADDRESS:PORT in a `listen` entry.
struct ListenFlags {
  bool tls = false;    // "tls": HTTPS (ALPN offers h2 and http/1.1)
  bool h2c = false;    // "h2c": plain, and HTTP/2 by prior knowledge as well
  bool no_h2 = false;  // "no-h2" (with tls): ALPN offers http/1.1 only
  // "proxy_protocol": connections begin with a PROXY protocol header, from
  // the real_ip.from networks only
  bool proxy_protocol = false;
};

// "ADDRESS:PORT" with flags ("0.0.0.0:443 tls", "127.0.0.1:8080 h2c");
// nullopt when malformed, with the reason in *error when one is given.
std::optional<net::InetAddress> parse_listen(std::string_view text, ListenFlags* flags,
                                             std::string* error = nullptr);

// Addresses of a `listen`, and those of them with each flag.
struct ListenConfig {
  std::vector<net::InetAddress> all;
  std::vector<net::InetAddress> tls;
  std::vector<net::InetAddress> h2c;
  std::vector<net::InetAddress> no_h2;
  std::vector<net::InetAddress> proxy_protocol;
  void clear() { *this = {}; }
  // Adds an entry (parse_listen's); false, with *error set, when malformed.
  bool add(std::string_view text, std::string* error);
  bool empty() const { return all.empty(); }
  bool operator==(const ListenConfig&) const = default;
};

// [http2]: HTTP/2 for every TLS address that does not say "no-h2" (by
// ALPN) and every plain one marked "h2c".
struct Http2Config {
  bool enabled = true;
  uint32_t max_concurrent_streams = 128;
  // Request body bytes a client may send ahead of the handler: per stream,
  // per connection.
  uint32_t stream_window = 256 * 1024;
  uint32_t connection_window = 1024 * 1024;
  bool operator==(const Http2Config&) const = default;
};

// What an error_page value names: "/errors/404.html" (a page of the site,
// served with the error's status), "=200 /empty.gif" (with another),
// "https://status.example.com/" (a 302 there), "=301 https://..." (a
// redirect of that status).
struct ErrorPageTarget {
  int status = 0;        // 0: the error's own (a page) or 302 (a URL)
  std::string_view path;  // a path of the site, or
  std::string_view url;   // an absolute http(s) URL
};
std::optional<ErrorPageTarget> parse_error_page(std::string_view text);

// One [[server]]: a site, chosen by the request's Host.
struct SiteConfig {
  // Exact ("example.com"), wildcard ("*.example.com", "example.*",
  // ".example.com" for both the name and its subdomains) or regular
  // expression ("~^www\d+\.example\.net$"). Empty: any name.
  std::vector<std::string> names;
  // Addresses this site answers on; empty: the top-level `listen`.
  ListenConfig listen;
  bool is_default = false;  // answers a Host no site on its address names; else the first
  std::string root;         // empty: [static].root
  std::vector<std::string> index;  // empty: [static].index
  std::vector<std::pair<int, std::string>> error_pages;  // for locations without their own
  // Every location's, under its own (LocationConfig's of the same names).
  LocationConfig::Fields headers;
  LocationConfig::Fields headers_always;
  std::vector<std::string> headers_remove;
  std::vector<LocationConfig> locations;
  TlsConfig tls;  // [server.tls] over [tls]
  RealIpConfig real_ip;  // [server.real_ip] over [real_ip]
  std::optional<AuthBasicConfig> auth_basic;  // every location's that has none
  std::optional<AuthForwardConfig> auth_forward;  // the same
  std::string file;   // the file it was read from (an included one); empty: made
  std::string where;  // its table there, for messages ("server[1]")
  bool implicit = false;  // made from the top-level keys (no [[server]] in the file)
  int line = 0;
  bool operator==(const SiteConfig&) const = default;
};

// [auth]: the users application (register, log in) on a database.
struct AuthConfig {
  bool enabled = false;  // the section is present
  std::string store = "sqlite:data/users.db";  // or "mysql://user:pass@host:3306/db"
  std::string secret;  // session signing key; empty: a key file next to a SQLite database
  uint64_t password_ops = 2;                // argon2id opslimit
  size_t password_memory = 64 * 1024 * 1024;  // argon2id memlimit
  std::chrono::milliseconds session_ttl{7LL * 24 * 3600 * 1000};
  uint32_t login_attempts = 10;  // per client address per minute
  uint32_t register_attempts = 20;       // per client address per hour
  uint32_t account_login_failures = 5;   // in a row, then the account backs off
  size_t db_pool = 4;            // MariaDB connections
  int line = 0;
  bool operator==(const AuthConfig&) const = default;
};

// [compression]: gzip and brotli on the fly (http::CompressionPolicy), for
// every location unless one says `compress`.
struct CompressionConfig {
  bool enabled = false;
  http::CompressionPolicy policy;
};

struct LogConfig {
  log::Level level = log::Level::info;
  std::string error_log;  // empty: stderr
  size_t max_file_bytes = 64 * 1024 * 1024;
  size_t max_files = 5;
  std::chrono::seconds flush_interval{1};
};

struct Config {
  std::string source = "(built-in defaults)";
  ListenConfig listen;
  int listen_line = 0;  // where `listen` is, for messages
  TlsConfig tls;
  TlsSessionConfig tls_sessions;
  AcmeConfig acme;
  Http2Config http2;
  int workers = 1;  // default_config(): one per CPU ("auto")
  // SERVER_NAME for applications, and the name this server goes by;
  // default_config(): the host name.
  std::string server_name;
  // Where request bodies and responses wait when they outgrow memory, in
  // unnamed files; default_config(): $TMPDIR, else /tmp.
  std::string temp_dir = "/tmp";
  net::AcceptMode accept_mode = net::AcceptMode::kDispatch;
  net::DispatchPolicy dispatch_policy = net::DispatchPolicy::kRoundRobin;
  net::TriggerMode trigger = net::TriggerMode::kLevel;
  // kDefault: the TERN_IO environment variable, else io_uring (epoll where
  // the kernel refuses it).
  net::IoBackend io = net::IoBackend::kDefault;
  bool defer_accept = true;
  // TCP_NOTSENT_LOWAT of every connection (net::TcpServerOptions::send_lowat);
  // 0: the kernel's default.
  size_t send_lowat = 16 * 1024;
  // A response's head waits for its file's first bytes
  // (net::TcpServerOptions::tcp_nopush).
  bool tcp_nopush = true;
  std::vector<int> cpu_affinity;
  size_t max_connections_per_worker = 10000;
  std::chrono::milliseconds shutdown_timeout{10000};
  // Who the process becomes once its ports are bound and its files open
  // (server/privileges.h); empty: whoever started it. `group` empty: the
  // user's primary group.
  std::string user;
  std::string group;
  // The process id, for `tern -s` (server/control.h); empty: none.
  std::string pid_file;
  http::HttpLimits limits;
  StaticConfig static_files;
  CompressionConfig compression;
  std::vector<FastCgiConfig> fastcgi;  // top-level blocks (the implicit site's)
  // [[server]] blocks; without any, one implicit site: location "/" with
  // the users app ([auth]), the [[fastcgi]] blocks and the static files.
  std::vector<SiteConfig> sites;
  std::vector<UpstreamConfig> upstreams;  // [[upstream]] groups
  std::vector<KeyLimitConfig> key_limits;  // [[limit]]s
  std::vector<CacheZoneConfig> caches;     // [[cache]] zones
  // The [[limit]]s (of connections, by $remote_addr) every connection
  // counts against from its accept to its close.
  std::vector<std::string> limit_connections;
  int limit_connections_line = 0;
  AuthConfig auth;
  size_t task_threads = 4;  // for blocking work (the users database, password hashing, cache copies)
  LogConfig log;
  std::string access_log;  // empty: off
  // "combined", "json" or a format with $variables (server/access_log_format.h).
  std::string access_log_format = "combined";
  std::vector<Cidr> blocked;
  // The DNS servers for upstreams by name ("10.0.0.2", "127.0.0.1:5353");
  // empty: /etc/resolv.conf.
  std::vector<std::string> resolver;
  // How often a name is asked again; 0: when its answer's TTL runs out.
  std::chrono::milliseconds resolve_interval{0};
  // [real_ip]: the client that trusted proxies name (sites may have their own).
  RealIpConfig real_ip;
};

// The networks that may send a PROXY protocol header: every real_ip.from,
// the top level's and the sites'.
std::vector<Cidr> proxy_protocol_senders(const Config& config);

// The HTTP upstreams a location's requests go to: its auth_forward's check,
// then its proxy (either may be missing).
std::vector<const ProxyConfig*> location_proxies(const LocationConfig& location);

// "app:3000", "api.internal:8080": a DNS name and a port (not an address);
// false for anything else.
bool parse_host_port(std::string_view text, std::string* host, uint16_t* port);

// The configuration with no file: ./www on 127.0.0.1:8080, a worker per CPU.
Config default_config();

// CPUs this process may run on ("auto" workers).
int cpu_count();

// Reads and validates a TOML file on top of the defaults. Throws ConfigError.
Config load_config(const std::string& path);

// Makes the implicit site again from the top-level keys (after they were
// changed: flags, values a reload keeps); sites of a [[server]] stay.
void rebuild_implicit_site(Config& config);

// Every address with a flag (ListenConfig::tls, h2c, no_h2), at the top
// level or by a site, once each.
std::vector<net::InetAddress> flagged_addresses(const Config& config,
                                                std::vector<net::InetAddress> ListenConfig::*flag);
inline std::vector<net::InetAddress> tls_addresses(const Config& config) {
  return flagged_addresses(config, &ListenConfig::tls);
}

// Parsers for the value forms the file uses; nullopt when malformed.
// Durations: "250ms", "10s", "5m", "1h", "7d" (or a bare integer of seconds).
std::optional<std::chrono::milliseconds> parse_duration(std::string_view text);
// Also "2w" and "1y" (365 days).
// Sizes: "512", "16KiB", "64MiB", "1GiB" (also "k", "m", "g" as 1024 multiples).
std::optional<uint64_t> parse_size(std::string_view text);

}  // namespace tern::server
