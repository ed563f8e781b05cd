// SqliteUserStore: the UserStore in a local SQLite file ("sqlite:data/users.db").
//
// The database runs in WAL mode, so a reader never waits for the writer and a
// commit costs one append to the log instead of a rewrite of the pages. A
// busy timeout covers another process (an operator's sqlite3 shell, a backup)
// holding the write lock for a moment.
//
// Names are unique without regard to ASCII case (an index on username
// COLLATE NOCASE); a table from an older tern gets the index and the
// session_generation column when it is opened.
//
// One connection, guarded by a mutex, with its statements kept prepared.
// We considered a connection per task thread: WAL would then let lookups run
// in parallel, but writes serialise on SQLite's single write lock anyway, a
// lookup by primary key takes microseconds next to the argon2id hash the
// caller computes around it, and per-thread connections would need
// thread-exit hooks to close them and their statements. One connection is
// opened with SQLITE_OPEN_NOMUTEX, since our mutex already serialises it.
//
// Created by open_user_store() (or open() below) and owned by the caller;
// any thread may call it; every call blocks on disk.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "auth/user_store.h"
#include "base/result.h"

struct sqlite3;
struct sqlite3_stmt;

namespace tern::auth {

class SqliteUserStore final : public UserStore {
 public:
  // How long a statement waits for another connection's write lock before
  // it fails (as kUnavailable).
  static constexpr int kBusyTimeoutMs = 5000;

  // Opens or creates the database file at `path`, creating its parent
  // directories if they are missing (mode 0777 less the umask), switches
  // it to WAL mode and creates the users table if it is missing. Errors (an
  // unwritable directory, a file that is not a database, a file system
  // without WAL support) are logged with SQLite's own message and returned.
  static Result<std::unique_ptr<SqliteUserStore>> open(std::string_view path);

  ~SqliteUserStore() override;
  SqliteUserStore(const SqliteUserStore&) = delete;
  SqliteUserStore& operator=(const SqliteUserStore&) = delete;

  // A UNIQUE violation is kTaken; any other failure (disk full, I/O error,
  // the write lock held past kBusyTimeoutMs) is logged and kUnavailable.
  Status create_user(std::string_view username, std::string_view password_hash) override;
  Status find_user(std::string_view username, User* out) override;
  Status end_sessions(std::string_view username) override;
  std::string describe() const override;  // "sqlite:data/users.db"

 private:
  SqliteUserStore(std::string path, sqlite3* db) : path_(std::move(path)), db_(db) {}
  Result<void> prepare();

  const std::string path_;
  std::mutex mu_;                  // guards db_ and the statements
  sqlite3* const db_;              // owned; closed in the destructor
  sqlite3_stmt* insert_ = nullptr;  // owned; finalized in the destructor
  sqlite3_stmt* select_ = nullptr;  // owned; finalized in the destructor
  sqlite3_stmt* bump_ = nullptr;    // owned; finalized in the destructor
};

}  // namespace tern::auth
