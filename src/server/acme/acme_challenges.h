// AcmeChallenges: the answers to the CA's validations while an order is
// pending. HTTP-01 (RFC 8555 section 8.3): a token's key authorization at
// /.well-known/acme-challenge/TOKEN, kept in memory and in the storage's
// challenges/ folder, so that every node sharing the storage answers what
// one of them asked for. AcmeChallengeHandler answers them first thing,
// before any location, redirect or dotfile rule of a site (Chain::resolve).
// TLS-ALPN-01 (RFC 8737): a name's challenge certificate, given to the
// handshakes of every TLS address (tls::AlpnChallenges), on this node.
//
// Published and withdrawn by the AcmeManager's thread, read by the loops:
// thread-safe.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "server/acme/acme_storage.h"
#include "server/handler.h"
#include "tls/server_context.h"

namespace tern::server {

class AcmeChallenges {
 public:
  static constexpr std::string_view kHttpPrefix = "/.well-known/acme-challenge/";

  explicit AcmeChallenges(AcmeStorage storage) : storage_(std::move(storage)) {}

  // Answers `token` with `key_authorization` from now on (here, and in the
  // storage for the other nodes). Throws std::runtime_error when the
  // storage cannot be written.
  void publish(const std::string& token, const std::string& key_authorization);
  void withdraw(const std::string& token);
  // The key authorization for `token`: this node's, else one another node
  // left in the storage; nullopt when neither has it.
  std::optional<std::string> answer(std::string_view token) const;

  // The TLS-ALPN-01 certificates, for the TLS addresses' settings.
  const std::shared_ptr<tls::AlpnChallenges>& alpn() const { return alpn_; }

 private:
  const AcmeStorage storage_;
  const std::shared_ptr<tls::AlpnChallenges> alpn_ = std::make_shared<tls::AlpnChallenges>();
  mutable std::mutex mu_;
  std::map<std::string, std::string, std::less<>> tokens_;  // guarded by mu_
};

// GET /.well-known/acme-challenge/TOKEN: 200 with the key authorization, as
// text. A token nobody published passes on (to the site's own files).
class AcmeChallengeHandler final : public Handler {
 public:
  explicit AcmeChallengeHandler(std::shared_ptr<const AcmeChallenges> challenges)
      : challenges_(std::move(challenges)) {}
  Claim claim(Route& route) override;
  void respond(const Route& route, http::ResponseWriter& writer) override;

 private:
  std::shared_ptr<const AcmeChallenges> challenges_;
};

}  // namespace tern::server
