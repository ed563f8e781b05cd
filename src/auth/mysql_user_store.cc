#include "auth/mysql_user_store.h"

#include <mysql.h>
#include <mysqld_error.h>

#include <cerrno>
#include <charconv>
#include <optional>

#include "base/log.h"
#include "http/uri.h"

namespace tern::auth {

namespace {

// username keeps its bytes (utf8mb4_bin); username_ci, its lower case, is
// what names are unique by and looked up by (as SQLite's NOCASE index).
constexpr std::string_view kCreateTable =
    "CREATE TABLE IF NOT EXISTS users ("
    " id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,"
    " username VARCHAR(32) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL UNIQUE,"
    " password_hash VARCHAR(255) NOT NULL,"
    " created_at BIGINT NOT NULL,"
    " session_generation BIGINT UNSIGNED NOT NULL DEFAULT 0,"
    " username_ci VARCHAR(32) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin AS (LOWER(username)) PERSISTENT,"
    " UNIQUE KEY users_username_ci (username_ci)"
    ") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4";
// A table made by an older tern gets what it lacks (no-ops otherwise).
constexpr std::string_view kMigrations[] = {
    "ALTER TABLE users ADD COLUMN IF NOT EXISTS"
    " session_generation BIGINT UNSIGNED NOT NULL DEFAULT 0",
    "ALTER TABLE users ADD COLUMN IF NOT EXISTS"
    " username_ci VARCHAR(32) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin AS (LOWER(username)) PERSISTENT",
    "CREATE UNIQUE INDEX IF NOT EXISTS users_username_ci ON users (username_ci)",
};
constexpr std::string_view kInsert =
    "INSERT INTO users (username, password_hash, created_at) VALUES (?, ?, ?)";
constexpr std::string_view kSelect =
    "SELECT username, password_hash, session_generation FROM users WHERE username_ci = LOWER(?)";
constexpr std::string_view kBump =
    "UPDATE users SET session_generation = session_generation + 1 WHERE username_ci = LOWER(?)";

// Result buffers large enough for any row the schema allows (32 and 255
// characters of up to 4 bytes); a longer value is still fetched whole.
constexpr size_t kUsernameBytes = 32 * 4;
constexpr size_t kHashBytes = 255 * 4;

// mysql_library_init is not thread-safe, and mysql_init would otherwise
// call it from whichever task thread comes first. It is never ended: the
// store may be destroyed while another is still in use.
void init_library_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (mysql_library_init(0, nullptr, nullptr) != 0) {
      TERN_LOG_ERROR("mysql_library_init failed; every database call will fail");
    }
  });
}

// The client library keeps per-thread state: mysql_thread_init on a
// thread's first call, mysql_thread_end when that thread exits.
class ThreadInit {
 public:
  ThreadInit() { mysql_thread_init(); }
  ~ThreadInit() { mysql_thread_end(); }
  ThreadInit(const ThreadInit&) = delete;
  ThreadInit& operator=(const ThreadInit&) = delete;
};

void init_thread() { thread_local ThreadInit init; }

unsigned whole_seconds(std::chrono::seconds s) {
  return s.count() < 1 ? 1u : static_cast<unsigned>(s.count());
}

// An input parameter that points at `text`; the statement is executed
// before `text` goes away. An empty view may have a null data(), which
// is not the same as ''.
void bind_input(MYSQL_BIND* bind, std::string_view text, unsigned long* length) {
  *length = static_cast<unsigned long>(text.size());
  bind->buffer_type = MYSQL_TYPE_STRING;
  bind->buffer = const_cast<char*>(text.empty() ? "" : text.data());
  bind->buffer_length = *length;
  bind->length = length;
}

void bind_output(MYSQL_BIND* bind, std::string* buffer, unsigned long* length) {
  bind->buffer_type = MYSQL_TYPE_STRING;
  bind->buffer = buffer->data();
  bind->buffer_length = static_cast<unsigned long>(buffer->size());
  bind->length = length;
}

MysqlUserStore::Options normalized(MysqlUserStore::Options options) {
  if (options.pool_size == 0) options.pool_size = 1;
  return options;
}

}  // namespace

// One connection with its statements prepared on it. Used by one call at a
// time (the pool hands it over under a mutex), on any thread.
class MysqlUserStore::Connection {
 public:
  // Connects, creates the table when asked to, and prepares the statements.
  // Null on failure, which it logs.
  static std::unique_ptr<Connection> open(const MysqlUrl& url, const Options& options,
                                          bool create_table);
  ~Connection() {
    if (insert_ != nullptr) mysql_stmt_close(insert_);
    if (select_ != nullptr) mysql_stmt_close(select_);
    if (bump_ != nullptr) mysql_stmt_close(bump_);
    mysql_close(mysql_);
  }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  Status insert(std::string_view username, std::string_view password_hash, int64_t created_at);
  Status select(std::string_view username, User* out);
  Status bump(std::string_view username);
  bool ping();

  // Set by the pool when the connection goes back to it: the pool's epoch
  // and the time.
  uint64_t epoch = 0;
  std::chrono::steady_clock::time_point last_used;

 private:
  Connection(const MysqlUrl& url, MYSQL* mysql) : url_(url), mysql_(mysql) {}
  bool prepare(bool create_table);
  Status failed(MYSQL_STMT* stmt, const char* what);

  const MysqlUrl& url_;  // the store's, which outlives its connections
  MYSQL* const mysql_;   // owned
  MYSQL_STMT* insert_ = nullptr;  // owned
  MYSQL_STMT* select_ = nullptr;  // owned
  MYSQL_STMT* bump_ = nullptr;    // owned
};

std::unique_ptr<MysqlUserStore::Connection> MysqlUserStore::Connection::open(
    const MysqlUrl& url, const Options& options, bool create_table) {
  MYSQL* mysql = mysql_init(nullptr);
  TERN_CHECK_MSG(mysql != nullptr, "mysql_init: out of memory");
  std::unique_ptr<Connection> conn(new Connection(url, mysql));  // closes it on every path

  unsigned connect_s = whole_seconds(options.connect_timeout);
  unsigned read_s = whole_seconds(options.read_timeout);
  unsigned write_s = whole_seconds(options.write_timeout);
  mysql_options(mysql, MYSQL_OPT_CONNECT_TIMEOUT, &connect_s);
  mysql_options(mysql, MYSQL_OPT_READ_TIMEOUT, &read_s);
  mysql_options(mysql, MYSQL_OPT_WRITE_TIMEOUT, &write_s);
  // A silent reconnect would drop our prepared statements and hide the
  // failure from the pool; we reconnect ourselves, with a fresh handle.
  my_bool reconnect = 0;
  mysql_options(mysql, MYSQL_OPT_RECONNECT, &reconnect);
  unsigned protocol = url.socket.empty() ? MYSQL_PROTOCOL_TCP : MYSQL_PROTOCOL_SOCKET;
  mysql_options(mysql, MYSQL_OPT_PROTOCOL, &protocol);
  mysql_options(mysql, MYSQL_SET_CHARSET_NAME, "utf8mb4");
  unsigned local_infile = 0;  // a hostile server could otherwise ask for our files
  mysql_options(mysql, MYSQL_OPT_LOCAL_INFILE, &local_infile);

  if (mysql_real_connect(mysql, url.host.c_str(), url.user.c_str(), url.password.c_str(),
                         url.database.c_str(), url.port,
                         url.socket.empty() ? nullptr : url.socket.c_str(), 0) == nullptr) {
    TERN_LOG_EVERY_SECOND(spdlog::level::err, "{}: connect failed: {} (error {})", url.describe(),
                          mysql_error(mysql), mysql_errno(mysql));
    return nullptr;
  }
  if (!conn->prepare(create_table)) return nullptr;
  return conn;
}

bool MysqlUserStore::Connection::prepare(bool create_table) {
  if (create_table) {
    for (std::string_view sql : {kCreateTable, kMigrations[0], kMigrations[1], kMigrations[2]}) {
      if (mysql_real_query(mysql_, sql.data(), sql.size()) != 0) {
        TERN_LOG_EVERY_SECOND(spdlog::level::err, "{}: '{}' failed: {} (error {})",
                              url_.describe(), sql.substr(0, 40), mysql_error(mysql_),
                              mysql_errno(mysql_));
        return false;
      }
    }
  }
  insert_ = mysql_stmt_init(mysql_);
  select_ = mysql_stmt_init(mysql_);
  bump_ = mysql_stmt_init(mysql_);
  TERN_CHECK_MSG(insert_ != nullptr && select_ != nullptr && bump_ != nullptr,
                 "mysql_stmt_init: out of memory");
  for (auto [stmt, sql] :
       {std::pair{insert_, kInsert}, std::pair{select_, kSelect}, std::pair{bump_, kBump}}) {
    if (mysql_stmt_prepare(stmt, sql.data(), static_cast<unsigned long>(sql.size())) != 0) {
      TERN_LOG_EVERY_SECOND(spdlog::level::err, "{}: prepare '{}' failed: {} (error {})",
                            url_.describe(), sql, mysql_stmt_error(stmt), mysql_stmt_errno(stmt));
      return false;
    }
  }
  return true;
}

UserStore::Status MysqlUserStore::Connection::insert(std::string_view username,
                                                     std::string_view password_hash,
                                                     int64_t created_at) {
  MYSQL_BIND params[3]{};
  unsigned long lengths[2] = {};
  bind_input(&params[0], username, &lengths[0]);
  bind_input(&params[1], password_hash, &lengths[1]);
  params[2].buffer_type = MYSQL_TYPE_LONGLONG;
  params[2].buffer = &created_at;
  if (mysql_stmt_bind_param(insert_, params) != 0 || mysql_stmt_execute(insert_) != 0) {
    if (mysql_stmt_errno(insert_) == ER_DUP_ENTRY) return Status::kTaken;
    return failed(insert_, "insert user");
  }
  return Status::kOk;
}

UserStore::Status MysqlUserStore::Connection::select(std::string_view username, User* out) {
  MYSQL_BIND param{};
  unsigned long param_length = 0;
  bind_input(&param, username, &param_length);
  if (mysql_stmt_bind_param(select_, &param) != 0 || mysql_stmt_execute(select_) != 0) {
    return failed(select_, "find user");
  }
  std::string columns[2] = {std::string(kUsernameBytes, '\0'), std::string(kHashBytes, '\0')};
  unsigned long lengths[2] = {};
  unsigned long long generation = 0;
  MYSQL_BIND results[3]{};
  bind_output(&results[0], &columns[0], &lengths[0]);
  bind_output(&results[1], &columns[1], &lengths[1]);
  results[2].buffer_type = MYSQL_TYPE_LONGLONG;
  results[2].buffer = &generation;
  results[2].is_unsigned = 1;
  if (mysql_stmt_bind_result(select_, results) != 0) return failed(select_, "find user");
  int rc = mysql_stmt_fetch(select_);
  if (rc == MYSQL_NO_DATA) {
    mysql_stmt_free_result(select_);
    return Status::kNotFound;
  }
  if (rc != 0 && rc != MYSQL_DATA_TRUNCATED) return failed(select_, "find user");
  for (unsigned i = 0; i < 2; ++i) {
    if (lengths[i] > columns[i].size()) {  // fetch the whole value this time
      columns[i].resize(lengths[i]);
      MYSQL_BIND whole{};
      bind_output(&whole, &columns[i], &lengths[i]);
      if (mysql_stmt_fetch_column(select_, &whole, i, 0) != 0) return failed(select_, "find user");
    }
    columns[i].resize(lengths[i]);
  }
  mysql_stmt_free_result(select_);
  out->username = std::move(columns[0]);
  out->password_hash = std::move(columns[1]);
  out->session_generation = generation;
  return Status::kOk;
}

UserStore::Status MysqlUserStore::Connection::bump(std::string_view username) {
  MYSQL_BIND param{};
  unsigned long param_length = 0;
  bind_input(&param, username, &param_length);
  if (mysql_stmt_bind_param(bump_, &param) != 0 || mysql_stmt_execute(bump_) != 0) {
    return failed(bump_, "end sessions");
  }
  return mysql_stmt_affected_rows(bump_) > 0 ? Status::kOk : Status::kNotFound;
}

bool MysqlUserStore::Connection::ping() {
  if (mysql_ping(mysql_) == 0) return true;
  TERN_LOG_DEBUG("{}: idle connection lost ({}); reconnecting", url_.describe(),
                 mysql_error(mysql_));
  return false;
}

UserStore::Status MysqlUserStore::Connection::failed(MYSQL_STMT* stmt, const char* what) {
  TERN_LOG_EVERY_SECOND(spdlog::level::err, "{}: {} failed: {} (error {}); closing the connection",
                        url_.describe(), what, mysql_stmt_error(stmt), mysql_stmt_errno(stmt));
  return Status::kUnavailable;
}

// A connection lent to one call, given back (or dropped) when it ends.
class MysqlUserStore::Lease {
 public:
  explicit Lease(MysqlUserStore* store) : store_(store), conn_(store->acquire()) {}
  ~Lease() {
    if (conn_) store_->release(std::move(conn_), healthy_);
  }
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;

  explicit operator bool() const { return conn_ != nullptr; }
  Connection* operator->() const { return conn_.get(); }

  // Passes a call's outcome through; kUnavailable condemns the connection.
  Status finish(Status status) {
    if (status == Status::kUnavailable) healthy_ = false;
    return status;
  }

 private:
  MysqlUserStore* const store_;
  std::unique_ptr<Connection> conn_;
  bool healthy_ = true;
};

MysqlUserStore::MysqlUserStore(MysqlUrl url, const Options& options)
    : url_(std::move(url)), options_(normalized(options)) {
  init_library_once();
}

MysqlUserStore::~MysqlUserStore() {
  init_thread();
  std::lock_guard lock(mu_);
  TERN_CHECK_MSG(lent_ == 0, "MysqlUserStore destroyed during {} calls", lent_);
  idle_.clear();
}

UserStore::Status MysqlUserStore::create_user(std::string_view username,
                                              std::string_view password_hash) {
  const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  Lease lease(this);
  if (!lease) return Status::kUnavailable;
  return lease.finish(lease->insert(username, password_hash, now));
}

UserStore::Status MysqlUserStore::find_user(std::string_view username, User* out) {
  Lease lease(this);
  if (!lease) return Status::kUnavailable;
  return lease.finish(lease->select(username, out));
}

UserStore::Status MysqlUserStore::end_sessions(std::string_view username) {
  Lease lease(this);
  if (!lease) return Status::kUnavailable;
  return lease.finish(lease->bump(username));
}

std::unique_ptr<MysqlUserStore::Connection> MysqlUserStore::acquire() {
  init_thread();
  std::unique_ptr<Connection> conn;
  bool check = false;
  {
    std::unique_lock lock(mu_);
    if (!slot_freed_.wait_for(lock, options_.acquire_timeout,
                              [this] { return lent_ < options_.pool_size; })) {
      TERN_LOG_EVERY_SECOND(spdlog::level::err, "{}: all {} connections busy for {} ms",
                            url_.describe(), options_.pool_size,
                            options_.acquire_timeout.count());
      return nullptr;
    }
    ++lent_;
    if (!idle_.empty()) {
      conn = std::move(idle_.back());
      idle_.pop_back();
      check = conn->epoch != epoch_ ||
              std::chrono::steady_clock::now() - conn->last_used > kPingAfterIdle;
    }
  }
  // Connecting and pinging happen outside the lock: they can take seconds.
  if (conn && check && !conn->ping()) conn.reset();
  if (!conn) {
    conn = Connection::open(url_, options_, !table_ready_.load(std::memory_order_acquire));
    if (!conn) {
      release(nullptr, false);
      return nullptr;
    }
    table_ready_.store(true, std::memory_order_release);
  }
  return conn;
}

void MysqlUserStore::release(std::unique_ptr<Connection> conn, bool healthy) {
  std::unique_ptr<Connection> doomed;
  {
    std::lock_guard lock(mu_);
    --lent_;
    if (healthy && conn) {
      conn->epoch = epoch_;
      conn->last_used = std::chrono::steady_clock::now();
      idle_.push_back(std::move(conn));
    } else {
      ++epoch_;  // the idle ones may have lost the server as well
      doomed = std::move(conn);
    }
  }
  slot_freed_.notify_one();
}  // doomed is closed here, outside the lock

}  // namespace tern::auth
