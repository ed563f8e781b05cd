// auth_basic: a location's requests carry the credentials of a user of an
// htpasswd file (RFC 7617), or are answered 401 with a challenge naming the
// realm. After the location's limits and allow/deny, before its methods and
// handler (nginx's access phase, `satisfy all`).
//
// A password check costs what its hash costs (bcrypt: milliseconds), so it
// runs on the task threads: the request waits as an exchange, its body
// held, and goes on through the chain (resume_on) once the check is back.
// Successes are remembered for a few minutes (a browser sends the same
// credentials with every request), by a keyed hash of the user and password
// in a table the loops share; what misses it counts against the address's
// `attempts` a minute, beyond which 429 comes without a check. The user a
// request proved is its remote_user() ($remote_user, REMOTE_USER). The
// file is read when the configuration is (start, SIGHUP).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "auth/htpasswd.h"
#include "auth/rate_limiter.h"
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
class BasicUsers {
 public:
  // Reads `path`; throws std::runtime_error naming it (and the line).
  BasicUsers(const std::string& path, uint32_t attempts);

  const auth::Htpasswd& file() const { return file_; }
  // A success for (user, password) within the last kRemembered.
  uint64_t key(std::string_view user, std::string_view password) const;
  bool remembered(uint64_t key, int64_t now_ms);
  void remember(uint64_t key, int64_t now_ms);
  // Counts a check for `client`; false (and *retry_after, seconds) when it
  // has had its attempts this minute.
  bool may_check(const net::InetAddress& client, int64_t now_s, int64_t* retry_after);

  static constexpr int64_t kRememberedMs = 5 * 60 * 1000;

 private:
  auth::Htpasswd file_;
  KeyTable<int64_t> successes_;  // until when, ms
  auth::RateLimiter checks_;
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
  // claim() once the field is decoded.
  Claim claim_checked(Route& route, std::string_view user, std::string_view password);

  std::shared_ptr<BasicUsers> users_;
  std::string challenge_;  // the WWW-Authenticate value
  const Chain* chain_;
  TaskPool* tasks_;
};

// The user and password of an Authorization field of the Basic scheme,
// decoded into *scratch (which the views then point into); false when the
// field is absent, of another scheme or malformed.
bool basic_credentials(std::string_view field, std::string* scratch, std::string_view* user,
                       std::string_view* password);

}  // namespace tern::server
