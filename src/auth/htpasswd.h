// Htpasswd: the users of an Apache htpasswd file, for basic auth
// (server/access/basic_auth.h). Each line is "user:hash", what follows
// another ':' a comment; blank lines and lines starting with '#' are
// skipped. The hashes htpasswd(1) writes:
//
//   $2y$ (also $2a$, $2b$)  bcrypt: htpasswd -B, the recommended one
//   $5$, $6$                SHA-256-crypt, SHA-512-crypt: htpasswd -2, -5
//   $apr1$                  Apache's MD5 (htpasswd -m): weak, with a warning
//   {SHA}                   one SHA-1 of the password, unsalted (htpasswd -s):
//                           weak, with a warning
//
// Anything else (DES crypt, plain text) is refused at load, naming the
// line. bcrypt and the SHA-crypts go through libcrypt (crypt_rn), apr1 and
// {SHA} through OpenSSL's digests.
//
// verify() costs what the scheme costs (bcrypt at cost 10: tens of
// milliseconds): call it on a task thread, never on a loop. It compares in
// constant time, and a user not in the file is checked against another
// user's hash, so that a missing name takes as long as a wrong password.
// Immutable once loaded; any thread.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>


namespace tern::auth {

class Htpasswd {
 public:
  // Reads `path`. *warnings gets a line for each user of a weak scheme.
  // Throws std::runtime_error naming the file (and the line) when it
  // cannot be read or a line is not one htpasswd writes.
  static Htpasswd load(const std::string& path, std::vector<std::string>* warnings);
  // The same from the file's text; `name` is for messages.
  static Htpasswd parse(std::string_view text, std::string_view name, std::vector<std::string>* warnings);

  // Whether `password` is `user`'s (false for an unknown user, after as
  // long as a known one takes).
  bool verify(std::string_view user, std::string_view password) const;

  size_t size() const { return users_.size(); }

 private:
  std::unordered_map<std::string, std::string> users_;  // user -> hash
  std::string decoy_;  // a hash an unknown user is checked against
};

// Whether `password` hashes to `hash` (one of the schemes above).
bool password_matches(std::string_view hash, std::string_view password);

}  // namespace tern::auth
