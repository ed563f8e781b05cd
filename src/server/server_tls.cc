// Server's HTTPS: the TLS settings of the addresses marked "tls" (from the
// sites, tls_setup.cc), installed on the TcpServer, updated on SIGHUP, and
// the once-a-minute line on handshakes and resumptions.
#include <algorithm>
#include <string>

#include "base/log.h"
#include "server/acme/acme_challenges.h"
#include "server/chain.h"
#include "server/server.h"

namespace tern::server {

std::vector<TlsAddress> Server::tls_for(const Config& config, const Chain& chain, const AcmeChallenges* acme) const {
  std::vector<std::string> warnings;
  std::vector<TlsAddress> addresses =
      tls_settings(config, chain.shared_sites(), ticket_keys_, &warnings, acme != nullptr ? acme->alpn() : nullptr);
  for (const std::string& warning : warnings) TERN_LOG_WARN("tls: {}", warning);
  return addresses;
}

void Server::apply_tls(std::vector<TlsAddress> addresses) {
  bool kernel_tls = false;
  for (TlsAddress& entry : addresses) {
    kernel_tls = kernel_tls || entry.settings.kernel_tls;
    const size_t identities = entry.settings.identities.size();
    std::string alpn;
    for (const std::string& name : entry.settings.alpn) alpn += (alpn.empty() ? "" : ", ") + name;
    auto known = std::find_if(tls_.begin(), tls_.end(), [&](const auto& e) { return e.first == entry.address; });
    if (known != tls_.end()) {
      known->second->update(std::move(entry.settings));
    } else {
      auto context = std::make_shared<tls::ServerContext>(std::move(entry.settings));
      http_->tcp_server().set_secure_context(entry.address, context);
      std::lock_guard lock(tls_mu_);
      tls_.emplace_back(entry.address, std::move(context));
    }
    TERN_LOG_INFO("tls: {}: {} certificate set{}, TLS 1.2 and 1.3, ALPN {}, {}", entry.address.to_ip_port(),
                  identities, identities == 1 ? "" : "s (chosen by SNI)", alpn,
                  ticket_keys_ ? fmt::format("session tickets (keys rotated every {} s)",
                                             ticket_keys_->rotation().count())
                               : std::string("no session tickets"));
  }
  if (!tls_.empty() && !tls_stats_timer_.valid()) {
    tls_stats_timer_ = loop_->run_every(std::chrono::minutes(1), [this] { log_tls_stats(); });
    // How HTTPS file bodies leave, said once.
    if (kernel_tls && tls::kernel_tls_available()) {
      TERN_LOG_INFO("tls: kernel TLS: connections whose cipher the kernel has send through it, files by "
                    "sendfile; others read file bodies in 64 KiB steps into the TLS stream");
    } else {
      TERN_LOG_INFO("tls: file bodies are read in 64 KiB steps into the TLS stream ({})",
                    kernel_tls ? "this kernel offers no kernel TLS" : "kernel_tls = false");
    }
  }
}

tls::Stats Server::tls_totals() const {
  tls::Stats total;
  std::lock_guard lock(tls_mu_);
  for (const auto& [address, context] : tls_) {
    const tls::Stats s = context->stats();
    total.handshakes += s.handshakes;
    total.resumed += s.resumed;
    total.failed += s.failed;
    total.kernel += s.kernel;
  }
  return total;
}

void Server::log_tls_stats() {
  const tls::Stats now = tls_totals();
  const uint64_t handshakes = now.handshakes - tls_logged_.handshakes;
  const uint64_t resumed = now.resumed - tls_logged_.resumed;
  const uint64_t failed = now.failed - tls_logged_.failed;
  const uint64_t kernel = now.kernel - tls_logged_.kernel;
  tls_logged_ = now;
  if (handshakes == 0 && failed == 0) return;
  TERN_LOG_INFO("tls: {} handshake(s) in the last minute, {} resumed ({:.0f}%), {} failed{}", handshakes, resumed,
                handshakes > 0 ? 100.0 * static_cast<double>(resumed) / static_cast<double>(handshakes) : 0.0,
                failed, kernel > 0 ? fmt::format(", {} sending through kernel TLS", kernel) : std::string());
}

}  // namespace tern::server
