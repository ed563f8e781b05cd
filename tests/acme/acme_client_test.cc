// AcmeClient against a real ACME CA: Pebble (Debian `pebble`, or the
// binary $TERN_PEBBLE names), started by each test on free ports with a
// certificate for "localhost" that the client trusts. Pebble is told to
// take every challenge as passed (PEBBLE_VA_ALWAYS_VALID): answering them
// is the server's part, tested with tern itself; here the conversation is:
// the account, an order, its authorizations, finalization, the
// certificate, and the CA's refusals as Problems. Pebble refuses 5% of
// nonces by default, which the client must ride over.
#include "acme/acme_client.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "acme/certificates.h"
#include "support/child_process.h"
#include "support/free_port.h"
#include "support/temp_dir.h"

namespace tern::acme {
namespace {

using testing::free_port;

std::string pebble_binary() {
  if (const char* path = std::getenv("TERN_PEBBLE"); path != nullptr && *path != '\0') return path;
  return std::filesystem::exists("/usr/bin/pebble") ? "/usr/bin/pebble" : "";
}

// One Pebble, its listener's certificate in `dir`, the environment given,
// `binding` its externalAccountBindingRequired (with one MAC key, kMacKey).
constexpr const char* kMacKey = "zWNDZM6eQGHWpSRTPal5eIUYFTu7EajVIoguysqZ9wG44nMEtx3MUAsUDkMTQ12W";

class Pebble {
 public:
  Pebble(const std::string& dir, const std::vector<std::string>& env, bool binding = false)
      : dir_(dir), port_(free_port()) {
    const PemPair pair = make_self_signed({"localhost"}, std::chrono::hours(1));
    std::ofstream(dir + "/pebble.pem") << pair.cert;
    std::ofstream(dir + "/pebble.key") << pair.key;
    std::ofstream(dir + "/pebble.json")
        << R"({"pebble": {"listenAddress": "127.0.0.1:)" << port_ << R"(", "managementListenAddress": "127.0.0.1:)"
        << free_port() << R"(", "certificate": ")" << dir << R"(/pebble.pem", "privateKey": ")" << dir
        << R"(/pebble.key", "httpPort": 5002, "tlsPort": 5001, "ocspResponderURL": "",)"
        << R"( "externalAccountBindingRequired": )" << (binding ? "true" : "false")
        << R"(, "externalAccountMACKeys": {"kid-1": ")" << kMacKey << R"("}}})";
    // `env` holds for the child only: set around the fork.
    for (const std::string& e : env) ::putenv(const_cast<char*>(e.c_str()));
    child_ = std::make_unique<testing::ChildProcess>(
        std::vector<std::string>{pebble_binary(), "-config", dir + "/pebble.json"}, 4096, dir + "/pebble.log");
    for (const std::string& e : env) ::unsetenv(e.substr(0, e.find('=')).c_str());
    // Up when its listener answers.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < deadline) {
      const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in address{};
      address.sin_family = AF_INET;
      address.sin_port = htons(static_cast<uint16_t>(port_));
      address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      const bool up = ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
      ::close(fd);
      if (up) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ADD_FAILURE() << "pebble did not start; its log: " << dir + "/pebble.log";
  }

  std::string directory() const { return "https://localhost:" + std::to_string(port_) + "/dir"; }
  std::string root() const { return dir_ + "/pebble.pem"; }

 private:
  std::string dir_;
  int port_;
  std::unique_ptr<testing::ChildProcess> child_;
};

class AcmeClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (pebble_binary().empty()) GTEST_SKIP() << "pebble is not installed (./scripts/test installs it)";
  }
  AcmeClient::Deadline soon() const { return std::chrono::steady_clock::now() + std::chrono::seconds(30); }

  testing::TempDir dir_;
};

TEST_F(AcmeClientTest, ObtainsACertificateForItsNames) {
  Pebble pebble(dir_.path(), {"PEBBLE_VA_ALWAYS_VALID=1", "PEBBLE_VA_NOSLEEP=1"});
  HttpsClient https({.ca_root = pebble.root()});
  const AccountKey key = AccountKey::generate();
  AcmeClient ca(&https, pebble.directory(), &key);
  EXPECT_FALSE(ca.directory().new_order.empty());
  const std::string account = ca.account({"mailto:ops@tern.test"}, true, nullptr);
  EXPECT_TRUE(account.starts_with("https://localhost:")) << account;
  // The same key finds the same account.
  AcmeClient again(&https, pebble.directory(), &key);
  EXPECT_EQ(again.account({}, true, nullptr), account);

  const std::vector<std::string> names = {"tern.test", "www.tern.test"};
  AcmeClient::Order order = ca.new_order(names, "");
  EXPECT_EQ(order.status, "pending");
  ASSERT_EQ(order.authorizations.size(), 2u);
  for (const std::string& url : order.authorizations) {
    const AcmeClient::Authorization authz = ca.authorization(url);
    EXPECT_EQ(authz.status, "pending");
    const AcmeClient::Challenge* http = authz.challenge("http-01");
    ASSERT_NE(http, nullptr);
    EXPECT_NE(authz.challenge("tls-alpn-01"), nullptr);
    EXPECT_EQ(http->token.size(), 43u);  // 32 random bytes, base64url
    ca.respond(http->url);
    EXPECT_EQ(ca.wait_for_authorization(url, soon()).status, "valid");
  }
  const SigningRequest request = make_signing_request(names);
  // The order as new_order left it (pending): finalize asks until it is ready.
  order = ca.finalize(order, request.der, soon());
  EXPECT_EQ(order.status, "valid");
  const std::string chain = ca.certificate(order.certificate);
  const CertificateFacts facts = read_certificate(chain);
  EXPECT_EQ(facts.names.size(), 2u);
  EXPECT_NE(std::find(facts.names.begin(), facts.names.end(), "www.tern.test"), facts.names.end());
  EXPECT_LT(facts.not_before, facts.not_after);
  EXPECT_FALSE(facts.renewal_id.empty());  // Pebble's intermediate is named
  EXPECT_FALSE(facts.self_signed);
  // Renewal information, where the CA has it.
  const std::optional<AcmeClient::RenewalWindow> window = ca.renewal_window(facts.renewal_id);
  if (ca.directory().renewal_info.empty()) {
    EXPECT_FALSE(window.has_value());
  } else {
    ASSERT_TRUE(window.has_value());
    EXPECT_LE(window->start, window->end);
  }
}

TEST_F(AcmeClientTest, TheCasRefusalsAreProblems) {
  Pebble pebble(dir_.path(), {"PEBBLE_VA_ALWAYS_VALID=1", "PEBBLE_VA_NOSLEEP=1"});
  HttpsClient https({.ca_root = pebble.root()});
  const AccountKey key = AccountKey::generate();
  AcmeClient ca(&https, pebble.directory(), &key);
  // No account for a key the CA has never seen, without agreeing to the terms.
  try {
    ca.new_order({"tern.test"}, "");
    FAIL() << "an order without an account was taken";
  } catch (const Problem& p) {
    EXPECT_GE(p.status(), 400);
    EXPECT_FALSE(p.type().empty());
  }
  ca.account({}, true, nullptr);
  try {
    ca.new_order({"*.*.tern.test"}, "");
    FAIL() << "a name with two wildcards was taken";
  } catch (const Problem& p) {
    EXPECT_EQ(p.status(), 400);
    EXPECT_TRUE(p.is("rejectedIdentifier") || p.is("malformed")) << p.type();
  }
}

TEST_F(AcmeClientTest, ACaThatNeedsAnExternalAccountGetsItsBinding) {
  Pebble pebble(dir_.path(), {"PEBBLE_WFE_NONCEREJECT=0"}, /*binding=*/true);
  HttpsClient https({.ca_root = pebble.root()});
  const AccountKey key = AccountKey::generate();
  AcmeClient ca(&https, pebble.directory(), &key);
  EXPECT_TRUE(ca.directory().external_account_required);
  try {
    ca.account({}, true, nullptr);
    FAIL() << "an account without a binding was made";
  } catch (const Problem& p) {
    EXPECT_TRUE(p.is("externalAccountRequired")) << p.type();
  }
  const ExternalAccount wrong{"kid-1", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"};
  EXPECT_THROW(ca.account({}, true, &wrong), Problem);
  const ExternalAccount binding{"kid-1", kMacKey};
  EXPECT_TRUE(ca.account({"mailto:ops@tern.test"}, true, &binding).starts_with("https://"));
}

TEST_F(AcmeClientTest, GivesUpOnNoncesAfterTwoRetries) {
  // Every nonce refused: badNonce, retried twice with the nonce it brought.
  Pebble pebble(dir_.path(), {"PEBBLE_WFE_NONCEREJECT=100"});
  HttpsClient https({.ca_root = pebble.root()});
  const AccountKey key = AccountKey::generate();
  AcmeClient ca(&https, pebble.directory(), &key);
  try {
    ca.account({}, true, nullptr);
    FAIL() << "an account was made with refused nonces";
  } catch (const Problem& p) {
    EXPECT_TRUE(p.is("badNonce")) << p.type();
  }
}

TEST_F(AcmeClientTest, AnUnreachableCaIsAFailure) {
  HttpsClient https({.ca_root = "", .timeout = std::chrono::milliseconds(2000)});
  const AccountKey key = AccountKey::generate();
  AcmeClient ca(&https, "https://127.0.0.1:" + std::to_string(free_port()) + "/dir", &key);
  EXPECT_THROW(ca.directory(), HttpsClient::Failure);
}

}  // namespace
}  // namespace tern::acme
