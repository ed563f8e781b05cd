// AccountKey: an ACME account's key (ECDSA on P-256) and what it signs:
// every request to the CA is a JSON Web Signature (RFC 7515) in the
// flattened serialization, with ES256, as RFC 8555 section 6.2 asks.
//
//   AccountKey key = AccountKey::generate();          // once; kept as key.pem()
//   // newAccount: the key itself in the protected header ("jwk")
//   std::string body = key.sign(new_account_url, nonce, "", R"({"termsOfServiceAgreed":true})");
//   // later requests name the account ("kid"); an empty payload is a POST-as-GET
//   std::string body = key.sign(order_url, nonce, account_url, "");
//   std::string answer = key.key_authorization(challenge_token);   // token.thumbprint
//
// A value: movable, not copyable. Thread-safe for const use.
#pragma once

#include <memory>
#include <string>
#include <string_view>

struct evp_pkey_st;  // OpenSSL's EVP_PKEY

namespace tern::acme {

class AccountKey {
 public:
  // A new key.
  static AccountKey generate();
  // The key in `pem` (PKCS #8 or SEC 1, unencrypted). Throws
  // std::runtime_error when it holds no P-256 private key.
  static AccountKey from_pem(std::string_view pem);

  AccountKey(AccountKey&&) noexcept;
  AccountKey& operator=(AccountKey&&) noexcept;
  ~AccountKey();

  // The private key, PKCS #8 PEM: what storage keeps.
  std::string pem() const;
  // The public key as a JWK in RFC 7638's form (its members in order, no
  // white space): {"crv":"P-256","kty":"EC","x":"...","y":"..."}.
  const std::string& jwk() const { return jwk_; }
  // base64url(SHA-256(jwk())): the account's name in key authorizations.
  std::string thumbprint() const;
  // What an HTTP-01 or TLS-ALPN-01 challenge of `token` is answered with
  // (RFC 8555 section 8.1).
  std::string key_authorization(std::string_view token) const;

  // The body of a request to `url`: the JWS of `payload` (JSON; empty for a
  // POST-as-GET) whose protected header holds alg ES256, the CA's `nonce`,
  // the url, and the account's URL as "kid" or, when `kid` is empty, the
  // key as "jwk".
  std::string sign(std::string_view url, std::string_view nonce, std::string_view kid,
                   std::string_view payload) const;
  // The ES256 signature of `input`: R and S, 32 bytes each, as JWS writes
  // it (RFC 7518 section 3.4), base64url.
  std::string signature(std::string_view input) const;

 private:
  explicit AccountKey(evp_pkey_st* key);

  struct Free {
    void operator()(evp_pkey_st* key) const;
  };
  std::unique_ptr<evp_pkey_st, Free> key_;
  std::string jwk_;
};

}  // namespace tern::acme
