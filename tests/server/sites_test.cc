// Sites: which site a Host selects and which location a path falls in,
// as nginx's server_name and location documentation describe them.
#include "server/sites.h"

#include <gtest/gtest.h>

#include <fstream>

#include "server/config/config.h"
#include "support/temp_dir.h"

namespace tern::server {
namespace {

class SitesTest : public ::testing::Test {
 protected:
  // Loads `toml` (the roots are this test's directory) and compiles it.
  const Sites& load(const std::string& toml) {
    const std::string path = dir_.at("tern.toml");
    std::ofstream(path) << toml << "\n[static]\nroot = \"" << dir_.path() << "\"\n";
    config_ = load_config(path);
    sites_ = std::make_unique<Sites>(config_);
    return *sites_;
  }

  // The first name of the site `host` selects ("" for a site without names).
  std::string site_for(std::string_view host) {
    const Site& site = sites_->select(host);
    return site.config().names.empty() ? "" : site.config().names.front();
  }

  // The pattern of the location `path` falls in ("-" for none).
  std::string location_for(std::string_view path, Captures* captures = nullptr) {
    Captures local;
    const Location* l = sites_->sites().front()->match(path, captures ? captures : &local);
    return l == nullptr ? "-" : l->config.pattern;
  }

  testing::TempDir dir_;
  Config config_;
  std::unique_ptr<Sites> sites_;
};

TEST_F(SitesTest, TopLevelKeysMakeOneImplicitSiteForEveryName) {
  const Sites& sites = load("");
  ASSERT_EQ(sites.sites().size(), 1u);
  EXPECT_TRUE(sites.sites().front()->config().implicit);
  EXPECT_EQ(&sites.select("anything.example"), sites.sites().front().get());
  EXPECT_EQ(location_for("/a/b.html"), "/");
}

TEST_F(SitesTest, HostSelectsTheSiteAsNginxServerNameDoes) {
  load(R"(
[[server]]
names = ["fallback.test"]
[[server]]
names = ["example.com", "www.example.com"]
[[server]]
names = [".example.org"]
[[server]]
names = ["*.example.net"]
[[server]]
names = ["*.a.example.net"]
[[server]]
names = ["mail.*"]
[[server]]
names = ["mail.example.*"]
[[server]]
names = ["~^(?<user>[a-z]+)\\.users\\.test$"]
[[server]]
names = ["[::1]"]
[[server]]
names = ["default.test"]
default = true
)");
  struct Row {
    const char* host;
    const char* site;
  } rows[] = {
      {"example.com", "example.com"},
      {"EXAMPLE.com", "example.com"},          // case
      {"example.com:8080", "example.com"},     // port
      {"example.com.", "example.com"},         // trailing dot
      {"www.example.com.:80", "example.com"},
      {"example.org", ".example.org"},         // ".name" is the name...
      {"deep.sub.example.org", ".example.org"},  // ...and every subdomain
      {"x.example.net", "*.example.net"},
      {"x.a.example.net", "*.a.example.net"},  // the longest leading wildcard
      {"example.net", "default.test"},         // "*.example.net" needs a label
      {"mail.foo.io", "mail.*"},
      {"mail.example.io", "mail.example.*"},   // the longest trailing wildcard
      {"bob.users.test", "~^(?<user>[a-z]+)\\.users\\.test$"},
      {"Bob.Users.Test", "~^(?<user>[a-z]+)\\.users\\.test$"},
      {"[::1]:8080", "[::1]"},                 // an IPv6 literal keeps its brackets
      {"[::1]", "[::1]"},
      {"unknown.test", "default.test"},
      {"", "default.test"},                    // HTTP/1.0 without Host
      {"[::1", "default.test"},                // malformed
  };
  for (const Row& row : rows) EXPECT_EQ(site_for(row.host), row.site) << row.host;
}

TEST_F(SitesTest, EachListeningAddressHasItsOwnSites) {
  const Sites& sites = load(R"(
listen = ["127.0.0.1:8001"]
[[server]]
names = ["a.test"]
[[server]]
names = ["a.test"]
listen = ["127.0.0.1:8002"]
[[server]]
names = ["c.test"]
listen = ["0.0.0.0:8003", "127.0.0.1:8002"]
default = true
)");
  auto at = [](const char* text) { return net::InetAddress::parse(text).value(); };
  auto site = [&sites](std::string_view host, const net::InetAddress& local) {
    const Site& s = sites.select(host, local);
    for (size_t i = 0; i < sites.sites().size(); ++i) {
      if (sites.sites()[i].get() == &s) return static_cast<int>(i);
    }
    return -1;
  };
  EXPECT_EQ(site("a.test", at("127.0.0.1:8001")), 0);
  EXPECT_EQ(site("a.test", at("127.0.0.1:8002")), 1);   // the same name, another address
  EXPECT_EQ(site("other", at("127.0.0.1:8002")), 2);    // that address's default
  EXPECT_EQ(site("other", at("127.0.0.1:8001")), 0);    // the only site there
  EXPECT_EQ(site("a.test", at("10.1.2.3:8003")), 2);    // by the wildcard address
  EXPECT_EQ(listen_addresses(config_).size(), 3u);
}

TEST_F(SitesTest, ASiteWithoutLocationsServesItsRoot) {
  load("[[server]]\nnames = [\"bare.test\"]\n");
  EXPECT_EQ(location_for("/any/path"), "/");
}

TEST_F(SitesTest, WithoutADefaultTheFirstSiteAnswersUnknownNames) {
  load(R"(
[[server]]
names = ["first.test"]
[[server]]
names = ["second.test"]
)");
  EXPECT_EQ(site_for("nobody.test"), "first.test");
  EXPECT_EQ(site_for("second.test"), "second.test");
}

// nginx's documentation of "location", as a table.
TEST_F(SitesTest, LocationPrecedenceIsNginxs) {
  load(R"(
[[server]]
[[server.location]]
exact = "/"
[[server.location]]
prefix = "/"
[[server.location]]
prefix = "/documents/"
[[server.location]]
prefix = "/images/"
skip_regex = true
[[server.location]]
iregex = '\.(gif|jpg|jpeg)$'
[[server.location]]
regex = '^/documents/(\w+)\.png$'
[[server.location]]
regex = '\.png$'
[[server.location]]
exact = "/exact"
)");
  struct Row {
    const char* path;
    const char* location;
  } rows[] = {
      {"/", "/"},                                           // the exact "/" (A)
      {"/index.html", "/"},                                 // prefix "/" (B)
      {"/documents/document.html", "/documents/"},          // C
      {"/images/1.gif", "/images/"},                        // D: skip_regex
      {"/documents/1.jpg", "\\.(gif|jpg|jpeg)$"},           // E: regex beats prefix
      {"/documents/1.JPG", "\\.(gif|jpg|jpeg)$"},           // iregex: any case
      {"/documents/a.png", "^/documents/(\\w+)\\.png$"},    // the first regex in file order
      {"/other/a.png", "\\.png$"},
      {"/other/a.PNG", "/"},                                // regex is case-sensitive
      {"/exact", "/exact"},
      {"/exact/", "/"},                                     // exact means exact
      {"/exactly", "/"},
  };
  for (const Row& row : rows) EXPECT_EQ(location_for(row.path), row.location) << row.path;
}

TEST_F(SitesTest, ARegexLocationCapturesItsGroups) {
  load(R"(
[[server]]
[[server.location]]
regex = '^/user/(\w+)/(\d+)$'
)");
  Captures captures;
  ASSERT_EQ(location_for("/user/ann/42", &captures), "^/user/(\\w+)/(\\d+)$");
  EXPECT_EQ(captures.get(0), "/user/ann/42");
  EXPECT_EQ(captures.get(1), "ann");
  EXPECT_EQ(captures.get(2), "42");
  EXPECT_EQ(captures.get(3), "");
  EXPECT_EQ(location_for("/user/ann/x"), "-");  // no location: 404
}

TEST_F(SitesTest, LocationsWithTheSameRootShareAStore) {
  const Sites& sites = load(R"(
[[server]]
[[server.location]]
prefix = "/"
[[server.location]]
prefix = "/a/"
[[server.location]]
prefix = "/b/"
index = ["home.html"]
[[server.location]]
prefix = "/c/"
alias = "/tmp"
)");
  const auto& locations = sites.sites().front()->locations();
  EXPECT_EQ(locations[0].store, locations[1].store);
  EXPECT_NE(locations[0].store, locations[2].store);  // another index
  EXPECT_NE(locations[0].store, locations[3].store);  // another directory
  EXPECT_EQ(sites.stores()[locations[3].store].root, "/tmp");
  EXPECT_TRUE(locations[3].alias);
}

TEST_F(SitesTest, HeadersAndExpiresAreFormattedOnce) {
  const Sites& sites = load(R"(
[[server]]
[[server.location]]
prefix = "/"
expires = "1y"
headers = { X-Frame-Options = "DENY" }
headers_always = { X-Served-By = "tern" }
)");
  const Location& l = sites.sites().front()->locations().front();
  EXPECT_EQ(l.fields.always.text(), "X-Served-By: tern\r\n");
  EXPECT_EQ(l.fields.success.text(), "X-Frame-Options: DENY\r\nCache-Control: max-age=31536000\r\n");
  ASSERT_EQ(l.fields.success.size(), 2u);
  EXPECT_EQ(l.fields.success.name(1), "Cache-Control");
  EXPECT_EQ(l.fields.success.value(1), "max-age=31536000");
}

TEST_F(SitesTest, ARootThatCannotBeOpenedIsAnError) {
  const std::string path = dir_.at("tern.toml");
  std::ofstream(path) << "[[server]]\nroot = \"" << dir_.at("missing") << "\"\n[[server.location]]\nprefix = \"/\"\n";
  Config config = load_config(path);
  EXPECT_THROW(Sites sites(config), std::runtime_error);
}

TEST(NormalizeHostTest, LowerCaseWithoutPortOrTrailingDot) {
  char buffer[256];
  EXPECT_EQ(normalize_host("WWW.Example.COM:443", buffer), "www.example.com");
  EXPECT_EQ(normalize_host("a.b.", buffer), "a.b");
  EXPECT_EQ(normalize_host("[2001:DB8::1]:80", buffer), "[2001:db8::1]");
  EXPECT_EQ(normalize_host("", buffer), std::nullopt);
  EXPECT_EQ(normalize_host(":80", buffer), std::nullopt);
  EXPECT_EQ(normalize_host(std::string(300, 'a'), buffer), std::nullopt);
}

TEST(RegexTest, CompilesSearchesAndReportsErrors) {
  Regex re("\\.(png|jpg)$", Regex::kCaseless);
  Captures captures;
  EXPECT_TRUE(re.search("/img/A.PNG", &captures));
  EXPECT_EQ(captures.get(1), "PNG");
  EXPECT_FALSE(re.search("/img/a.gif"));
  EXPECT_TRUE(Regex("caf\xc3\xa9").search("/caf\xc3\xa9/menu"));  // UTF-8 paths
  EXPECT_FALSE(Regex("x").search("\xff\xfe"));                    // invalid UTF-8 is no match, no error
  try {
    Regex bad("(unclosed");
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("offset"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tern::server
