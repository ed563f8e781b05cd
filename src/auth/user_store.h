// UserStore: where registered users live. Two implementations, chosen by a
// URL: SQLite in a local file (the default; "sqlite:data/users.db") and
// MariaDB/MySQL through a bounded connection pool
// ("mysql://user:pass@host:3306/db", "mysql://user:pass@localhost/db?socket=/path").
//
// Every method blocks (disk, network): call them on task threads
// (base/task_pool.h), never on an I/O loop. Implementations are thread-safe.
// Statements are prepared with bound parameters only; nothing a client sends
// is ever spliced into SQL text. A store is owned by whoever opened it (the
// server's UsersApp), which destroys it only after every call has returned.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "base/result.h"

namespace tern::auth {

class UserStore {
 public:
  enum class Status {
    kOk,
    kTaken,        // create_user: the username exists
    kNotFound,     // find_user: no such user
    kUnavailable,  // the database cannot be reached or failed; try again later
  };

  struct User {
    std::string username;       // as registered
    std::string password_hash;  // libsodium's argon2id string
    // Signed into each session cookie; end_sessions() moves it on, which
    // ends every session of the user on every node sharing the store.
    uint64_t session_generation = 0;
  };

  virtual ~UserStore() = default;

  // The users table is created when missing: by open_user_store() for
  // SQLite, on the first successful connection for MariaDB (while the
  // server is down, calls fail with kUnavailable and later calls retry).
  //
  // Names compare without regard to ASCII case: "Alice" and "alice" are one
  // user, so nobody can register a look-alike of an existing name.
  //
  // Stores a new user: kOk, kTaken when the username exists, or
  // kUnavailable. Callers validate usernames first (MariaDB holds at most
  // 32 characters).
  virtual Status create_user(std::string_view username, std::string_view password_hash) = 0;
  // kOk with *out filled in (the name as registered), kNotFound, or
  // kUnavailable; *out is left alone unless kOk.
  virtual Status find_user(std::string_view username, User* out) = 0;
  // Moves the user's session generation on (logout): kOk, kNotFound or
  // kUnavailable.
  virtual Status end_sessions(std::string_view username) = 0;
  // "sqlite:data/users.db", "mysql://user@host:3306/db" (never the password).
  virtual std::string describe() const = 0;
};

// Opens the store a URL names: "sqlite:PATH" (relative to the working
// directory, or absolute: "sqlite:/var/lib/tern/users.db"), "mysql://..." or
// "mariadb://..." (see mysql_user_store.h for the URL's parts). `pool_size`
// bounds MariaDB connections; SQLite ignores it.
// Errors (a malformed URL, an unwritable SQLite directory) are for the
// operator; a MariaDB server that is down is not an error here: it is
// reported per call as kUnavailable until it comes back.
Result<std::unique_ptr<UserStore>> open_user_store(std::string_view url, size_t pool_size);

}  // namespace tern::auth
