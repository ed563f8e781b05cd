// Sessions as signed cookies: the cookie itself says who is logged in, which
// generation of that user's sessions it belongs to, and until when, with an
// HMAC-SHA-256 over all three, so no session table is needed and any tern
// node holding the same secret accepts it. The generation is the store's
// (UserStore::User::session_generation): logging out moves it on, and every
// cookie signed with the old one stops working on every node.
//
//   value = base64url(username) "." generation "." expiry-seconds "." base64url(mac)
//
// Loop threads; the signer is immutable after construction.
#pragma once

#include <sodium.h>

#include <array>
#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace tern::auth {

class SessionSigner {
 public:
  static constexpr std::string_view kCookieName = "tern_session";

  // `secret`: any length; hashed into the MAC key.
  SessionSigner(std::string_view secret, std::chrono::seconds ttl);

  struct Session {
    std::string username;
    uint64_t generation = 0;
  };

  // The cookie value for `username` at `generation`, valid for ttl from
  // `now` (Unix time).
  std::string sign(std::string_view username, uint64_t generation, int64_t now) const;
  // The session, if `value` is untampered and not expired at `now`. Whether
  // its generation is still the user's is for the caller to ask the store.
  std::optional<Session> verify(std::string_view value, int64_t now) const;
  std::chrono::seconds ttl() const { return ttl_; }

  // The tern_session value in a Cookie header ("a=1; tern_session=...").
  static std::string_view find_cookie(std::string_view cookie_header);

 private:
  std::string mac(std::string_view message) const;

  std::array<unsigned char, crypto_auth_hmacsha256_KEYBYTES> key_;
  std::chrono::seconds ttl_;
};

}  // namespace tern::auth
