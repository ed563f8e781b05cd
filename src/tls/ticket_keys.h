// TicketKeys: the keys that seal TLS session tickets, shared by every
// ServerContext of a process (all its workers, all its sites), so that a
// ticket one worker issued resumes on any other.
//
// A new key seals tickets every `rotation`; the key before it still opens
// them for one more period (and such a ticket is renewed under the current
// key), so a ticket lives at most two periods and a stolen key opens
// sessions of at most that long. Keys are random and held only in memory: a
// restart starts a fresh ring (clients then do a full handshake once).
//
// Thread-safe.
#pragma once

#include <openssl/evp.h>
#include <openssl/types.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <mutex>

namespace tern::tls {

class TicketKeys {
 public:
  explicit TicketKeys(std::chrono::seconds rotation = std::chrono::hours(1));

  std::chrono::seconds rotation() const { return rotation_; }

  // OpenSSL's ticket key callback (SSL_CTX_set_tlsext_ticket_key_evp_cb),
  // for a context whose ex_data slot ex_index() points to this ring.
  static int callback(SSL* ssl, unsigned char name[16], unsigned char iv[16], EVP_CIPHER_CTX* cipher,
                      EVP_MAC_CTX* mac, int encrypt);
  static int ex_index();

  // Rotations so far (tests).
  uint64_t generation() const;

 private:
  struct Key {
    std::array<unsigned char, 16> name{};
    std::array<unsigned char, 32> aes{};
    std::array<unsigned char, 32> hmac{};
    std::chrono::steady_clock::time_point made;
  };
  static Key fresh_key();
  int seal(unsigned char name[16], unsigned char iv[16], EVP_CIPHER_CTX* cipher, EVP_MAC_CTX* mac);
  int open(const unsigned char name[16], const unsigned char iv[16], EVP_CIPHER_CTX* cipher,
           EVP_MAC_CTX* mac);
  void rotate_if_due();  // mu_ held

  const std::chrono::seconds rotation_;
  mutable std::mutex mu_;
  Key current_;   // guarded by mu_
  Key previous_;  // guarded by mu_; opens tickets for one more period
  bool has_previous_ = false;
  uint64_t generation_ = 0;
};

}  // namespace tern::tls
