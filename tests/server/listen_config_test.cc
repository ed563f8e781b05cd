// The `listen` entries and their flags (tls, h2c, no-h2): parsed, gathered
// per flag across sites, and matched against a connection's own address;
// and the [http2] table's bounds.
#include <gtest/gtest.h>

#include <fstream>

#include "server/config/config.h"
#include "server/handlers/proxy_handler.h"
#include "server/server.h"
#include "support/temp_dir.h"

namespace tern::server {
namespace {

net::InetAddress at(std::string_view text) { return *net::InetAddress::parse(text); }

TEST(ListenConfigTest, FlagsFollowTheAddressInAnyOrder) {
  ListenFlags flags;
  EXPECT_EQ(parse_listen("127.0.0.1:80", &flags), at("127.0.0.1:80"));
  EXPECT_FALSE(flags.tls || flags.h2c || flags.no_h2);
  ASSERT_TRUE(parse_listen("0.0.0.0:8080 h2c", &flags));
  EXPECT_TRUE(flags.h2c);
  ASSERT_TRUE(parse_listen("[::1]:443\tno-h2  tls", &flags));
  EXPECT_TRUE(flags.tls && flags.no_h2 && !flags.h2c);
  ASSERT_TRUE(parse_listen("0.0.0.0:443 proxy_protocol tls", &flags));
  EXPECT_TRUE(flags.tls && flags.proxy_protocol);
}

TEST(ListenConfigTest, MistakesSayWhy) {
  ListenFlags flags;
  std::string error;
  EXPECT_FALSE(parse_listen("127.0.0.1:80 h2c tls", &flags, &error));
  EXPECT_NE(error.find("h2c is HTTP/2 without TLS"), std::string::npos) << error;
  EXPECT_FALSE(parse_listen("127.0.0.1:80 no-h2", &flags, &error));
  EXPECT_NE(error.find("no-h2 goes with tls"), std::string::npos) << error;
  EXPECT_FALSE(parse_listen("127.0.0.1:80 spdy", &flags, &error));
  EXPECT_NE(error.find("unknown flag \"spdy\""), std::string::npos) << error;
  EXPECT_FALSE(parse_listen("localhost:80", &flags, &error));
  EXPECT_NE(error.find("expected ADDRESS:PORT"), std::string::npos) << error;
}

TEST(ListenConfigTest, EachFlagGathersItsAddresses) {
  ListenConfig listen;
  std::string error;
  ASSERT_TRUE(listen.add("127.0.0.1:80 h2c", &error));
  ASSERT_TRUE(listen.add("127.0.0.1:443 tls", &error));
  ASSERT_TRUE(listen.add("127.0.0.1:8443 tls no-h2", &error));
  EXPECT_EQ(listen.all.size(), 3u);
  EXPECT_EQ(listen.h2c, std::vector{at("127.0.0.1:80")});
  EXPECT_EQ(listen.tls, (std::vector{at("127.0.0.1:443"), at("127.0.0.1:8443")}));
  EXPECT_EQ(listen.no_h2, std::vector{at("127.0.0.1:8443")});
  EXPECT_FALSE(listen.add("127.0.0.1:9 h2c tls", &error));
  EXPECT_EQ(listen.all.size(), 3u);  // a mistake adds nothing
}

TEST(ListenConfigTest, AWildcardCoversEveryAddressOfItsPortAndFamily) {
  EXPECT_TRUE(at("0.0.0.0:80").is_any());
  EXPECT_TRUE(at("[::]:80").is_any());
  EXPECT_FALSE(at("127.0.0.1:80").is_any());
  EXPECT_TRUE(at("0.0.0.0:80").covers(at("10.1.2.3:80")));
  EXPECT_FALSE(at("0.0.0.0:80").covers(at("10.1.2.3:81")));
  EXPECT_FALSE(at("0.0.0.0:80").covers(at("[::1]:80")));
  EXPECT_TRUE(at("[::]:80").covers(at("[::1]:80")));
  EXPECT_TRUE(at("127.0.0.1:80").covers(at("127.0.0.1:80")));
  EXPECT_FALSE(at("127.0.0.1:80").covers(at("127.0.0.2:80")));
}

class ConfigFileTest : public ::testing::Test {
 protected:
  Config load(const std::string& toml) {
    const std::string path = dir_.at("tern.toml");
    std::ofstream(path) << toml << "\n[static]\nroot = \"" << dir_.path() << "\"\n";
    return load_config(path);
  }
  // What loading `toml` throws; "(loaded)" if it loads.
  std::string error(const std::string& toml) {
    try {
      load(toml);
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "(loaded)";
  }
  tern::testing::TempDir dir_;
};

TEST_F(ConfigFileTest, SitesAddTheirFlaggedAddressesOnce) {
  const Config config = load(R"(listen = ["127.0.0.1:8080 h2c"]
[[server]]
names = ["a.test"]
[[server]]
names = ["b.test"]
listen = ["127.0.0.1:8080 h2c", "127.0.0.1:9090 h2c"]
)");
  EXPECT_EQ(flagged_addresses(config, &ListenConfig::h2c),
            (std::vector{at("127.0.0.1:8080"), at("127.0.0.1:9090")}));
  EXPECT_TRUE(tls_addresses(config).empty());
}

TEST_F(ConfigFileTest, RealIpAtTheTopIsEverySitesUnlessOneHasItsOwn) {
  const Config config = load(R"(real_ip = { from = ["10.0.0.0/8", "2001:db8::/32"] }
[[server]]
names = ["a.test"]
[[server]]
names = ["b.test"]
listen = ["127.0.0.1:8081 proxy_protocol"]
real_ip = { from = ["192.0.2.0/24"], header = "proxy_protocol" }
[[server]]
names = ["c.test"]
[server.real_ip]
from = ["198.51.100.0/24"]
header = "X-Real-IP"
recursive = false
)");
  ASSERT_EQ(config.sites.size(), 3u);
  EXPECT_EQ(config.sites[0].real_ip.from.size(), 2u);
  EXPECT_EQ(config.sites[0].real_ip.source, RealIpConfig::Source::kXForwardedFor);
  EXPECT_TRUE(config.sites[0].real_ip.recursive);
  EXPECT_EQ(config.sites[1].real_ip.from, std::vector{*Cidr::parse("192.0.2.0/24")});
  EXPECT_EQ(config.sites[1].real_ip.source, RealIpConfig::Source::kProxyProtocol);
  EXPECT_EQ(config.sites[2].real_ip.source, RealIpConfig::Source::kXRealIp);
  EXPECT_FALSE(config.sites[2].real_ip.recursive);
  EXPECT_EQ(flagged_addresses(config, &ListenConfig::proxy_protocol), std::vector{at("127.0.0.1:8081")});
  // Who may send the header: every site's networks and the top level's.
  EXPECT_EQ(proxy_protocol_senders(config).size(), 4u);
}

TEST_F(ConfigFileTest, ProxyProtocolWithoutTrustedNetworksNamesTheListen) {
  try {
    load("listen = [\"127.0.0.1:8081 proxy_protocol\"]\n");
    FAIL() << "loaded";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("tern.toml:1: listen: 127.0.0.1:8081 proxy_protocol"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("real_ip.from"), std::string::npos) << e.what();
  }
  try {
    load("[[server]]\nnames = [\"a\"]\n[[server]]\nlisten = [\"127.0.0.1:8082 proxy_protocol\"]\n");
    FAIL() << "loaded";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("tern.toml:3: server[1].listen:"), std::string::npos) << e.what();
  }
}

TEST_F(ConfigFileTest, RealIpMistakesNameTheirKey) {
  const auto key_of = [this](const std::string& toml) -> std::string {
    try {
      load(toml);
    } catch (const ConfigError& e) {
      const std::string what = e.what();
      const size_t at = what.find("tern.toml:");
      return what.substr(at + 10, what.find(": ", what.find(": ", at) + 2) - at - 10);
    }
    return "loaded";
  };
  EXPECT_EQ(key_of("[real_ip]\nheader = \"X-Real-IP\"\n"), "1: real_ip.from");
  EXPECT_EQ(key_of("[real_ip]\nfrom = [\"10.0.0.1/8\"]\n"), "2: real_ip.from");
  EXPECT_EQ(key_of("[real_ip]\nfrom = [\"10.0.0.0/8\"]\nheader = \"Forwarded\"\n"), "3: real_ip.header");
  EXPECT_EQ(key_of("[real_ip]\nfrom = [\"10.0.0.0/8\"]\ntrust = true\n"), "3: real_ip.trust");
  EXPECT_EQ(key_of("[[server]]\nreal_ip = { from = [] }\n"), "2: server[0].real_ip.from");
}

TEST_F(ConfigFileTest, AnUpstreamSendsThePROXYProtocolOnlyWhereItCanBeRead) {
  const std::string group = "[[upstream]]\nname = \"lb\"\nservers = [{ address = \"127.0.0.1:9\" }]\n";
  const Config config = load(group + "proxy_protocol = \"v2\"\n");
  EXPECT_EQ(config.upstreams.at(0).proxy_protocol, 2);
  EXPECT_EQ(load(group).upstreams.at(0).proxy_protocol, 0);
  const auto error_of = [this](const std::string& toml) -> std::string {
    try {
      load(toml);
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "loaded";
  };
  EXPECT_NE(error_of(group + "proxy_protocol = \"v3\"\n").find("upstream[0].proxy_protocol: expected \"v1\" or \"v2\""),
            std::string::npos);
  const std::string sites = group + "proxy_protocol = \"v1\"\n[[server]]\n[[server.location]]\nprefix = \"/\"\n";
  EXPECT_NE(error_of(sites + "fastcgi = { pass = \"lb\" }\n").find("which FastCGI servers do not read"),
            std::string::npos);
  // Over TLS too: the header goes ahead of the handshake.
  EXPECT_EQ(error_of(sites + "proxy = { pass = \"https://lb\" }\n"), "loaded");
  EXPECT_EQ(error_of(sites + "proxy = { pass = \"http://lb\" }\n"), "loaded");
}

TEST(UpstreamNamesConfig, ANameAndAPortAreNotAnAddress) {
  std::string host;
  uint16_t port = 0;
  EXPECT_TRUE(parse_host_port("app:3000", &host, &port));
  EXPECT_EQ(host, "app");
  EXPECT_EQ(port, 3000);
  EXPECT_TRUE(parse_host_port("api.internal.svc.cluster.local:8080", &host, &port));
  for (const char* bad : {"app", "app:", ":80", "app:0", "app:65536", "app:80x", "1.2.3.4:80", "-app:80", "a b:80",
                          "unix:/run/x.sock", "[::1]:80"}) {
    EXPECT_FALSE(parse_host_port(bad, &host, &port)) << bad;
  }
}

TEST_F(ConfigFileTest, UpstreamsByNameTakeTheResolverAndItsInterval) {
  const Config config = load(R"(resolver = ["10.0.0.2", "127.0.0.1:5353"]
resolve_interval = "30s"
[[upstream]]
name = "app"
servers = [{ address = "app:3000", weight = 2 }, { address = "127.0.0.1:3001" }]
)");
  EXPECT_EQ(config.resolver, (std::vector<std::string>{"10.0.0.2", "127.0.0.1:5353"}));
  EXPECT_EQ(config.resolve_interval, std::chrono::seconds(30));
  const UpstreamServerConfig& named = config.upstreams.at(0).servers.at(0);
  EXPECT_EQ(named.host, "app");
  EXPECT_EQ(named.port, 3000);
  EXPECT_EQ(named.weight, 2u);
  EXPECT_TRUE(config.upstreams.at(0).servers.at(1).host.empty());
  EXPECT_THROW(load("resolver = [\"dns.example\"]\n"), ConfigError);
  // FastCGI takes names too: through an [[upstream]], or in its pass.
  const Config fastcgi = load(
      "[[upstream]]\nname = \"php\"\nservers = [{ address = \"php:9000\" }]\n[[server]]\n"
      "[[server.location]]\nprefix = \"/\"\nfastcgi = { pass = \"php\" }\n"
      "[[server.location]]\nprefix = \"/blog/\"\nfastcgi = { pass = \"blog-php:9001\" }\n");
  const FastCgiConfig& by_group = fastcgi.sites.at(0).locations.at(0).fastcgi.at(0);
  EXPECT_EQ(by_group.group, "php");
  const FastCgiConfig& by_name = fastcgi.sites.at(0).locations.at(1).fastcgi.at(0);
  EXPECT_TRUE(by_name.group.empty());
  EXPECT_EQ(by_name.host, "blog-php");
  EXPECT_EQ(by_name.port, 9001);
  EXPECT_THROW(load("[[server]]\n[[server.location]]\nprefix = \"/\"\nfastcgi = { pass = \"php:\" }\n"),
               ConfigError);
  EXPECT_THROW(load("[[upstream]]\nname = \"a\"\nservers = [{ address = \"app\" }]\n"), ConfigError);
}

// A location's own connect timeout gives it a group of its own, the others
// sharing the [[upstream]]'s.
TEST_F(ConfigFileTest, ALocationsConnectTimeoutGivesItsGroupConnectionsOfItsOwn) {
  const Config config = load(
      "[[upstream]]\nname = \"app\"\nconnect_timeout = \"3s\"\nservers = [{ address = \"127.0.0.1:3000\" }]\n"
      "[[server]]\n[[server.location]]\nprefix = \"/quick/\"\n"
      "proxy = { pass = \"http://app\", connect_timeout = \"300ms\" }\n"
      "[[server.location]]\nprefix = \"/\"\nproxy = { pass = \"http://app\" }\n"
      "[[server.location]]\nprefix = \"/direct/\"\nproxy = { pass = \"http://127.0.0.1:3001\", connect_timeout = \"1s\" }\n");
  EXPECT_EQ(config.sites.at(0).locations.at(0).proxy->connect_timeout, std::chrono::milliseconds(300));
  EXPECT_FALSE(config.sites.at(0).locations.at(1).proxy->connect_timeout.has_value());
  const std::vector<UpstreamConfig> groups = proxy_groups(config);
  std::vector<std::pair<std::string, int64_t>> seen;
  for (const UpstreamConfig& group : groups) seen.emplace_back(group.name, group.connect_timeout.count());
  EXPECT_EQ(seen, (std::vector<std::pair<std::string, int64_t>>{{"app", 3000}, {"app", 300}, {"127.0.0.1:3001", 1000}}));
  EXPECT_THROW(load("[[server]]\n[[server.location]]\nprefix = \"/\"\n"
                    "proxy = { pass = \"http://app:1\", connect_timeout = \"soon\" }\n"),
               ConfigError);
}

// [[limit]]: rates in thousandths a second, nodelay as a delay of the whole
// burst, and the locations that name them.
TEST_F(ConfigFileTest, LimitsReadTheirRateBurstAndKey) {
  const Config config = load(
      "[[limit]]\nname = \"api\"\nrate = \"10r/s\"\nburst = 20\ndelay = 5\n"
      "[[limit]]\nname = \"login\"\nkey = \"$server_name:$cookie_session\"\nrate = \"30r/m\"\nburst = 3\n"
      "nodelay = true\nstatus = 503\nsize = 1000\n"
      "[[server]]\n[[server.location]]\nprefix = \"/\"\nlimit = [\"api\", \"login\"]\n");
  ASSERT_EQ(config.key_limits.size(), 2u);
  const KeyLimitConfig& api = config.key_limits[0];
  EXPECT_EQ(api.key, "$remote_addr");
  EXPECT_EQ(api.rate_milli, 10'000u);
  EXPECT_EQ(api.burst, 20u);
  EXPECT_EQ(api.delay, 5u);
  EXPECT_EQ(api.status, 429);
  const KeyLimitConfig& login = config.key_limits[1];
  EXPECT_EQ(login.rate_milli, 500u);
  EXPECT_EQ(login.delay, 3u);
  EXPECT_EQ(login.status, 503);
  EXPECT_EQ(login.size, 1000u);
  EXPECT_EQ(config.sites.at(0).locations.at(0).limit, (std::vector<std::string>{"api", "login"}));
  EXPECT_THROW(load("[[limit]]\nname = \"a\"\nrate = \"0r/s\"\n"), ConfigError);
  EXPECT_THROW(load("[[limit]]\nname = \"a\"\nrate = \"1r/s\"\nkey = \"plain\"\n"), ConfigError);
  EXPECT_THROW(load("[[limit]]\nname = \"a\"\nrate = \"1r/s\"\nnodelay = true\ndelay = 0\n"), ConfigError);
}

// The variables of a limit's key and of a return are read by VariableText,
// the same reader that expands them: what it reads is what was checked.
TEST_F(ConfigFileTest, VariablesAreCheckedAsTheyWillBeRead) {
  const std::string limit = "[[limit]]\nname = \"a\"\nrate = \"1r/s\"\nkey = ";
  EXPECT_EQ(load(limit + "\"${remote_addr}:$http_x_key\"\n").key_limits.at(0).key, "${remote_addr}:$http_x_key");
  for (const char* key : {"\"$1\"", "\"$args\"", "\"${host\"", "\"a$\"", "\"$http_\"", "\"$nonsense\""}) {
    EXPECT_NE(error(limit + key + "\n").find("limit[0].key"), std::string::npos) << key;
  }
  EXPECT_EQ(load(limit + "\"$arg_token\"\n").key_limits.at(0).key, "$arg_token");
  EXPECT_NE(error(limit + "\"$arg_\"\n").find("limit[0].key"), std::string::npos);
  const std::string cached = "[[cache]]\nname = \"p\"\npath = \"/tmp/p\"\n[[server]]\n[[server.location]]\n"
                             "prefix = \"/\"\nproxy = { pass = \"http://127.0.0.1:1\", cache = { zone = \"p\", ";
  const Config bypassed = load(cached + "bypass = [\"$cookie_nocache$arg_nocache\"], no_store = \"$http_x_no\" } }\n");
  ASSERT_TRUE(bypassed.sites.at(0).locations.at(0).proxy->cache);
  EXPECT_EQ(bypassed.sites.at(0).locations.at(0).proxy->cache->bypass,
            std::vector<std::string>{"$cookie_nocache$arg_nocache"});
  EXPECT_EQ(bypassed.sites.at(0).locations.at(0).proxy->cache->no_store, std::vector<std::string>{"$http_x_no"});
  for (const char* bad : {"bypass = [\"$1\"]", "no_store = [\"nocache\"]", "key = \"$named\""}) {
    EXPECT_NE(error(cached + bad + " } }\n").find("proxy.cache."), std::string::npos) << bad;
  }
  const std::string location = "[[server]]\n[[server.location]]\nprefix = \"/\"\nreturn = ";
  const Config config = load(location + "{ status = 200, body = \"$http_x_name ${cookie_id}\" }\n");
  EXPECT_EQ(config.sites.at(0).locations.at(0).ret.body, "$http_x_name ${cookie_id}");
  for (const char* ret : {"{ status = 200, body = \"$nonsense\" }", "{ status = 302, url = \"/${uri\" }",
                          "{ status = 200, body = \"cost $\" }"}) {
    EXPECT_NE(error(location + ret + "\n").find("unknown variable"), std::string::npos) << ret;
  }
}

// A [[limit]] of connections: counted by address at accept where the top
// level's limit_connections names it (by "$remote_addr", closed: no
// status), or requests in flight where a location names it (any key, 503
// unless its status says); not both; no rate, burst or delay beside it.
TEST_F(ConfigFileTest, ConnectionLimitsCountConnectionsOrRequestsInFlight) {
  const Config config = load("limit_connections = [\"perip\"]\n"
                             "[[limit]]\nname = \"perip\"\nconnections = 20\nsize = 5000\n"
                             "[[limit]]\nname = \"busy\"\nconnections = 4\nkey = \"$http_x_key\"\n"
                             "[[server]]\n[[server.location]]\nprefix = \"/\"\nlimit = [\"busy\"]\n");
  ASSERT_EQ(config.key_limits.size(), 2u);
  EXPECT_EQ(config.key_limits[0].connections, 20u);
  EXPECT_EQ(config.key_limits[0].rate_milli, 0u);
  EXPECT_EQ(config.key_limits[0].size, 5000u);
  EXPECT_EQ(config.key_limits[1].key, "$http_x_key");
  EXPECT_EQ(config.key_limits[1].status, 503);
  EXPECT_EQ(config.limit_connections, (std::vector<std::string>{"perip"}));
  EXPECT_EQ(config.sites.at(0).locations.at(0).limit, (std::vector<std::string>{"busy"}));
  const std::string perip = "[[limit]]\nname = \"perip\"\nconnections = 2\n";
  const std::string api = "[[limit]]\nname = \"api\"\nrate = \"1r/s\"\n";
  EXPECT_NE(error("limit_connections = [\"none\"]\n").find("tern.toml:1: limit_connections: \"none\" names no [[limit]]"),
            std::string::npos);
  EXPECT_NE(error("limit_connections = [\"api\"]\n" + api).find("tern.toml:1: limit_connections: \"api\" is a limit of requests"),
            std::string::npos);
  EXPECT_NE(error("limit_connections = [\"perip\"]\n" + perip +
                  "[[server]]\n[[server.location]]\nprefix = \"/\"\nlimit = [\"perip\"]\n")
                .find("requests in flight need a [[limit]] of their own"),
            std::string::npos);
  EXPECT_NE(error("[[limit]]\nname = \"a\"\nconnections = 2\nrate = \"1r/s\"\n").find("either rate or connections"),
            std::string::npos);
  EXPECT_NE(error("[[limit]]\nname = \"a\"\nconnections = 2\nburst = 3\n").find("burst"), std::string::npos);
  EXPECT_NE(error("limit_connections = [\"a\"]\n[[limit]]\nname = \"a\"\nconnections = 2\nstatus = 429\n")
                .find("has a status"),
            std::string::npos);
  EXPECT_NE(error("limit_connections = [\"perip\", \"perip\"]\n" + perip).find("\"perip\" named twice"),
            std::string::npos);
  EXPECT_NE(error("limit_connections = [\"a\"]\n[[limit]]\nname = \"a\"\nconnections = 2\nkey = \"$http_x\"\n")
                .find("$remote_addr"),
            std::string::npos);
  EXPECT_NE(error("[[limit]]\nname = \"a\"\n").find("limit[0].rate: required"), std::string::npos);
  EXPECT_NE(error("[[limit]]\nname = \"a\"\nconnections = 0\n").find("connections"), std::string::npos);
}

// auth_basic: a site's goes to its locations that have none; "off" keeps
// one open; realm and users are required.
TEST_F(ConfigFileTest, AuthBasicOfASiteCoversItsLocationsUnlessOneSaysOff) {
  const Config config = load(
      "[[server]]\nauth_basic = { realm = \"Site\", users = \"/etc/tern/htpasswd\" }\n"
      "[[server.location]]\nprefix = \"/open/\"\nauth_basic = \"off\"\n"
      "[[server.location]]\nprefix = \"/admin/\"\nauth_basic = { realm = \"Admin\", users = \"/a\", attempts = 3 }\n"
      "[[server.location]]\nprefix = \"/\"\n");
  const std::vector<LocationConfig>& l = config.sites.at(0).locations;
  ASSERT_EQ(l.size(), 3u);
  ASSERT_TRUE(l[0].auth_basic && l[1].auth_basic && l[2].auth_basic);
  EXPECT_FALSE(l[0].auth_basic->on());
  EXPECT_EQ(l[1].auth_basic->realm, "Admin");
  EXPECT_EQ(l[1].auth_basic->users, "/a");
  EXPECT_EQ(l[1].auth_basic->attempts, 3u);
  EXPECT_EQ(l[2].auth_basic->realm, "Site");
  EXPECT_EQ(l[2].auth_basic->users, "/etc/tern/htpasswd");
  EXPECT_EQ(l[2].auth_basic->attempts, 10u);
  auto site_error = [this](const std::string& text) { return error("[[server]]\n" + text); };
  EXPECT_NE(site_error("auth_basic = { users = \"/a\" }\n").find("tern.toml:2: server[0].auth_basic.realm: required"),
            std::string::npos);
  EXPECT_NE(site_error("auth_basic = { realm = \"A\" }\n").find("server[0].auth_basic.users: required"), std::string::npos);
  EXPECT_NE(site_error("auth_basic = \"on\"\n").find("server[0].auth_basic: expected"), std::string::npos);
  EXPECT_NE(site_error("auth_basic = { realm = \"A\", users = \"/a\", user = \"x\" }\n").find("unknown key"),
            std::string::npos);
  EXPECT_NE(site_error("auth_basic = { realm = \"A\\n\", users = \"/a\" }\n").find("no control characters"),
            std::string::npos);
}

// auth_forward: a site's goes to its locations that have none, "off" keeps
// one open; its pass is read as a proxy's (a path anywhere, since it names
// the check and replaces no prefix), and the check's group is one of the
// proxy groups, shared with a proxy to the same address.
TEST_F(ConfigFileTest, AuthForwardOfASiteCoversItsLocationsAndItsCheckHasAGroup) {
  const Config config = load(
      "[[server]]\nauth_forward = { pass = \"http://127.0.0.1:9091/api/verify?rd=x\", "
      "copy_headers = [\"Remote-User\", \"Remote-Groups\"] }\n"
      "[[server.location]]\nprefix = \"/auth/\"\nauth_forward = \"off\"\nproxy = { pass = \"http://127.0.0.1:9091\" }\n"
      "[[server.location]]\nregex = \"^/api/\"\nauth_forward = { pass = \"https://idp.example:443\", timeout = \"1500ms\", "
      "host = \"idp\", tls = { verify = false } }\n"
      "[[server.location]]\nprefix = \"/\"\n");
  const std::vector<LocationConfig>& l = config.sites.at(0).locations;
  ASSERT_EQ(l.size(), 3u);
  ASSERT_TRUE(l[0].auth_forward && l[1].auth_forward && l[2].auth_forward);
  EXPECT_FALSE(l[0].auth_forward->on());
  ASSERT_TRUE(l[1].auth_forward->on() && l[2].auth_forward->on());
  EXPECT_EQ(l[1].auth_forward->check->group, "idp.example:443");
  EXPECT_FALSE(l[1].auth_forward->check->path.has_value());
  EXPECT_TRUE(l[1].auth_forward->check->tls.has_value());
  EXPECT_EQ(l[1].auth_forward->check->host, "idp");
  EXPECT_EQ(l[1].auth_forward->timeout, std::chrono::milliseconds(1500));
  EXPECT_TRUE(l[1].auth_forward->copy_headers.empty());
  EXPECT_EQ(l[2].auth_forward->check->group, "127.0.0.1:9091");
  EXPECT_EQ(l[2].auth_forward->check->path, "/api/verify?rd=x");
  EXPECT_EQ(l[2].auth_forward->timeout, std::chrono::milliseconds(5000));
  EXPECT_EQ(l[2].auth_forward->copy_headers, (std::vector<std::string>{"Remote-User", "Remote-Groups"}));
  std::vector<std::pair<std::string, bool>> groups;
  for (const UpstreamConfig& group : proxy_groups(config)) groups.emplace_back(group.name, group.tls.has_value());
  EXPECT_EQ(groups, (std::vector<std::pair<std::string, bool>>{{"idp.example:443", true}, {"127.0.0.1:9091", false}}));

  auto site_error = [this](const std::string& text) { return error("[[server]]\n" + text); };
  EXPECT_NE(site_error("auth_forward = { copy_headers = [\"Remote-User\"] }\n")
                .find("tern.toml:2: server[0].auth_forward.pass: required"),
            std::string::npos);
  EXPECT_NE(site_error("auth_forward = \"on\"\n").find("server[0].auth_forward: expected"), std::string::npos);
  EXPECT_NE(site_error("auth_forward = { pass = \"ftp://a:1\" }\n").find("server[0].auth_forward.pass: expected"),
            std::string::npos);
  EXPECT_NE(site_error("auth_forward = { pass = \"http://a:1\", copy_headers = [\"Content-Length\"] }\n")
                .find("auth_forward.copy_headers"),
            std::string::npos);
  EXPECT_NE(site_error("auth_forward = { pass = \"http://a:1\", copy_headers = [\"Bad Name\"] }\n")
                .find("is not a header name"),
            std::string::npos);
  EXPECT_NE(site_error("auth_forward = { pass = \"http://a:1\", timeout = \"0s\" }\n").find("auth_forward.timeout"),
            std::string::npos);
  EXPECT_NE(site_error("auth_forward = { pass = \"http://a:1\", read_timeout = \"1s\" }\n").find("unknown key"),
            std::string::npos);
  EXPECT_NE(site_error("auth_forward = { pass = \"http://a:1\", tls = { verify = false } }\n").find("https://"),
            std::string::npos);
  EXPECT_NE(site_error("auth_forward = { pass = \"http://nowhere\" }\n").find("auth_forward.pass"), std::string::npos);
}

// Client certificates: client_ca alone means "on", which every location
// of the site requires; "optional" leaves it to require_client_cert; [tls]
// gives its settings to sites that say nothing of them.
TEST_F(ConfigFileTest, ClientCertificatesAreAskedForAndRequiredPerSiteOrLocation) {
  const Config config = load(
      "[tls]\ncert = \"/c.pem\"\nkey = \"/k.pem\"\nclient_ca = \"/ca.pem\"\nclient_crl = \"/crl0.pem\"\n"
      "[[server]]\nnames = [\"a\"]\n[[server.location]]\nprefix = \"/\"\n"
      "[[server]]\nnames = [\"b\"]\n[server.tls]\nverify_client = \"optional\"\nclient_crl = \"/crl.pem\"\n"
      "verify_depth = 2\n"
      "[[server.location]]\nprefix = \"/admin/\"\nrequire_client_cert = true\n"
      "[[server.location]]\nprefix = \"/\"\n"
      "[[server]]\nnames = [\"c\"]\n[server.tls]\nverify_client = \"off\"\n"
      "[[server]]\nnames = [\"d\"]\n[server.tls]\nclient_ca = \"/d.pem\"\n");
  ASSERT_EQ(config.sites.size(), 4u);
  const TlsConfig& a = config.sites[0].tls;
  EXPECT_EQ(a.client_ca, "/ca.pem");
  EXPECT_EQ(a.verify_client, "on");
  EXPECT_EQ(a.verify_depth, 1);
  EXPECT_EQ(a.client_crl, "/crl0.pem");
  EXPECT_TRUE(config.sites[0].locations.at(0).require_client_cert);
  const TlsConfig& b = config.sites[1].tls;
  EXPECT_EQ(b.verify_client, "optional");
  EXPECT_EQ(b.client_crl, "/crl.pem");
  EXPECT_EQ(b.verify_depth, 2);
  EXPECT_TRUE(config.sites[1].locations.at(0).require_client_cert);
  EXPECT_FALSE(config.sites[1].locations.at(1).require_client_cert);
  EXPECT_EQ(config.sites[2].tls.verify_client, "off");
  EXPECT_FALSE(config.sites[2].locations.at(0).require_client_cert);
  // Its own CAs: not [tls]'s revocation lists (another CA's), [tls]'s "on".
  const TlsConfig& d = config.sites[3].tls;
  EXPECT_EQ(d.client_ca, "/d.pem");
  EXPECT_EQ(d.client_crl, "");
  EXPECT_EQ(d.verify_client, "on");
  EXPECT_NE(error("[tls]\nverify_client = \"on\"\n").find("tern.toml:2: tls.client_ca: required"),
            std::string::npos);
  EXPECT_NE(error("[tls]\nclient_crl = \"/crl.pem\"\n").find("tls.client_ca: required with client_crl"),
            std::string::npos);
  EXPECT_NE(error("[tls]\nclient_ca = \"/ca.pem\"\nverify_client = \"yes\"\n").find("tls.verify_client: expected"),
            std::string::npos);
  EXPECT_NE(error("[tls]\nclient_ca = \"/ca.pem\"\nverify_depth = 0\n").find("tls.verify_depth"),
            std::string::npos);
  EXPECT_NE(error("[[server]]\n[server.tls]\nclient_ca = \"/ca.pem\"\n")
                .find("server[0].tls.verify_client: the site asks for client certificates in its TLS handshake"),
            std::string::npos);
  EXPECT_NE(error("[[server]]\n[[server.location]]\nprefix = \"/\"\nrequire_client_cert = true\n")
                .find("server[0].location.require_client_cert: the site asks for no client certificate"),
            std::string::npos);
  EXPECT_NE(error("[[server]]\n[[server.location]]\nprefix = \"/\"\n"
                  "proxy = { pass = \"http://127.0.0.1:1\", set_headers = { X-DN = \"$ssl_client_dn\" } }\n")
                .find("set_headers.X-DN: \"$ssl_client_dn\": expected $ssl_client_s_dn"),
            std::string::npos);
}

// One table names what only a restart applies and keeps its running value.
TEST_F(ConfigFileTest, AReloadKeepsAndNamesWhatOnlyARestartApplies) {
  const Config running = load("workers = 2\nio = \"epoll\"\nlisten = [\"127.0.0.1:8080\", \"127.0.0.1:8081\"]\n");
  Config fresh = load("workers = 3\nio = \"io_uring\"\nresolve_interval = \"5s\"\nresolver = [\"10.0.0.2\"]\n"
                      "listen = [\"127.0.0.1:8080\", \"127.0.0.1:8081 h2c\"]\n[http2]\nenabled = false\n"
                      "[timeouts]\nheader = \"3s\"\n");
  const std::vector<std::string> keys = keep_restart_settings(running, fresh);
  EXPECT_EQ(keys, (std::vector<std::string>{"workers", "io", "[http2]", "resolver", "resolve_interval",
                                            "listen ... h2c"}));
  EXPECT_EQ(fresh.workers, running.workers);
  EXPECT_EQ(fresh.io, running.io);
  EXPECT_EQ(fresh.http2, running.http2);
  EXPECT_EQ(fresh.resolver, running.resolver);
  EXPECT_EQ(fresh.resolve_interval, running.resolve_interval);
  EXPECT_EQ(fresh.limits.header_timeout, std::chrono::seconds(3));  // a reload applies this one
  Config same = running;
  EXPECT_TRUE(keep_restart_settings(running, same).empty());
}

TEST_F(ConfigFileTest, Http2TableKeepsItsWindowsWithinTheProtocol) {
  const Config config = load("[http2]\nmax_concurrent_streams = 64\nstream_window = \"1MiB\"\n"
                             "connection_window = \"16MiB\"\n");
  EXPECT_TRUE(config.http2.enabled);
  EXPECT_EQ(config.http2.max_concurrent_streams, 64u);
  EXPECT_EQ(config.http2.stream_window, 1u << 20);
  EXPECT_EQ(config.http2.connection_window, 16u << 20);
  EXPECT_FALSE(load("[http2]\nenabled = false\n").http2.enabled);
  EXPECT_THROW(load("[http2]\nstream_window = \"2GiB\"\n"), ConfigError);
  EXPECT_THROW(load("[http2]\nconnection_window = 1000\n"), ConfigError);
  EXPECT_THROW(load("[http2]\nmax_concurrent_streams = 0\n"), ConfigError);
  EXPECT_THROW(load("[http2]\nwindows = 1\n"), ConfigError);
}

}  // namespace
}  // namespace tern::server
