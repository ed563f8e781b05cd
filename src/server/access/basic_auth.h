// auth_basic: a location's requests carry the credentials of a user of an
// htpasswd file (RFC 7617), or are answered 401 with a challenge naming the
// realm. After the location's limits and allow/deny, before its methods and
// handler (nginx's access phase, `satisfy all`).
//
// A password check costs what its hash costs (bcrypt: milliseconds), so it
// runs on the task threads: the request waits as an exchange, its body
// held, and goes on through the chain (resume_on) once the check is back.
// Successes are remembered for a few minutes from their last use (a
// browser sends the same credentials with every request), by a keyed hash
// of the user and password in a table the loops share; requests that bring
// the same credentials while they are being checked wait for that check;
// each check counts against the address's `attempts` a minute, beyond
// which 429 comes without one. The user a
// request proved is its remote_user() ($remote_user, REMOTE_USER). The
// file is read when the configuration is (start, SIGHUP).
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "auth/htpasswd.h"
#include "auth/rate_limiter.h"
#include "http/exchange.h"
#include "server/config/config.h"
#include "server/handler.h"
#include "server/limits/key_table.h"

namespace tern {
class TaskPool;
}

namespace tern::server {

class Chain;

// One htpasswd file as a configuration loaded it, with its successes and
// its attempts per address. Shared by the loops; thread-safe.
class BasicAuthHandler;

class BasicUsers {
 public:
  // Reads `path`; throws std::runtime_error naming it (and the line).
  BasicUsers(const std::string& path, uint32_t attempts);

  const auth::Htpasswd& file() const { return file_; }
  // The key of the decoded credentials "user:password" (as
  // basic_credentials() leaves them in its scratch); remembered(): a
  // success for them within the last kRememberedMs (which starts again
  // with each use).
  uint64_t key(std::string_view credentials) const;
  bool remembered(uint64_t key, int64_t now_ms);
  void remember(uint64_t key, int64_t now_ms);

  // A request waiting for a check, and the handler that answers it.
  struct Waiter {
    http::ExchangeId id;
    const BasicAuthHandler* handler;
  };
  // The check of `key` for `waiter`: joined to one in flight (the same
  // credentials, from any loop: one check answers them all), refused
  // (`client` has had its `attempts` this minute; *retry_after, seconds),
  // or to be made (and end() called when it is done).
  enum class Begin { kJoined, kRefused, kCheck };
  Begin begin(uint64_t key, const Waiter& waiter, const net::InetAddress& client, int64_t now_s,
              int64_t* retry_after);
  // The requests that waited for the check of `key`, which is over.
  std::vector<Waiter> end(uint64_t key);

  static constexpr int64_t kRememberedMs = 5 * 60 * 1000;

 private:
  auth::Htpasswd file_;
  KeyTable<int64_t> successes_;  // until when, ms
  auth::RateLimiter checks_;
  std::mutex pending_mu_;
  std::unordered_map<uint64_t, std::vector<Waiter>> pending_;  // guarded by pending_mu_
};

class BasicAuthHandler final : public Handler {
 public:
  // `chain` takes the requests back once checked (it outlives them: each
  // exchange keeps it); `tasks` checks the passwords.
  BasicAuthHandler(std::shared_ptr<BasicUsers> users, const AuthBasicConfig& config, const Chain* chain,
                   TaskPool* tasks);
  Claim claim(Route& route) override;
  void respond(const Route& route, http::ResponseWriter& writer) override;
  void start(const Route& route, http::Exchange& exchange) override;

 private:
  // Answers 401 with the challenge.
  void refuse(http::Exchange& exchange) const;

  std::shared_ptr<BasicUsers> users_;
  std::string challenge_;  // the WWW-Authenticate value
  const Chain* chain_;
  TaskPool* tasks_;
};

// The user and password of an Authorization field of the Basic scheme,
// decoded into *scratch ("user:password", which the views then point
// into); false when the field is absent, of another scheme or malformed.
bool basic_credentials(std::string_view field, std::string* scratch, std::string_view* user,
                       std::string_view* password);

}  // namespace tern::server
