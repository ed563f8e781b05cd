// UsersApp end to end without a socket: request bytes through the real
// parser into the app's exchange handlers (route()), the hashing and the
// SQLite store on a one-thread TaskPool, the answer posted back to the
// test's loop and read back as response bytes. Argon2id runs at its
// cheapest settings so that the tests stay fast.
#include "auth/users_app.h"

#include <sodium.h>

#include <gtest/gtest.h>

#include <chrono>
#include <ctime>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "auth/session_signer.h"
#include "auth/user_store.h"
#include "base/task_pool.h"
#include "net/event_loop.h"
#include "support/exchange_harness.h"
#include "support/temp_dir.h"

namespace tern::auth {
namespace {

using testing::MemoryExchange;
using testing::ParsedResponse;
using testing::TempDir;

constexpr std::string_view kSecret = "a secret of at least thirty-two characters";

std::string credentials(std::string_view username, std::string_view password) {
  return "{\"username\":\"" + std::string(username) + "\",\"password\":\"" + std::string(password) +
         "\"}";
}

// A POST of `body` as `type`, with any extra fields ("Name: value\r\n" each).
std::string post(std::string_view path, std::string_view body,
                 std::string_view type = "application/json", std::string_view fields = {}) {
  return "POST " + std::string(path) + " HTTP/1.1\r\nHost: a\r\nContent-Type: " + std::string(type) +
         "\r\n" + std::string(fields) + "Content-Length: " + std::to_string(body.size()) +
         "\r\n\r\n" + std::string(body);
}

std::string get(std::string_view path, std::string_view fields = {}) {
  return "GET " + std::string(path) + " HTTP/1.1\r\nHost: a\r\n" + std::string(fields) + "\r\n";
}

// "Cookie: name=value\r\n" from a Set-Cookie value (its attributes dropped).
std::string cookie_field(std::string_view set_cookie) {
  return "Cookie: " + std::string(set_cookie.substr(0, set_cookie.find(';'))) + "\r\n";
}

std::string name_body(std::string_view username) {
  return "{\"username\":\"" + std::string(username) + "\"}\n";
}

class UsersAppTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { ASSERT_GE(sodium_init(), 0); }

  void SetUp() override {
    ASSERT_TRUE(dir_.ok());
    start(cheap());
  }
  void TearDown() override {
    exchanges_.clear();
    // Queued and running tasks use the app: they finish before it goes.
    tasks_.reset();
    app_.reset();
  }

  static UsersOptions cheap() {
    UsersOptions options;
    options.secret = std::string(kSecret);
    options.password_ops = crypto_pwhash_OPSLIMIT_MIN;
    options.password_memory = crypto_pwhash_MEMLIMIT_MIN;
    return options;
  }

  // A new app, on a new database, with `options`.
  void start(const UsersOptions& options) {
    exchanges_.clear();
    tasks_.reset();
    app_.reset();
    ++generation_;
    auto store = open_user_store("sqlite:" + dir_.at("users" + std::to_string(generation_) + ".db"), 1);
    ASSERT_TRUE(store) << store.error().message();
    tasks_ = std::make_unique<TaskPool>("task", 1, 64);
    app_ = std::make_unique<UsersApp>(std::move(store).value(), options, tasks_.get());
  }

  // `raw` through the parser and the app's handler for it; waits for the
  // answer (which comes back from the task thread) and returns it.
  ParsedResponse ask(const std::string& raw, const char* peer = "127.0.0.1", size_t piece = 0) {
    MemoryExchange& ex = begin(raw, peer, piece);
    EXPECT_TRUE(ex.run()) << "no answer to " << raw;
    EXPECT_TRUE(ex.finished());
    ParsedResponse r = ex.response();
    // Every answer of the API, whatever it says.
    EXPECT_EQ(r.header("Cache-Control"), "no-store") << r.head;
    return r;
  }

  // Starts `raw` on the app without waiting. The exchange lives until the
  // test ends.
  MemoryExchange& begin(const std::string& raw, const char* peer = "127.0.0.1", size_t piece = 0) {
    exchanges_.push_back(std::make_unique<MemoryExchange>(&loop_, raw, peer));
    MemoryExchange& ex = *exchanges_.back();
    EXPECT_TRUE(ex.parsed()) << raw;
    const http::ExchangeHandler* handler = ex.parsed() ? app_->route(ex.request()) : nullptr;
    EXPECT_NE(handler, nullptr) << raw;
    if (piece != 0) ex.set_body_piece(piece);
    if (handler != nullptr) ex.start(*handler);
    return ex;
  }

  // Registers and logs in; returns the Cookie field that carries the session.
  std::string logged_in(std::string_view username, std::string_view password) {
    EXPECT_EQ(ask(post("/api/register", credentials(username, password))).status, 201);
    ParsedResponse login = ask(post("/api/login", credentials(username, password)));
    EXPECT_EQ(login.status, 200);
    return cookie_field(login.header("Set-Cookie"));
  }

  net::EventLoop loop_;
  TempDir dir_;
  int generation_ = 0;
  std::unique_ptr<UsersApp> app_;
  std::unique_ptr<TaskPool> tasks_;
  std::vector<std::unique_ptr<MemoryExchange>> exchanges_;
};

TEST_F(UsersAppTest, RoutesOnlyItsOwnPaths) {
  auto route = [&](const std::string& raw) {
    MemoryExchange ex(&loop_, raw);
    EXPECT_TRUE(ex.parsed()) << raw;
    return app_->route(ex.request()) != nullptr;
  };
  EXPECT_TRUE(route(get("/api/me")));
  EXPECT_TRUE(route(get("/api/me?x=1")));  // by path, whatever the query
  EXPECT_TRUE(route(post("/api/register", "{}")));
  EXPECT_TRUE(route(post("/api/login", "{}")));
  EXPECT_TRUE(route(post("/api/logout", "")));
  EXPECT_FALSE(route(get("/api/other")));
  EXPECT_FALSE(route(get("/index.html")));
  EXPECT_FALSE(route(get("/apiary/me")));
}

// ---- Registering ----

TEST_F(UsersAppTest, RegisterAnswers201WithTheName) {
  ParsedResponse r = ask(post("/api/register", credentials("alice", "correct horse")));
  EXPECT_EQ(r.status, 201);
  EXPECT_EQ(r.header("Content-Type"), "application/json");
  EXPECT_EQ(r.body, name_body("alice"));
  // Registering does not log in.
  EXPECT_EQ(r.header("Set-Cookie"), "");
}

TEST_F(UsersAppTest, RegisteringATakenNameIs409) {
  ASSERT_EQ(ask(post("/api/register", credentials("alice", "correct horse"))).status, 201);
  ParsedResponse again = ask(post("/api/register", credentials("alice", "another one")));
  EXPECT_EQ(again.status, 409);
  EXPECT_NE(again.body.find("\"error\""), std::string::npos) << again.body;
  // Names are unique without regard to case.
  EXPECT_EQ(ask(post("/api/register", credentials("ALICE", "another one"))).status, 409);
}

TEST_F(UsersAppTest, RegisterWithoutJsonIs415) {
  // What a cross-site form could send: refused before anything is read.
  ParsedResponse r = ask(post("/api/register", "username=alice&password=correct+horse",
                              "application/x-www-form-urlencoded"));
  EXPECT_EQ(r.status, 415);
  EXPECT_EQ(r.header("Content-Type"), "application/json");
  EXPECT_EQ(ask(post("/api/register", credentials("alice", "correct horse"), "text/plain")).status,
            415);
  // With a charset it is still JSON.
  EXPECT_EQ(ask(post("/api/register", credentials("alice", "correct horse"),
                     "application/json; charset=utf-8"))
                .status,
            201);
}

TEST_F(UsersAppTest, BadCredentialsAre400) {
  EXPECT_EQ(ask(post("/api/register", "{\"username\":")).status, 400);    // not JSON
  EXPECT_EQ(ask(post("/api/register", "[1,2]")).status, 400);             // not an object
  EXPECT_EQ(ask(post("/api/register", "{\"username\":\"alice\"}")).status, 400);  // no password
  EXPECT_EQ(ask(post("/api/register", credentials("al", "correct horse"))).status, 400);  // short
  EXPECT_EQ(ask(post("/api/register", credentials("a l i c e", "correct horse"))).status, 400);
  EXPECT_EQ(ask(post("/api/register", credentials("alice", "short"))).status, 400);
  // None of them made a user.
  EXPECT_EQ(ask(post("/api/register", credentials("alice", "correct horse"))).status, 201);
}

TEST_F(UsersAppTest, BodyInSmallPiecesIsGathered) {
  ParsedResponse r =
      ask(post("/api/register", credentials("alice", "correct horse")), "127.0.0.1", 3);
  EXPECT_EQ(r.status, 201);
  EXPECT_EQ(r.body, name_body("alice"));
}

TEST_F(UsersAppTest, OversizedBodyIs413) {
  const std::string padding(5000, ' ');
  ParsedResponse r = ask(post("/api/register", credentials("alice", "correct horse") + padding));
  EXPECT_EQ(r.status, 413);
}

TEST_F(UsersAppTest, WrongMethodIs405) {
  ParsedResponse r = ask(get("/api/login"));
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(r.header("Allow"), "POST");
  ParsedResponse me = ask(post("/api/me", "{}"));
  EXPECT_EQ(me.status, 405);
  EXPECT_EQ(me.header("Allow"), "GET, HEAD");
}

TEST_F(UsersAppTest, RegistrationsPerAddressAreLimited) {
  UsersOptions options = cheap();
  options.register_attempts = 2;
  start(options);
  EXPECT_EQ(ask(post("/api/register", credentials("user1", "correct horse"))).status, 201);
  EXPECT_EQ(ask(post("/api/register", credentials("user2", "correct horse"))).status, 201);
  ParsedResponse third = ask(post("/api/register", credentials("user3", "correct horse")));
  EXPECT_EQ(third.status, 429);
  EXPECT_FALSE(third.header("Retry-After").empty());
  // Another address has its own count.
  EXPECT_EQ(ask(post("/api/register", credentials("user3", "correct horse")), "10.0.0.7").status,
            201);
}

// ---- Logging in ----

TEST_F(UsersAppTest, LoginSetsAnHttpOnlySessionCookie) {
  ASSERT_EQ(ask(post("/api/register", credentials("alice", "correct horse"))).status, 201);
  ParsedResponse r = ask(post("/api/login", credentials("alice", "correct horse")));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, name_body("alice"));
  const std::string set = r.header("Set-Cookie");
  EXPECT_TRUE(set.starts_with(std::string(SessionSigner::kCookieName) + "=")) << set;
  EXPECT_GT(set.find(';'), SessionSigner::kCookieName.size() + 1) << "an empty session value";
  EXPECT_NE(set.find("; HttpOnly"), std::string::npos) << set;
  EXPECT_NE(set.find("; SameSite=Lax"), std::string::npos) << set;
  EXPECT_NE(set.find("; Path=/"), std::string::npos) << set;
  EXPECT_NE(set.find("; Max-Age=604800"), std::string::npos) << set;  // the default week
}

TEST_F(UsersAppTest, LoginAnswersTheNameAsRegistered) {
  ASSERT_EQ(ask(post("/api/register", credentials("Alice", "correct horse"))).status, 201);
  ParsedResponse r = ask(post("/api/login", credentials("alice", "correct horse")));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, name_body("Alice"));
}

TEST_F(UsersAppTest, WrongPasswordIs401) {
  ASSERT_EQ(ask(post("/api/register", credentials("alice", "correct horse"))).status, 201);
  ParsedResponse wrong = ask(post("/api/login", credentials("alice", "battery staple")));
  EXPECT_EQ(wrong.status, 401);
  EXPECT_EQ(wrong.header("Set-Cookie"), "");
  // An unknown name gets the very same answer: nothing tells which names exist.
  ParsedResponse unknown = ask(post("/api/login", credentials("mallory", "battery staple")));
  EXPECT_EQ(unknown.status, 401);
  EXPECT_EQ(unknown.body, wrong.body);
}

TEST_F(UsersAppTest, AccountBacksOffAfterFailedLogins) {
  UsersOptions options = cheap();
  options.account_login_failures = 2;
  start(options);
  ASSERT_EQ(ask(post("/api/register", credentials("alice", "correct horse"))).status, 201);
  EXPECT_EQ(ask(post("/api/login", credentials("alice", "guess one"))).status, 401);
  EXPECT_EQ(ask(post("/api/login", credentials("alice", "guess two"))).status, 401);
  // Locked for the first back-off (30 s), even with the right password,
  // and from another address.
  ParsedResponse locked = ask(post("/api/login", credentials("ALICE", "correct horse")), "10.0.0.7");
  EXPECT_EQ(locked.status, 429);
  const std::string retry = locked.header("Retry-After");
  ASSERT_FALSE(retry.empty());
  EXPECT_GT(std::stoi(retry), 0);
  EXPECT_LE(std::stoi(retry), 30);
  EXPECT_EQ(locked.header("Set-Cookie"), "");
}

// ---- The session ----

TEST_F(UsersAppTest, MeWithTheCookieNamesTheUser) {
  const std::string cookie = logged_in("alice", "correct horse");
  ParsedResponse me = ask(get("/api/me", cookie));
  EXPECT_EQ(me.status, 200);
  EXPECT_EQ(me.header("Content-Type"), "application/json");
  EXPECT_EQ(me.body, name_body("alice"));
  // Among other cookies, too.
  const std::string pair = cookie.substr(8, cookie.size() - 10);  // "Cookie: " ... "\r\n"
  EXPECT_EQ(ask(get("/api/me", "Cookie: theme=dark; " + pair + "; lang=en\r\n")).status, 200);
}

TEST_F(UsersAppTest, MeWithoutAValidCookieIs401) {
  const std::string cookie = logged_in("alice", "correct horse");
  EXPECT_EQ(ask(get("/api/me")).status, 401);
  EXPECT_EQ(ask(get("/api/me", "Cookie: theme=dark\r\n")).status, 401);
  // One byte of the signed part changed (the first of the encoded name).
  std::string tampered = cookie;
  char& first = tampered[std::string_view("Cookie: ").size() + SessionSigner::kCookieName.size() + 1];
  first = first == 'A' ? 'B' : 'A';
  EXPECT_EQ(ask(get("/api/me", tampered)).status, 401);
  // Signed with another secret.
  SessionSigner other("another secret of at least thirty-two chars", std::chrono::seconds(3600));
  const std::string forged = std::string(SessionSigner::kCookieName) + "=" +
                             other.sign("alice", 0, static_cast<int64_t>(::time(nullptr)));
  EXPECT_EQ(ask(get("/api/me", "Cookie: " + forged + "\r\n")).status, 401);
}

TEST_F(UsersAppTest, LogoutEndsTheSession) {
  const std::string cookie = logged_in("alice", "correct horse");
  ASSERT_EQ(ask(get("/api/me", cookie)).status, 200);

  ParsedResponse out = ask(post("/api/logout", "", "application/json", cookie));
  EXPECT_EQ(out.status, 204);
  EXPECT_EQ(out.body, "");
  const std::string clear = out.header("Set-Cookie");
  EXPECT_TRUE(clear.starts_with(std::string(SessionSigner::kCookieName) + "=;")) << clear;
  EXPECT_NE(clear.find("Max-Age=0"), std::string::npos) << clear;

  // The old cookie is still well signed, but its session has ended.
  EXPECT_EQ(ask(get("/api/me", cookie)).status, 401);
  // A new login starts a new session.
  ParsedResponse again = ask(post("/api/login", credentials("alice", "correct horse")));
  ASSERT_EQ(again.status, 200);
  EXPECT_EQ(ask(get("/api/me", cookie_field(again.header("Set-Cookie")))).status, 200);
  EXPECT_EQ(ask(get("/api/me", cookie)).status, 401);
}

TEST_F(UsersAppTest, LogoutWithoutJsonIs415) {
  const std::string cookie = logged_in("alice", "correct horse");
  EXPECT_EQ(ask(post("/api/logout", "", "application/x-www-form-urlencoded", cookie)).status, 415);
  // The session survived the attempt.
  EXPECT_EQ(ask(get("/api/me", cookie)).status, 200);
}

TEST_F(UsersAppTest, LogoutWithoutASessionClearsTheCookie) {
  ParsedResponse out = ask(post("/api/logout", ""));
  EXPECT_EQ(out.status, 204);
  EXPECT_NE(out.header("Set-Cookie").find("Max-Age=0"), std::string::npos);
}

// ---- The client going away ----

TEST_F(UsersAppTest, AnswerForAClientThatLeftIsDropped) {
  MemoryExchange& gone = begin(post("/api/register", credentials("alice", "correct horse")));
  gone.disconnect();
  // The one task thread takes requests in order: once the next answer is
  // here, the first one has come back and found no exchange.
  EXPECT_EQ(ask(post("/api/register", credentials("alice", "correct horse"))).status, 409);
  EXPECT_TRUE(gone.output().empty());
  EXPECT_FALSE(gone.finished());
}

}  // namespace
}  // namespace tern::auth
