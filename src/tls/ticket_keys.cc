#include "tls/ticket_keys.h"

#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>

#include <cstring>
#include <stdexcept>

namespace tern::tls {
namespace {

// AES-256-CBC, fetched once: naming it by EVP_aes_256_cbc() makes OpenSSL 3
// look the implementation up again on every ticket.
const EVP_CIPHER* ticket_cipher() {
  static EVP_CIPHER* const cipher = EVP_CIPHER_fetch(nullptr, "AES-256-CBC", nullptr);
  return cipher != nullptr ? cipher : EVP_aes_256_cbc();
}

bool set_mac_key(EVP_MAC_CTX* mac, const unsigned char* key, size_t length) {
  char digest[] = "sha256";
  OSSL_PARAM params[] = {
      OSSL_PARAM_construct_octet_string(OSSL_MAC_PARAM_KEY, const_cast<unsigned char*>(key), length),
      OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
      OSSL_PARAM_construct_end(),
  };
  return EVP_MAC_CTX_set_params(mac, params) == 1;
}

}  // namespace

TicketKeys::TicketKeys(std::chrono::seconds rotation) : rotation_(rotation), current_(fresh_key()) {}

int TicketKeys::ex_index() {
  static const int index = SSL_CTX_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
  return index;
}

TicketKeys::Key TicketKeys::fresh_key() {
  Key key;
  if (RAND_bytes(key.name.data(), static_cast<int>(key.name.size())) != 1 ||
      RAND_bytes(key.aes.data(), static_cast<int>(key.aes.size())) != 1 ||
      RAND_bytes(key.hmac.data(), static_cast<int>(key.hmac.size())) != 1) {
    throw std::runtime_error("TLS ticket keys: no random bytes");
  }
  key.made = std::chrono::steady_clock::now();
  return key;
}

uint64_t TicketKeys::generation() const {
  std::lock_guard lock(mu_);
  return generation_;
}

void TicketKeys::rotate_if_due() {
  if (std::chrono::steady_clock::now() - current_.made < rotation_) return;
  previous_ = current_;
  has_previous_ = true;
  current_ = fresh_key();
  ++generation_;
}

int TicketKeys::callback(SSL* ssl, unsigned char name[16], unsigned char iv[16],
                         EVP_CIPHER_CTX* cipher, EVP_MAC_CTX* mac, int encrypt) {
  auto* keys = static_cast<TicketKeys*>(SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), ex_index()));
  if (keys == nullptr) return encrypt ? -1 : 0;
  try {
    if (encrypt) return keys->seal(name, iv, cipher, mac);
    const int verdict = keys->open(name, iv, cipher, mac);
    // TLS 1.3: a fresh ticket for every resumption (clients use a ticket
    // once); TLS 1.2 clients keep theirs until its key is the previous one.
    return verdict == 1 && SSL_version(ssl) == TLS1_3_VERSION ? 2 : verdict;
  } catch (const std::exception&) {
    return encrypt ? -1 : 0;
  }
}

int TicketKeys::seal(unsigned char name[16], unsigned char iv[16], EVP_CIPHER_CTX* cipher,
                     EVP_MAC_CTX* mac) {
  std::lock_guard lock(mu_);
  rotate_if_due();
  if (RAND_bytes(iv, EVP_MAX_IV_LENGTH) != 1) return -1;
  std::memcpy(name, current_.name.data(), current_.name.size());
  if (EVP_EncryptInit_ex(cipher, ticket_cipher(), nullptr, current_.aes.data(), iv) != 1) return -1;
  if (!set_mac_key(mac, current_.hmac.data(), current_.hmac.size())) return -1;
  return 1;
}

int TicketKeys::open(const unsigned char name[16], const unsigned char iv[16], EVP_CIPHER_CTX* cipher,
                     EVP_MAC_CTX* mac) {
  std::lock_guard lock(mu_);
  rotate_if_due();
  const Key* key = nullptr;
  int verdict = 1;  // valid
  if (std::memcmp(name, current_.name.data(), current_.name.size()) == 0) {
    key = &current_;
  } else if (has_previous_ && std::memcmp(name, previous_.name.data(), previous_.name.size()) == 0 &&
             std::chrono::steady_clock::now() - previous_.made < 2 * rotation_) {
    key = &previous_;
    verdict = 2;  // valid, and to be renewed under the current key
  }
  if (key == nullptr) return 0;  // unknown or too old: a full handshake
  if (!set_mac_key(mac, key->hmac.data(), key->hmac.size())) return -1;
  if (EVP_DecryptInit_ex(cipher, ticket_cipher(), nullptr, key->aes.data(), iv) != 1) return -1;
  return verdict;
}

}  // namespace tern::tls
