#include "auth/sqlite_user_store.h"

#include <sqlite3.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "base/log.h"

namespace tern::auth {

namespace {

constexpr const char* kCreateTable =
    "CREATE TABLE IF NOT EXISTS users ("
    " id INTEGER PRIMARY KEY,"
    " username TEXT NOT NULL UNIQUE,"
    " password_hash TEXT NOT NULL,"
    " created_at INTEGER NOT NULL,"
    " session_generation INTEGER NOT NULL DEFAULT 0)";
// Tables made by an older tern lack the column.
constexpr const char* kHasGeneration =
    "SELECT 1 FROM pragma_table_info('users') WHERE name = 'session_generation'";
constexpr const char* kAddGeneration =
    "ALTER TABLE users ADD COLUMN session_generation INTEGER NOT NULL DEFAULT 0";
constexpr const char* kCaseIndex =
    "CREATE UNIQUE INDEX IF NOT EXISTS users_username_nocase ON users (username COLLATE NOCASE)";
constexpr const char* kInsert =
    "INSERT INTO users (username, password_hash, created_at) VALUES (?1, ?2, ?3)";
constexpr const char* kSelect =
    "SELECT username, password_hash, session_generation FROM users WHERE username = ?1 COLLATE NOCASE";
constexpr const char* kBump =
    "UPDATE users SET session_generation = session_generation + 1 WHERE username = ?1 COLLATE NOCASE";

// A string_view made from nothing has a null data(), which sqlite3_bind_text
// would store as SQL NULL rather than ''. The statement is always stepped and
// reset before the view goes away, so SQLITE_STATIC (no copy) is safe.
int bind_text(sqlite3_stmt* stmt, int index, std::string_view text) {
  if (text.size() > static_cast<size_t>(INT_MAX)) return SQLITE_TOOBIG;
  return sqlite3_bind_text(stmt, index, text.empty() ? "" : text.data(),
                           static_cast<int>(text.size()), SQLITE_STATIC);
}

std::string column_text(sqlite3_stmt* stmt, int column) {
  const unsigned char* text = sqlite3_column_text(stmt, column);
  if (text == nullptr) return std::string();
  return std::string(reinterpret_cast<const char*>(text),
                     static_cast<size_t>(sqlite3_column_bytes(stmt, column)));
}

// Resets a kept statement and drops its bindings (which point into the
// caller's strings) on every path out of a call.
class StatementReset {
 public:
  explicit StatementReset(sqlite3_stmt* stmt) : stmt_(stmt) {}
  ~StatementReset() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }
  StatementReset(const StatementReset&) = delete;
  StatementReset& operator=(const StatementReset&) = delete;

 private:
  sqlite3_stmt* const stmt_;
};

// The errno behind the last failure on `db`, or EIO when SQLite has none
// (a corrupt file, a full disk reported by SQLite itself).
int system_error_of(sqlite3* db) {
  int err = db != nullptr ? sqlite3_system_errno(db) : 0;
  return err != 0 ? err : EIO;
}

}  // namespace

Result<std::unique_ptr<SqliteUserStore>> SqliteUserStore::open(std::string_view path) {
  if (path.empty()) return Error{EINVAL, "sqlite: URL names no database file"};
  std::string file(path);
  std::filesystem::path parent = std::filesystem::path(file).parent_path();
  if (!parent.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(parent, ec);
    if (ec) {
      TERN_LOG_ERROR("sqlite:{}: cannot create directory {}: {}", file, parent.string(),
                     ec.message());
      return Error{ec.value(), "create SQLite database directory"};
    }
  }
  // WAL keeps two more files (-wal, -shm) beside the database, so the
  // directory must be writable even when the file already exists. Checked
  // here because SQLite, after failing read-write, retries read-only and
  // reports the errno of that second attempt.
  std::string dir = parent.empty() ? std::string(".") : parent.string();
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    int err = errno;
    TERN_LOG_ERROR("sqlite:{}: directory {} is not writable: {}", file, dir, std::strerror(err));
    return Error{err, "SQLite database directory is not writable"};
  }
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(file.c_str(), &db,
                           SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                           nullptr);
  if (rc != SQLITE_OK) {
    int err = system_error_of(db);
    TERN_LOG_ERROR("sqlite:{}: cannot open: {}",
                   file, db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
    sqlite3_close(db);  // a no-op on nullptr
    return Error{err, "open SQLite database"};
  }
  // From here on the store owns db and closes it on every error path.
  std::unique_ptr<SqliteUserStore> store(new SqliteUserStore(std::move(file), db));
  Result<void> ready = store->prepare();
  if (!ready) return ready.error();
  return store;
}

// Runs once, before the store is shared, so it needs no lock.
Result<void> SqliteUserStore::prepare() {
  sqlite3_extended_result_codes(db_, 1);
  sqlite3_busy_timeout(db_, kBusyTimeoutMs);  // what PRAGMA busy_timeout sets
  auto fail = [this](const char* what) {
    TERN_LOG_ERROR("sqlite:{}: {}: {}", path_, what, sqlite3_errmsg(db_));
    return Error{system_error_of(db_), what};
  };
  if (sqlite3_db_readonly(db_, "main") == 1) {
    TERN_LOG_ERROR("sqlite:{}: the file is read-only", path_);
    return Error{EACCES, "open SQLite database read-write"};
  }

  // Users register far less often than they log in, and an account that was
  // confirmed to its owner must survive a power cut, so we keep SQLite's
  // default synchronous=FULL rather than the NORMAL that WAL usually runs with.
  //
  // journal_mode answers with the mode now in force: anything but "wal"
  // means the file system cannot hold the shared-memory index.
  sqlite3_stmt* pragma = nullptr;
  if (sqlite3_prepare_v2(db_, "PRAGMA journal_mode=WAL", -1, &pragma, nullptr) != SQLITE_OK) {
    return fail("set SQLite journal_mode=WAL");
  }
  int rc = sqlite3_step(pragma);
  std::string mode = rc == SQLITE_ROW ? column_text(pragma, 0) : std::string();
  sqlite3_finalize(pragma);
  if (rc != SQLITE_ROW) return fail("set SQLite journal_mode=WAL");
  if (mode != "wal") {
    TERN_LOG_ERROR("sqlite:{}: journal_mode stays '{}' instead of 'wal'", path_, mode);
    return Error{ENOTSUP, "set SQLite journal_mode=WAL"};
  }

  if (sqlite3_exec(db_, kCreateTable, nullptr, nullptr, nullptr) != SQLITE_OK) {
    return fail("create SQLite users table");
  }
  sqlite3_stmt* probe = nullptr;
  if (sqlite3_prepare_v2(db_, kHasGeneration, -1, &probe, nullptr) != SQLITE_OK) {
    return fail("inspect SQLite users table");
  }
  const bool has_generation = sqlite3_step(probe) == SQLITE_ROW;
  sqlite3_finalize(probe);
  if (!has_generation && sqlite3_exec(db_, kAddGeneration, nullptr, nullptr, nullptr) != SQLITE_OK) {
    return fail("add session_generation to SQLite users table");
  }
  // Fails if an older tern let two names differ only by case: the operator
  // has to rename one (the message says which index).
  if (sqlite3_exec(db_, kCaseIndex, nullptr, nullptr, nullptr) != SQLITE_OK) {
    return fail("make SQLite usernames unique without regard to case");
  }
  if (sqlite3_prepare_v2(db_, kInsert, -1, &insert_, nullptr) != SQLITE_OK ||
      sqlite3_prepare_v2(db_, kSelect, -1, &select_, nullptr) != SQLITE_OK ||
      sqlite3_prepare_v2(db_, kBump, -1, &bump_, nullptr) != SQLITE_OK) {
    return fail("prepare SQLite statements");
  }
  return {};
}

SqliteUserStore::~SqliteUserStore() {
  sqlite3_finalize(insert_);  // no-ops on nullptr
  sqlite3_finalize(select_);
  sqlite3_finalize(bump_);
  sqlite3_close(db_);
}

UserStore::Status SqliteUserStore::create_user(std::string_view username,
                                               std::string_view password_hash) {
  const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  std::lock_guard lock(mu_);
  StatementReset reset(insert_);
  int rc = bind_text(insert_, 1, username);
  if (rc == SQLITE_OK) rc = bind_text(insert_, 2, password_hash);
  if (rc == SQLITE_OK) rc = sqlite3_bind_int64(insert_, 3, now);
  if (rc == SQLITE_OK) rc = sqlite3_step(insert_);
  if (rc == SQLITE_DONE) return Status::kOk;
  if (rc == SQLITE_CONSTRAINT_UNIQUE) return Status::kTaken;
  TERN_LOG_EVERY_SECOND(spdlog::level::err, "sqlite:{}: insert user failed: {} ({})", path_,
                        sqlite3_errmsg(db_), sqlite3_errstr(rc));
  return Status::kUnavailable;
}

UserStore::Status SqliteUserStore::find_user(std::string_view username, User* out) {
  std::lock_guard lock(mu_);
  StatementReset reset(select_);
  int rc = bind_text(select_, 1, username);
  if (rc == SQLITE_OK) rc = sqlite3_step(select_);
  if (rc == SQLITE_DONE) return Status::kNotFound;
  if (rc == SQLITE_ROW) {
    out->username = column_text(select_, 0);
    out->password_hash = column_text(select_, 1);
    out->session_generation = static_cast<uint64_t>(sqlite3_column_int64(select_, 2));
    return Status::kOk;
  }
  TERN_LOG_EVERY_SECOND(spdlog::level::err, "sqlite:{}: find user failed: {} ({})", path_,
                        sqlite3_errmsg(db_), sqlite3_errstr(rc));
  return Status::kUnavailable;
}

UserStore::Status SqliteUserStore::end_sessions(std::string_view username) {
  std::lock_guard lock(mu_);
  StatementReset reset(bump_);
  int rc = bind_text(bump_, 1, username);
  if (rc == SQLITE_OK) rc = sqlite3_step(bump_);
  if (rc == SQLITE_DONE) return sqlite3_changes(db_) > 0 ? Status::kOk : Status::kNotFound;
  TERN_LOG_EVERY_SECOND(spdlog::level::err, "sqlite:{}: end sessions failed: {} ({})", path_,
                        sqlite3_errmsg(db_), sqlite3_errstr(rc));
  return Status::kUnavailable;
}

std::string SqliteUserStore::describe() const { return "sqlite:" + path_; }

}  // namespace tern::auth
