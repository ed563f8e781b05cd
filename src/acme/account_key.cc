#include "acme/account_key.h"

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include <cstring>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <utility>

#include "acme/certificates.h"
#include "base/base64.h"
#include "tls/openssl_layer.h"

namespace tern::acme {
namespace {

using tls::throw_openssl_error;

constexpr size_t kCoordinate = 32;  // bytes of a P-256 coordinate, and of R and S

// A coordinate of the public point, base64url of its 32 bytes.
std::string coordinate(EVP_PKEY* key, const char* name) {
  BIGNUM* value = nullptr;
  if (EVP_PKEY_get_bn_param(key, name, &value) != 1) throw_openssl_error("reading the account key");
  unsigned char bytes[kCoordinate];
  const int written = BN_bn2binpad(value, bytes, sizeof bytes);
  BN_free(value);
  if (written != static_cast<int>(kCoordinate)) throw_openssl_error("reading the account key");
  return base64url_encode(std::string_view(reinterpret_cast<const char*>(bytes), sizeof bytes));
}

std::string make_jwk(EVP_PKEY* key) {
  // nlohmann's objects keep their members in order: RFC 7638's form.
  const nlohmann::json jwk = {{"crv", "P-256"}, {"kty", "EC"},
                              {"x", coordinate(key, OSSL_PKEY_PARAM_EC_PUB_X)},
                              {"y", coordinate(key, OSSL_PKEY_PARAM_EC_PUB_Y)}};
  return jwk.dump();
}

bool is_p256(EVP_PKEY* key) {
  char group[64];
  size_t length = 0;
  return EVP_PKEY_is_a(key, "EC") == 1 &&
         EVP_PKEY_get_utf8_string_param(key, OSSL_PKEY_PARAM_GROUP_NAME, group, sizeof group, &length) == 1 &&
         std::strcmp(group, SN_X9_62_prime256v1) == 0;
}

}  // namespace

void AccountKey::Free::operator()(evp_pkey_st* key) const { EVP_PKEY_free(key); }

AccountKey::AccountKey(evp_pkey_st* key) : key_(key), jwk_(make_jwk(key)) {}
AccountKey::AccountKey(AccountKey&&) noexcept = default;
AccountKey& AccountKey::operator=(AccountKey&&) noexcept = default;
AccountKey::~AccountKey() = default;

AccountKey AccountKey::generate() {
  EVP_PKEY* key = EVP_EC_gen(SN_X9_62_prime256v1);
  if (key == nullptr) throw_openssl_error("making an account key");
  return AccountKey(key);
}

AccountKey AccountKey::from_pem(std::string_view pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  if (bio == nullptr) throw_openssl_error("reading the account key");
  EVP_PKEY* key = PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  if (key == nullptr) throw_openssl_error("reading the account key");
  if (!is_p256(key)) {
    EVP_PKEY_free(key);
    throw std::runtime_error("the account key is not an ECDSA P-256 key");
  }
  return AccountKey(key);
}

std::string AccountKey::pem() const { return private_key_pem(key_.get()); }

std::string AccountKey::thumbprint() const {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  if (EVP_Digest(jwk_.data(), jwk_.size(), digest, &size, EVP_sha256(), nullptr) != 1) {
    throw_openssl_error("hashing the account key");
  }
  return base64url_encode(std::string_view(reinterpret_cast<const char*>(digest), size));
}

std::string AccountKey::key_authorization(std::string_view token) const {
  std::string out(token);
  out += '.';
  out += thumbprint();
  return out;
}

std::string AccountKey::signature(std::string_view input) const {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  size_t der_size = 0;
  unsigned char der[128];  // an ECDSA-Sig-Value of P-256 takes at most 72
  const bool signed_ok = ctx != nullptr &&
                         EVP_DigestSignInit(ctx, nullptr, EVP_sha256(), nullptr, key_.get()) == 1 &&
                         EVP_DigestSign(ctx, nullptr, &der_size, reinterpret_cast<const unsigned char*>(input.data()),
                                        input.size()) == 1 &&
                         der_size <= sizeof der &&
                         EVP_DigestSign(ctx, der, &der_size, reinterpret_cast<const unsigned char*>(input.data()),
                                        input.size()) == 1;
  EVP_MD_CTX_free(ctx);
  if (!signed_ok) throw_openssl_error("signing a request");
  // DER's SEQUENCE of two INTEGERs to JWS's R || S.
  const unsigned char* from = der;
  ECDSA_SIG* sig = d2i_ECDSA_SIG(nullptr, &from, static_cast<long>(der_size));
  if (sig == nullptr) throw_openssl_error("signing a request");
  unsigned char raw[2 * kCoordinate];
  const bool whole = BN_bn2binpad(ECDSA_SIG_get0_r(sig), raw, kCoordinate) == kCoordinate &&
                     BN_bn2binpad(ECDSA_SIG_get0_s(sig), raw + kCoordinate, kCoordinate) == kCoordinate;
  ECDSA_SIG_free(sig);
  if (!whole) throw_openssl_error("signing a request");
  return base64url_encode(std::string_view(reinterpret_cast<const char*>(raw), sizeof raw));
}

std::string AccountKey::sign(std::string_view url, std::string_view nonce, std::string_view kid,
                             std::string_view payload) const {
  nlohmann::json header = {{"alg", "ES256"}, {"nonce", nonce}, {"url", url}};
  if (kid.empty()) {
    header["jwk"] = nlohmann::json::parse(jwk_);
  } else {
    header["kid"] = kid;
  }
  const std::string protected_part = base64url_encode(header.dump());
  const std::string payload_part = base64url_encode(payload);
  std::string input = protected_part;
  input += '.';
  input += payload_part;
  const nlohmann::json body = {{"protected", protected_part}, {"payload", payload_part},
                               {"signature", signature(input)}};
  return body.dump();
}

}  // namespace tern::acme
