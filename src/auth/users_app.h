// UsersApp: register, log in, who am I, log out, as a JSON API on a
// UserStore.
//
//   POST /api/register {"username","password"}  201 {"username"} | 400 | 409 | 429
//   POST /api/login    {"username","password"}  200 {"username"} + session cookie | 401 | 429
//   GET  /api/me                                 200 {"username"} | 401
//   POST /api/logout                             204, cookie cleared, every session ended
//
// Requests that send data must send it as application/json (415 otherwise:
// a cross-site HTML form cannot send that type, which keeps the API out of
// reach of login and logout CSRF). Passwords are hashed with argon2id
// (libsodium); sessions are signed cookies (session.h) carrying the user's
// session generation, which /api/me checks against the store and logout
// moves on, so a logout ends the user's sessions on every node. Names are
// unique without regard to case. Registrations are limited per client
// address per hour, logins per address per minute and per account with a
// doubling back-off (429 with Retry-After); an IPv6 client counts as its
// /64, which one host usually holds whole. Every response says
// Cache-Control: no-store. Hashing and the database run on the TaskPool; the
// answer is posted back to the connection's loop, so no I/O loop ever waits.
// A database that cannot be reached is a 503 and an error-log line, and the
// next request tries again.
//
// Errors are {"error": "message"}. Owned by the Server; route() is called on
// the I/O loops.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "auth/login_throttle.h"
#include "auth/rate_limiter.h"
#include "auth/session_signer.h"
#include "auth/user_store.h"
#include "base/result.h"
#include "base/task_pool.h"
#include "http/exchange.h"

namespace tern::auth {

struct UsersOptions {
  std::string secret;                    // session signing key
  uint64_t password_ops = 2;             // argon2id opslimit
  size_t password_memory = 64 << 20;     // argon2id memlimit, bytes
  std::chrono::seconds session_ttl{7 * 24 * 3600};
  uint32_t login_attempts = 10;          // per client address per minute
  uint32_t register_attempts = 20;       // per client address per hour
  uint32_t account_login_failures = 5;   // in a row, before the account backs off
  std::chrono::seconds account_backoff{30};  // the first back-off; it doubles...
  std::chrono::seconds max_account_backoff{3600};  // ...up to this
};

class UsersApp {
 public:
  UsersApp(std::unique_ptr<UserStore> store, const UsersOptions& options, TaskPool* tasks);
  ~UsersApp();
  UsersApp(const UsersApp&) = delete;
  UsersApp& operator=(const UsersApp&) = delete;

  // The handler for this request, or nullptr when it is not the app's.
  const http::ExchangeHandler* route(const http::Request& request) const;

  const UserStore& store() const { return *store_; }

 private:

  void on_register(http::Exchange& exchange);
  void on_login(http::Exchange& exchange);
  void on_me(http::Exchange& exchange);
  void on_logout(http::Exchange& exchange);
  // Gathers a JSON body, then calls `then` with the username and password.
  void read_credentials(http::Exchange& exchange,
                        void (UsersApp::*then)(http::Exchange&, std::string, std::string));
  void do_register(http::Exchange& exchange, std::string username, std::string password);
  void do_login(http::Exchange& exchange, std::string username, std::string password);
  // Runs a task for an exchange (503 when the task queue is full); its
  // answer comes back through answer_later() in users_app.cc.
  void run_task(http::Exchange& exchange, std::function<void()> task);
  void end_sessions(http::Exchange& exchange, std::string username);

  std::unique_ptr<UserStore> store_;
  const UsersOptions options_;
  TaskPool* const tasks_;
  SessionSigner signer_;
  RateLimiter login_limiter_;
  RateLimiter register_limiter_;
  LoginThrottle account_throttle_;
  std::string dummy_hash_;  // verified against for unknown users: same time either way
  http::ExchangeHandler register_, login_, me_, logout_;
};

// The session secret kept at `path` (created with 32 random bytes, mode
// 0600, when missing): lets a single SQLite node keep sessions across
// restarts without configuring one.
Result<std::string> load_or_create_secret(const std::string& path);

}  // namespace tern::auth
