// AcmeManager: the certificates of the sites with [server.tls] acme = true,
// obtained from the [acme] CA and renewed, on a thread of its own (the CA
// is reached by blocking HTTPS: never on a loop).
//
//   start: prepare() writes a self-signed stand-in where a site has no
//          certificate yet, so its TLS loads (and says why in the log)
//   thread: for each site's certificate, when it is a stand-in, names
//          other names than the site's, has passed its renewal point (two
//          thirds of its lifetime, or renew_before its end) or the CA's
//          renewal information (RFC 9773) says so: order it (HTTP-01 by
//          AcmeChallenges), write key and chain into the storage, and call
//          `installed` (the server applies them to new handshakes). A
//          failure is logged with the CA's problem document and tried
//          again after retry_after, doubled each time up to check_interval
//          (or when a rate limit's Retry-After says).
//
// Nodes sharing the storage take its lock to order: the one that has it
// orders; the others find the new files on their next look (every minute,
// or check_interval when shorter) and install them.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "acme/certificates.h"
#include "server/acme/acme_challenges.h"
#include "server/acme/acme_storage.h"
#include "server/config/config.h"

namespace tern::acme {
class AcmeClient;
class AccountKey;
class HttpsClient;
}  // namespace tern::acme

namespace tern::server {

// What the manager knows of one site's certificate, for the status page
// and the metrics.
struct AcmeCertificateStatus {
  std::vector<std::string> names;
  int64_t not_after = 0;    // Unix seconds; 0: none readable
  bool self_signed = true;  // the stand-in, not the CA's yet
  // The last order: "issued", "failed: WHY", or "" before any.
  std::string last_result;
  int64_t last_attempt = 0;  // Unix seconds
  int64_t last_issued = 0;
};

class AcmeManager {
 public:
  // The names of each site with acme, the first naming its files.
  static std::vector<std::vector<std::string>> sites(const Config& config);

  // Creates the storage (0700, given to the user the process becomes) and
  // a self-signed certificate for each site that has none. Throws
  // std::runtime_error naming what cannot be written.
  static void prepare(const Config& config);

  // `installed` is called on the manager's thread after new certificate
  // files were written (here or by another node).
  AcmeManager(const Config& config, std::shared_ptr<AcmeChallenges> challenges, std::function<void()> installed);
  ~AcmeManager();  // stops the thread (an order in progress is given up)
  AcmeManager(const AcmeManager&) = delete;
  AcmeManager& operator=(const AcmeManager&) = delete;

  // Starts the thread (as the user the process became: its files are
  // that user's).
  void start();

  std::vector<AcmeCertificateStatus> status() const;
  // Whether `config` asks for what this one does (a reload keeps it).
  bool same(const Config& config) const;

 private:
  struct Certificate {
    std::vector<std::string> names;
    std::string cert_path;
    std::string key_path;
    std::string loaded;  // the chain as last read or written
    std::optional<acme::CertificateFacts> facts;  // loaded's; nullopt: it does not parse
    // The CA's last renewal window (RFC 9773) and the moment in it this
    // node picked, kept while the window stays the same.
    int64_t window_start = 0;
    int64_t window_end = 0;
    int64_t renew_at = 0;
    std::chrono::steady_clock::time_point retry_at{};
    std::chrono::milliseconds backoff{0};
    AcmeCertificateStatus status;
  };

  void run();
  // Reads the certificate's file: true when it changed since last read.
  bool reread(Certificate& c);
  // Whether `c` should be ordered now (`ask_ca`: the CA's renewal
  // information may be asked).
  bool due(Certificate& c, bool ask_ca);
  // Orders `c` (the storage's lock held). Throws what failed.
  void order(Certificate& c);
  void failed(Certificate& c, const std::string& why, std::chrono::seconds retry_after);
  // The account, made or found at the first order.
  acme::AcmeClient& client();
  // Waits up to `delay`; false when stopping.
  bool wait(std::chrono::milliseconds delay);

  const AcmeConfig config_;
  const std::chrono::milliseconds look_;  // how often the files are looked at
  const AcmeStorage storage_;
  const std::shared_ptr<AcmeChallenges> challenges_;
  const std::function<void()> installed_;
  std::vector<Certificate> certificates_;  // the thread's; status_ copies
  std::unique_ptr<acme::HttpsClient> https_;
  std::unique_ptr<acme::AccountKey> key_;
  std::unique_ptr<acme::AcmeClient> client_;

  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;                     // guarded by mu_
  std::vector<AcmeCertificateStatus> status_;  // guarded by mu_
  std::thread thread_;
};

}  // namespace tern::server
