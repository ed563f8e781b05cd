// AccountKey: its JWK and thumbprint against values computed elsewhere
// (Python's cryptography package, for a fixed key), and its signatures
// verified by OpenSSL as a CA verifies them.
#include "acme/account_key.h"

#include <gtest/gtest.h>
#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "base/base64.h"

namespace tern::acme {
namespace {

constexpr const char* kKeyPem =
    "-----BEGIN PRIVATE KEY-----\n"
    "MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgEjRWeJCrze8SNFZ4\n"
    "kKvN7xI0VniQq83vEjRWeJCrze+hRANCAARHHD51jEkEKFu6flMRjtD1JK3rB1fS\n"
    "W9L457DXbfpxTN1SD3rKiouResw39R3o8Mm7462Fg4LnAtwloS0J96hY\n"
    "-----END PRIVATE KEY-----\n";
constexpr const char* kJwk =
    R"({"crv":"P-256","kty":"EC","x":"Rxw-dYxJBChbun5TEY7Q9SSt6wdX0lvS-Oew1236cUw",)"
    R"("y":"3VIPesqKi5F6zDf1HejwybvjrYWDgucC3CWhLQn3qFg"})";
constexpr const char* kThumbprint = "D8HvZq-fumkXpCwYIpjAPoqJx7WoEcJUS7tPPyIEJKI";

std::string base64url_decode(std::string text) {
  for (char& c : text) c = c == '-' ? '+' : c == '_' ? '/' : c;
  std::string out;
  EXPECT_TRUE(base64_decode(text, &out)) << text;
  return out;
}

// Whether `signature` (JWS's R || S, base64url) is the key's ES256
// signature of `input`.
bool verifies(std::string_view key_pem, std::string_view input, const std::string& signature) {
  const std::string raw = base64url_decode(signature);
  if (raw.size() != 64) return false;
  BIO* bio = BIO_new_mem_buf(key_pem.data(), static_cast<int>(key_pem.size()));
  EVP_PKEY* key = PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  ECDSA_SIG* sig = ECDSA_SIG_new();
  const auto* bytes = reinterpret_cast<const unsigned char*>(raw.data());
  ECDSA_SIG_set0(sig, BN_bin2bn(bytes, 32, nullptr), BN_bin2bn(bytes + 32, 32, nullptr));
  unsigned char* der = nullptr;
  const int der_size = i2d_ECDSA_SIG(sig, &der);
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  const bool ok = key != nullptr && EVP_DigestVerifyInit(ctx, nullptr, EVP_sha256(), nullptr, key) == 1 &&
                  EVP_DigestVerify(ctx, der, static_cast<size_t>(der_size),
                                   reinterpret_cast<const unsigned char*>(input.data()), input.size()) == 1;
  EVP_MD_CTX_free(ctx);
  OPENSSL_free(der);
  ECDSA_SIG_free(sig);
  EVP_PKEY_free(key);
  return ok;
}

TEST(AccountKey, JwkAndThumbprintAreRfc7638s) {
  const AccountKey key = AccountKey::from_pem(kKeyPem);
  EXPECT_EQ(key.jwk(), kJwk);
  EXPECT_EQ(key.thumbprint(), kThumbprint);
  EXPECT_EQ(key.key_authorization("evaGxfADs6pSRb2LAv9IZf17Dt3juxGJ-PCt92wr-oA"),
            std::string("evaGxfADs6pSRb2LAv9IZf17Dt3juxGJ-PCt92wr-oA.") + kThumbprint);
}

TEST(AccountKey, AGeneratedKeyComesBackFromItsPem) {
  const AccountKey key = AccountKey::generate();
  const AccountKey again = AccountKey::from_pem(key.pem());
  EXPECT_EQ(again.jwk(), key.jwk());
  EXPECT_NE(key.jwk(), AccountKey::generate().jwk());
  const nlohmann::json jwk = nlohmann::json::parse(key.jwk());
  EXPECT_EQ(jwk["x"].get<std::string>().size(), 43u);  // 32 bytes
  EXPECT_EQ(jwk["y"].get<std::string>().size(), 43u);
}

TEST(AccountKey, RefusesWhatIsNotAP256Key) {
  EXPECT_THROW(AccountKey::from_pem("not a key"), std::runtime_error);
  EVP_PKEY* other = EVP_EC_gen("secp384r1");
  BIO* bio = BIO_new(BIO_s_mem());
  PEM_write_bio_PrivateKey(bio, other, nullptr, nullptr, 0, nullptr, nullptr);
  char* data = nullptr;
  const std::string pem(data, static_cast<size_t>(BIO_get_mem_data(bio, &data)));
  BIO_free(bio);
  EVP_PKEY_free(other);
  try {
    AccountKey::from_pem(pem);
    FAIL() << "a P-384 key was taken";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "the account key is not an ECDSA P-256 key");
  }
}

TEST(AccountKey, SignsWithTheKeyInTheHeaderOrTheAccountsUrl) {
  const AccountKey key = AccountKey::from_pem(kKeyPem);
  const nlohmann::json body = nlohmann::json::parse(
      key.sign("https://ca.test/acme/new-acct", "nonce-1", "", R"({"termsOfServiceAgreed":true})"));
  const nlohmann::json header = nlohmann::json::parse(base64url_decode(body["protected"]));
  EXPECT_EQ(header, nlohmann::json::parse(std::string(R"({"alg":"ES256","nonce":"nonce-1",)") +
                                          R"("url":"https://ca.test/acme/new-acct","jwk":)" + kJwk + "}"));
  EXPECT_EQ(base64url_decode(body["payload"]), R"({"termsOfServiceAgreed":true})");
  const std::string input = body["protected"].get<std::string>() + "." + body["payload"].get<std::string>();
  EXPECT_TRUE(verifies(kKeyPem, input, body["signature"]));
  EXPECT_FALSE(verifies(kKeyPem, input + "x", body["signature"]));
  // A POST-as-GET names the account and has an empty payload.
  const nlohmann::json get = nlohmann::json::parse(
      key.sign("https://ca.test/acme/order/1", "nonce-2", "https://ca.test/acme/acct/7", ""));
  const nlohmann::json get_header = nlohmann::json::parse(base64url_decode(get["protected"]));
  EXPECT_EQ(get_header["kid"], "https://ca.test/acme/acct/7");
  EXPECT_FALSE(get_header.contains("jwk"));
  EXPECT_EQ(get["payload"], "");
  EXPECT_TRUE(verifies(kKeyPem, get["protected"].get<std::string>() + ".", get["signature"]));
}

}  // namespace
}  // namespace tern::acme
