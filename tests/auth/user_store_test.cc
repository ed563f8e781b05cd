// The user stores: SQLite in a temporary directory; the mysql:// URL parser;
// MariaDB behaviour that needs no server (unreachable, silent); and MariaDB
// itself when TERN_MARIADB_URL names a server that may be written to.
#include "auth/user_store.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sqlite3.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <barrier>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "auth/mysql_user_store.h"
#include "auth/sqlite_user_store.h"
#include "support/temp_dir.h"
#include "support/unprivileged.h"

namespace tern::auth {
namespace {

using namespace std::chrono_literals;
using Status = UserStore::Status;
using testing::TempDir;

// Strings that would change the meaning of SQL spliced together by hand.
const std::vector<std::string> kHostileNames = {
    "x' OR '1'='1", "a;DROP TABLE users;--", "\"quoted\"", "back\\slash", "ユーザー", "naïve😀",
};

std::unique_ptr<UserStore> open_or_fail(std::string_view url, size_t pool_size = 4) {
  auto store = open_user_store(url, pool_size);
  EXPECT_TRUE(store) << url << ": " << (store ? "" : store.error().message());
  return store ? std::move(store).value() : nullptr;
}

// Creates `count` users per thread from `threads` threads at once (names
// prefix + thread + index) and counts the answers.
struct Tally {
  std::atomic<int> ok{0}, taken{0}, other{0};
};
void create_concurrently(UserStore* store, int threads, int count, const std::string& prefix,
                         bool same_name, Tally* tally) {
  std::barrier start(threads);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      start.arrive_and_wait();
      for (int i = 0; i < count; ++i) {
        std::string name = same_name ? prefix + std::to_string(i)
                                     : prefix + std::to_string(t) + "_" + std::to_string(i);
        switch (store->create_user(name, "hash-" + name)) {
          case Status::kOk: ++tally->ok; break;
          case Status::kTaken: ++tally->taken; break;
          default: ++tally->other; break;
        }
      }
    });
  }
  for (auto& w : workers) w.join();
}

// ---- SQLite ----

class SqliteUserStoreTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(dir_.ok()); }
  std::string url() const { return "sqlite:" + db_path(); }
  std::string db_path() const { return dir_.at("data/users.db"); }

  // Runs one query with the sqlite3 API directly, beside the store, and
  // returns the first column of the first row.
  std::string query_directly(const char* sql) const {
    sqlite3* db = nullptr;
    std::string answer = "(error)";
    if (sqlite3_open_v2(db_path().c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
      sqlite3_stmt* stmt = nullptr;
      if (sqlite3_prepare_v2(db, sql, -1, &stmt, nullptr) == SQLITE_OK &&
          sqlite3_step(stmt) == SQLITE_ROW) {
        answer = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
      }
      sqlite3_finalize(stmt);
    }
    sqlite3_close(db);
    return answer;
  }

  TempDir dir_;
};

TEST_F(SqliteUserStoreTest, CreatedUserIsFound) {
  auto store = open_or_fail(url());
  ASSERT_TRUE(store);
  EXPECT_EQ(store->create_user("alice", "$argon2id$v=19$abc"), Status::kOk);
  UserStore::User user;
  ASSERT_EQ(store->find_user("alice", &user), Status::kOk);
  EXPECT_EQ(user.username, "alice");
  EXPECT_EQ(user.password_hash, "$argon2id$v=19$abc");
}

TEST_F(SqliteUserStoreTest, DuplicateUsernameIsTaken) {
  auto store = open_or_fail(url());
  ASSERT_TRUE(store);
  EXPECT_EQ(store->create_user("bob", "h1"), Status::kOk);
  EXPECT_EQ(store->create_user("bob", "h2"), Status::kTaken);
  UserStore::User user;
  ASSERT_EQ(store->find_user("bob", &user), Status::kOk);
  EXPECT_EQ(user.password_hash, "h1");
  EXPECT_EQ(store->create_user("Bob", "h3"), Status::kTaken) << "names are unique whatever the case";
  ASSERT_EQ(store->find_user("BOB", &user), Status::kOk);
  EXPECT_EQ(user.username, "bob") << "the name as registered";
}

TEST_F(SqliteUserStoreTest, EndingSessionsMovesTheGenerationOn) {
  auto store = open_or_fail(url());
  ASSERT_TRUE(store);
  ASSERT_EQ(store->create_user("Dana", "h"), Status::kOk);
  UserStore::User user;
  ASSERT_EQ(store->find_user("dana", &user), Status::kOk);
  const uint64_t first = user.session_generation;
  EXPECT_EQ(store->end_sessions("DANA"), Status::kOk);
  ASSERT_EQ(store->find_user("Dana", &user), Status::kOk);
  EXPECT_EQ(user.session_generation, first + 1);
  EXPECT_EQ(store->end_sessions("nobody"), Status::kNotFound);
}

TEST_F(SqliteUserStoreTest, ATableFromAnOlderVersionIsUpgraded) {
  // The users table as tern made it before sessions had generations and
  // before names were unique without regard to case.
  ASSERT_TRUE(std::filesystem::create_directories(dir_.at("data")));
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(db_path().c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db,
                         "CREATE TABLE users (id INTEGER PRIMARY KEY, username TEXT NOT NULL UNIQUE,"
                         " password_hash TEXT NOT NULL, created_at INTEGER NOT NULL);"
                         "INSERT INTO users (username, password_hash, created_at) VALUES ('old', 'h', 1);",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  auto store = open_or_fail(url());
  ASSERT_TRUE(store);
  UserStore::User user;
  ASSERT_EQ(store->find_user("OLD", &user), Status::kOk);
  EXPECT_EQ(user.session_generation, 0u);
  EXPECT_EQ(store->end_sessions("old"), Status::kOk);
  EXPECT_EQ(store->create_user("Old", "h2"), Status::kTaken);
}

TEST_F(SqliteUserStoreTest, UnknownUserIsNotFound) {
  auto store = open_or_fail(url());
  ASSERT_TRUE(store);
  UserStore::User user;
  EXPECT_EQ(store->find_user("nobody", &user), Status::kNotFound);
  EXPECT_EQ(store->find_user("", &user), Status::kNotFound);
}

TEST_F(SqliteUserStoreTest, EmptyValuesAreEmptyStringsNotNull) {
  auto store = open_or_fail(url());
  ASSERT_TRUE(store);
  EXPECT_EQ(store->create_user("", ""), Status::kOk);
  UserStore::User user{"x", "y"};
  ASSERT_EQ(store->find_user("", &user), Status::kOk);
  EXPECT_EQ(user.username, "");
  EXPECT_EQ(user.password_hash, "");
}

TEST_F(SqliteUserStoreTest, SqlLookingInputIsStoredVerbatim) {
  auto store = open_or_fail(url());
  ASSERT_TRUE(store);
  ASSERT_EQ(store->create_user("carol", "h"), Status::kOk);
  for (const std::string& name : kHostileNames) {
    std::string hash = "'); DELETE FROM users; -- " + name;
    ASSERT_EQ(store->create_user(name, hash), Status::kOk) << name;
    UserStore::User user;
    ASSERT_EQ(store->find_user(name, &user), Status::kOk) << name;
    EXPECT_EQ(user.username, name);
    EXPECT_EQ(user.password_hash, hash);
  }
  UserStore::User user;
  EXPECT_EQ(store->find_user("x' OR '1'='2", &user), Status::kNotFound);
  EXPECT_EQ(store->find_user("carol", &user), Status::kOk) << "the table is intact";
  EXPECT_EQ(query_directly("SELECT COUNT(*) FROM users"), std::to_string(kHostileNames.size() + 1));
}

TEST_F(SqliteUserStoreTest, DatabaseRunsInWalMode) {
  auto store = open_or_fail(url());
  ASSERT_TRUE(store);
  EXPECT_EQ(query_directly("PRAGMA journal_mode"), "wal");
}

TEST_F(SqliteUserStoreTest, ConcurrentCreatesOfDistinctNamesAllSucceed) {
  auto store = open_or_fail(url());
  ASSERT_TRUE(store);
  Tally tally;
  create_concurrently(store.get(), 8, 25, "user", /*same_name=*/false, &tally);
  EXPECT_EQ(tally.ok, 8 * 25);
  EXPECT_EQ(tally.taken + tally.other, 0);
  EXPECT_EQ(query_directly("SELECT COUNT(*) FROM users"), "200");
}

TEST_F(SqliteUserStoreTest, ConcurrentCreatesOfOneNameHaveOneWinner) {
  auto store = open_or_fail(url());
  ASSERT_TRUE(store);
  Tally tally;
  create_concurrently(store.get(), 8, 20, "race", /*same_name=*/true, &tally);
  EXPECT_EQ(tally.ok, 20) << "exactly one winner per name";
  EXPECT_EQ(tally.taken, 7 * 20);
  EXPECT_EQ(tally.other, 0);
}

TEST_F(SqliteUserStoreTest, UsersSurviveReopening) {
  {
    auto store = open_or_fail(url());
    ASSERT_TRUE(store);
    ASSERT_EQ(store->create_user("dave", "hd"), Status::kOk);
  }
  auto store = open_or_fail(url());
  ASSERT_TRUE(store);
  UserStore::User user;
  ASSERT_EQ(store->find_user("dave", &user), Status::kOk);
  EXPECT_EQ(user.password_hash, "hd");
  EXPECT_EQ(store->create_user("dave", "again"), Status::kTaken);
}

TEST_F(SqliteUserStoreTest, MissingParentDirectoriesAreCreated) {
  auto store = open_or_fail("sqlite:" + dir_.at("a/b/c/users.db"));
  ASSERT_TRUE(store);
  EXPECT_EQ(store->create_user("erin", "h"), Status::kOk);
  EXPECT_EQ(::access(dir_.at("a/b/c/users.db").c_str(), F_OK), 0);
}

TEST_F(SqliteUserStoreTest, DescribeNamesTheFile) {
  auto store = open_or_fail(url());
  ASSERT_TRUE(store);
  EXPECT_EQ(store->describe(), url());
}

TEST_F(SqliteUserStoreTest, DirectoryUnderAFileIsAnError) {
  // Fails for root as well: no permission bits are involved.
  ASSERT_TRUE(dir_.write("file", "not a directory"));
  auto store = open_user_store("sqlite:" + dir_.at("file/data/users.db"), 4);
  ASSERT_FALSE(store);
  EXPECT_EQ(store.error().code, ENOTDIR) << store.error().message();
}

TEST_F(SqliteUserStoreTest, UnwritableDirectoryIsAnError) {
  // mkdtemp makes the root 0700; let "nobody" in, but not write.
  ASSERT_TRUE(dir_.chmod("", 0755));
  ASSERT_TRUE(dir_.mkdir("ro"));
  ASSERT_TRUE(dir_.chmod("ro", 0555));
  std::string in_dir = "sqlite:" + dir_.at("ro/users.db");
  std::string below = "sqlite:" + dir_.at("ro/data/users.db");
  int rc = testing::run_unprivileged([&] {
    auto direct = open_user_store(in_dir, 1);
    if (direct || direct.error().code != EACCES) return 1;
    auto nested = open_user_store(below, 1);
    if (nested || nested.error().code != EACCES) return 2;
    return 0;
  });
  if (rc == testing::kCannotDropPrivileges) GTEST_SKIP() << "cannot drop root privileges here";
  EXPECT_EQ(rc, 0);
}

TEST_F(SqliteUserStoreTest, FileThatIsNotADatabaseIsAnError) {
  ASSERT_TRUE(dir_.mkdir("data"));
  ASSERT_TRUE(dir_.write("data/users.db", std::string(4096, 'x')));
  EXPECT_FALSE(open_user_store(url(), 1));
}

// ---- open_user_store ----

TEST(OpenUserStore, RejectsUnknownSchemes) {
  for (const char* url : {"", "users.db", "postgres://u@h/db", "SQLITE:x.db", "mysql:/h/db"}) {
    auto store = open_user_store(url, 4);
    ASSERT_FALSE(store) << url;
    EXPECT_EQ(store.error().code, EINVAL) << url;
  }
}

TEST(OpenUserStore, RejectsAnEmptySqlitePath) { EXPECT_FALSE(open_user_store("sqlite:", 4)); }

TEST(OpenUserStore, MalformedMysqlUrlIsAnErrorThatSaysWhy) {
  auto store = open_user_store("mysql://tern:pw@db.example:99999/tern", 4);
  ASSERT_FALSE(store);
  EXPECT_NE(store.error().message().find("port"), std::string::npos) << store.error().message();
}

TEST(OpenUserStore, MysqlStoreOpensWithoutAServerAndHidesThePassword) {
  // Nothing listens there; connecting is left to the first call.
  for (const char* url : {"mysql://tern:s3cret@127.0.0.1:1/tern", "mariadb://tern:s3cret@h/tern"}) {
    auto store = open_or_fail(url);
    ASSERT_TRUE(store);
    EXPECT_EQ(store->describe().find("s3cret"), std::string::npos) << store->describe();
  }
}

// ---- mysql:// URLs ----

TEST(MysqlUrl, ParsesTcpForm) {
  auto url = parse_mysql_url("mysql://tern:pw@db.example:3307/users");
  ASSERT_TRUE(url) << url.error().message();
  EXPECT_EQ(url->user, "tern");
  EXPECT_EQ(url->password, "pw");
  EXPECT_EQ(url->host, "db.example");
  EXPECT_EQ(url->port, 3307);
  EXPECT_EQ(url->database, "users");
  EXPECT_EQ(url->socket, "");
  EXPECT_EQ(url->describe(), "mysql://tern@db.example:3307/users");
}

TEST(MysqlUrl, PortDefaultsTo3306AndPasswordToEmpty) {
  auto url = parse_mysql_url("mariadb://tern@127.0.0.1/tern");
  ASSERT_TRUE(url) << url.error().message();
  EXPECT_EQ(url->port, 3306);
  EXPECT_EQ(url->password, "");
  EXPECT_EQ(url->host, "127.0.0.1");
}

TEST(MysqlUrl, ParsesSocketForm) {
  auto url = parse_mysql_url("mysql://tern:pw@localhost/tern?socket=/run/mysqld/mysqld.sock");
  ASSERT_TRUE(url) << url.error().message();
  EXPECT_EQ(url->host, "localhost");
  EXPECT_EQ(url->socket, "/run/mysqld/mysqld.sock");
  EXPECT_EQ(url->describe(), "mysql://tern@localhost/tern?socket=/run/mysqld/mysqld.sock");

  auto no_host = parse_mysql_url("mysql://tern:pw@/tern?socket=%2Ftmp%2Fmy%20sock");
  ASSERT_TRUE(no_host) << no_host.error().message();
  EXPECT_EQ(no_host->host, "localhost");
  EXPECT_EQ(no_host->socket, "/tmp/my sock");
}

TEST(MysqlUrl, PercentDecodesUserPasswordAndDatabase) {
  auto url = parse_mysql_url("mysql://us%3Aer:p%40ss%2Fw%3Ard%25@h/d%62");
  ASSERT_TRUE(url) << url.error().message();
  EXPECT_EQ(url->user, "us:er");
  EXPECT_EQ(url->password, "p@ss/w:rd%");
  EXPECT_EQ(url->database, "db");
}

TEST(MysqlUrl, AtAndColonMayStayUnencodedInThePassword) {
  auto url = parse_mysql_url("mysql://tern:a@b:c@h:1234/db");
  ASSERT_TRUE(url) << url.error().message();
  EXPECT_EQ(url->user, "tern");
  EXPECT_EQ(url->password, "a@b:c");
  EXPECT_EQ(url->host, "h");
  EXPECT_EQ(url->port, 1234);
}

TEST(MysqlUrl, ParsesBracketedIpv6) {
  auto url = parse_mysql_url("mysql://u:p@[::1]:3310/db");
  ASSERT_TRUE(url) << url.error().message();
  EXPECT_EQ(url->host, "::1");
  EXPECT_EQ(url->port, 3310);
  EXPECT_EQ(url->describe(), "mysql://u@[::1]:3310/db");
  auto default_port = parse_mysql_url("mysql://u:p@[fe80::1]/db");
  ASSERT_TRUE(default_port);
  EXPECT_EQ(default_port->port, 3306);
}

TEST(MysqlUrl, RejectsMalformedUrls) {
  for (const char* text : {
           "tern:pw@h/db",                        // no scheme
           "mysql:/tern:pw@h/db",                 // one slash
           "postgresql://tern:pw@h/db",           // another database
           "mysql://h/db",                        // no user@
           "mysql://:pw@h/db",                    // empty user
           "mysql://tern:pw@/db",                 // no host, no socket
           "mysql://tern:pw@h",                   // no database
           "mysql://tern:pw@h/",                  // empty database
           "mysql://tern:pw@h/a/b",               // '/' in the database
           "mysql://tern:pw@h:/db",               // empty port
           "mysql://tern:pw@h:0/db",              // port 0
           "mysql://tern:pw@h:65536/db",          // port too large
           "mysql://tern:pw@h:33o6/db",           // not a number
           "mysql://tern:pw@::1:3306/db",         // IPv6 without brackets
           "mysql://tern:pw@[::1/db",             // unclosed bracket
           "mysql://tern:pw@[::1]x/db",           // junk after the bracket
           "mysql://tern:p%zzw@h/db",             // bad escape
           "mysql://tern:pw%4@h/db",              // short escape
           "mysql://tern:pw%00@h/db",             // NUL
           "mysql://tern:pw@h/db?sslmode=off",    // unknown parameter
           "mysql://tern:pw@h/db?socket=",        // empty socket
           "mysql://tern:pw@h/db?socket=/s",      // socket with a remote host
           "mysql://tern:pw@localhost:3306/db?socket=/s",  // socket and port
           "mysql://tern:p#w@h/db",               // unencoded '#'
       }) {
    auto url = parse_mysql_url(text);
    EXPECT_FALSE(url) << text << " parsed as " << url->describe();
    if (!url) {
      EXPECT_EQ(url.error().code, EINVAL) << text;
    }
  }
}

// ---- MariaDB without a server ----

// A TCP port on 127.0.0.1 that nothing listens on (just closed by us).
uint16_t closed_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), len);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

TEST(MysqlUserStore, UnreachableServerIsUnavailableAtOnce) {
  auto url = parse_mysql_url("mysql://tern:pw@127.0.0.1:" + std::to_string(closed_port()) + "/t");
  ASSERT_TRUE(url);
  MysqlUserStore store(*url, {});
  auto start = std::chrono::steady_clock::now();
  UserStore::User user;
  EXPECT_EQ(store.find_user("alice", &user), Status::kUnavailable);
  EXPECT_EQ(store.create_user("alice", "h"), Status::kUnavailable);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
}

// A server that accepts connections (the kernel does, from the backlog) and
// never says a word: the connect timeout bounds the first call, and a call
// that finds the only connection busy gives up after acquire_timeout.
TEST(MysqlUserStore, SilentServerTimesOutAndWaitersGiveUp) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), len), 0);
  ASSERT_EQ(::listen(fd, 16), 0);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  auto url = parse_mysql_url("mysql://tern:pw@127.0.0.1:" + std::to_string(ntohs(addr.sin_port)) +
                             "/t");
  ASSERT_TRUE(url);
  MysqlUserStore::Options options;
  options.pool_size = 1;
  options.acquire_timeout = 300ms;
  options.connect_timeout = 1s;
  options.read_timeout = 1s;
  options.write_timeout = 1s;
  MysqlUserStore store(*url, options);

  std::atomic<bool> first_started{false};
  Status first = Status::kOk;
  auto start = std::chrono::steady_clock::now();
  std::thread holder([&] {
    UserStore::User user;
    first_started = true;
    first = store.find_user("alice", &user);
  });
  while (!first_started) std::this_thread::yield();
  std::this_thread::sleep_for(100ms);  // let it take the only slot
  UserStore::User user;
  EXPECT_EQ(store.find_user("bob", &user), Status::kUnavailable);
  auto waited = std::chrono::steady_clock::now() - start;
  holder.join();
  auto total = std::chrono::steady_clock::now() - start;
  ::close(fd);
  EXPECT_EQ(first, Status::kUnavailable);
  EXPECT_LT(waited, 1s) << "the waiter gave up after acquire_timeout";
  EXPECT_LT(total, 5s) << "the silent server held the first call for about the timeouts";
}

// ---- MariaDB with a server ----

// TERN_MARIADB_URL=mysql://user:pass@127.0.0.1:3306/db names a server this
// test may create a users table in. Usernames carry a per-run suffix, so a
// table left from an earlier run does no harm.
class MariadbUserStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* url = std::getenv("TERN_MARIADB_URL");
    if (url == nullptr || *url == '\0') GTEST_SKIP() << "TERN_MARIADB_URL is not set";
    store_ = open_or_fail(url, 4);
    ASSERT_TRUE(store_);
    char suffix[16];
    auto ticks = static_cast<unsigned long long>(
        std::chrono::system_clock::now().time_since_epoch().count());
    std::snprintf(suffix, sizeof suffix, "%06llx", (ticks ^ static_cast<unsigned long long>(::getpid())) & 0xffffff);
    suffix_ = suffix;
  }
  // Unique per run; at most 32 characters for the names used here.
  std::string name(std::string_view base) const { return std::string(base) + "_" + suffix_; }

  std::unique_ptr<UserStore> store_;
  std::string suffix_;
};

TEST_F(MariadbUserStoreTest, CreateFindDuplicateAndNotFound) {
  UserStore::User user;
  EXPECT_EQ(store_->find_user(name("alice"), &user), Status::kNotFound);
  ASSERT_EQ(store_->create_user(name("alice"), "$argon2id$v=19$abc"), Status::kOk);
  ASSERT_EQ(store_->find_user(name("alice"), &user), Status::kOk);
  EXPECT_EQ(user.username, name("alice"));
  EXPECT_EQ(user.password_hash, "$argon2id$v=19$abc");
  EXPECT_EQ(store_->create_user(name("alice"), "other"), Status::kTaken);
  EXPECT_EQ(store_->create_user(name("Alice"), "h"), Status::kTaken) << "unique whatever the case";
  // Still usable after the duplicate-key error; found in any case, named
  // as registered.
  ASSERT_EQ(store_->find_user(name("ALICE"), &user), Status::kOk);
  EXPECT_EQ(user.username, name("alice"));
  EXPECT_EQ(user.password_hash, "$argon2id$v=19$abc");
}

TEST_F(MariadbUserStoreTest, EndingSessionsMovesTheGenerationOn) {
  ASSERT_EQ(store_->create_user(name("dana"), "h"), Status::kOk);
  UserStore::User user;
  ASSERT_EQ(store_->find_user(name("dana"), &user), Status::kOk);
  const uint64_t first = user.session_generation;
  EXPECT_EQ(store_->end_sessions(name("DANA")), Status::kOk);
  ASSERT_EQ(store_->find_user(name("dana"), &user), Status::kOk);
  EXPECT_EQ(user.session_generation, first + 1);
  EXPECT_EQ(store_->end_sessions(name("nobody")), Status::kNotFound);
}

TEST_F(MariadbUserStoreTest, SqlLookingInputIsStoredVerbatim) {
  ASSERT_EQ(store_->create_user(name("carol"), "h"), Status::kOk);
  for (const std::string& base : kHostileNames) {
    std::string hash = "'); DELETE FROM users; -- " + base;
    ASSERT_EQ(store_->create_user(name(base), hash), Status::kOk) << base;
    UserStore::User user;
    ASSERT_EQ(store_->find_user(name(base), &user), Status::kOk) << base;
    EXPECT_EQ(user.username, name(base));
    EXPECT_EQ(user.password_hash, hash);
  }
  UserStore::User user;
  EXPECT_EQ(store_->find_user("x' OR '1'='1", &user), Status::kNotFound);
  EXPECT_EQ(store_->find_user(name("carol"), &user), Status::kOk) << "the table is intact";
}

TEST_F(MariadbUserStoreTest, LongestHashRoundTrips) {
  std::string hash(255, 'h');
  hash.replace(0, 3, "ü€");  // multi-byte characters: more bytes than the 255 characters hold
  ASSERT_EQ(store_->create_user(name("long"), hash), Status::kOk);
  UserStore::User user;
  ASSERT_EQ(store_->find_user(name("long"), &user), Status::kOk);
  EXPECT_EQ(user.password_hash, hash);
}

TEST_F(MariadbUserStoreTest, ConcurrentCreatesThroughASmallPool) {
  Tally distinct;
  create_concurrently(store_.get(), 8, 10, name("d"), /*same_name=*/false, &distinct);
  EXPECT_EQ(distinct.ok, 80);
  EXPECT_EQ(distinct.taken + distinct.other, 0);
  Tally same;
  create_concurrently(store_.get(), 8, 5, name("s"), /*same_name=*/true, &same);
  EXPECT_EQ(same.ok, 5) << "exactly one winner per name";
  EXPECT_EQ(same.taken, 7 * 5);
  EXPECT_EQ(same.other, 0);
}

}  // namespace
}  // namespace tern::auth
