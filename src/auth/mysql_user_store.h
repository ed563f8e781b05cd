// MysqlUserStore: the UserStore on a MariaDB or MySQL server, through
// MariaDB Connector/C (<mysql.h>, libmariadb) and a bounded connection pool.
//
//   mysql://user:pass@db.example:3306/tern            TCP (port 3306 if left out)
//   mysql://user:pass@localhost/tern?socket=/run/mysqld/mysqld.sock
//   mariadb://...                                     the same
//
// Pool. At most pool_size connections, opened lazily by the call that needs
// one and kept for the next. A call that finds all of them lent out waits on
// a condition variable for at most acquire_timeout, then gives up with
// kUnavailable, so a slow database sheds load instead of queueing every task
// thread behind it. Connect, read and write timeouts of a few seconds bound
// the time a call spends on a server that is down or hung.
//
// Failure and recovery. Any error other than a duplicate username (a lost
// connection, 2006/2013, a timeout, a server error) closes that connection,
// logs (at most once a second per thread and call site) and answers
// kUnavailable. It also marks every idle connection as suspect: a suspect
// connection is pinged before it is lent again and replaced by a new one if
// the ping fails, so after a server restart the calls that follow reconnect
// instead of each finding its own dead socket. A connection idle for longer
// than kPingAfterIdle is pinged too, which hides the server's wait_timeout. Nothing is
// retried within a call: an INSERT whose answer was lost may have committed.
// So service stops while the database is away and resumes by itself, one
// call later, when it is back; there is no error at start-up either.
//
// Schema. The first connection that succeeds runs CREATE TABLE IF NOT EXISTS
// users (InnoDB, utf8mb4), so the account needs CREATE until the table
// exists, and SELECT and INSERT on it. username is VARCHAR(32) with the binary collation utf8mb4_bin, so
// names compare byte for byte as they do in SQLite ("Alice" and "alice" are
// two users); like every PAD SPACE collation it ignores trailing spaces, and
// names longer than 32 characters fail in strict mode, so callers validate
// usernames before they get here.
//
// Threads. Thread-safe; every call blocks on the network. The library is
// initialised once per process (mysql_library_init, never ended), and each
// thread that calls in is initialised on its first call (mysql_thread_init)
// and cleaned up when it exits (mysql_thread_end, from a thread_local), so
// callers need do nothing. Owned by the caller; destroying it closes the
// idle connections and requires that no call is running.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "auth/mysql_url.h"
#include "auth/user_store.h"
#include "base/result.h"

namespace tern::auth {

class MysqlUserStore final : public UserStore {
 public:
  struct Options {
    size_t pool_size = 4;
    // How long a call waits for a connection when all pool_size are lent out.
    std::chrono::milliseconds acquire_timeout{2000};
    // Passed to the client library, which counts whole seconds.
    std::chrono::seconds connect_timeout{3};
    std::chrono::seconds read_timeout{5};
    std::chrono::seconds write_timeout{5};
  };

  // An idle connection older than this is pinged before it is used.
  static constexpr std::chrono::seconds kPingAfterIdle{60};

  // Connects to nothing yet: the first call does. pool_size 0 counts as 1.
  MysqlUserStore(MysqlUrl url, const Options& options);
  ~MysqlUserStore() override;
  MysqlUserStore(const MysqlUserStore&) = delete;
  MysqlUserStore& operator=(const MysqlUserStore&) = delete;

  // Duplicate username (ER_DUP_ENTRY) is kTaken; every other failure is
  // kUnavailable (see "Failure and recovery" above).
  Status create_user(std::string_view username, std::string_view password_hash) override;
  Status find_user(std::string_view username, User* out) override;
  Status end_sessions(std::string_view username) override;
  std::string describe() const override { return url_.describe(); }

 private:
  class Connection;  // one MYSQL handle and its prepared statements
  class Lease;       // a Connection lent to one call; returns it when done

  // Waits for a free slot and returns a usable connection (idle, checked,
  // or new), or nullptr with the slot already given back.
  std::unique_ptr<Connection> acquire();
  // Gives a slot back, keeping `conn` for the next call when it is healthy.
  void release(std::unique_ptr<Connection> conn, bool healthy);

  const MysqlUrl url_;
  const Options options_;

  std::mutex mu_;
  std::condition_variable slot_freed_;
  // Guarded by mu_. Connections lent out (or being opened) count against
  // pool_size as well as the idle ones here.
  std::vector<std::unique_ptr<Connection>> idle_;
  size_t lent_ = 0;
  // Bumped by every failure; an idle connection from an older epoch is
  // checked with a ping before it is lent again.
  uint64_t epoch_ = 0;
  // CREATE TABLE has succeeded once; read by connects outside mu_.
  std::atomic<bool> table_ready_{false};
};

}  // namespace tern::auth
