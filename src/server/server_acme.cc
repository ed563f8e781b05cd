// Server's automatic HTTPS: the ACME manager and the answers to the CA's
// validations for the sites with tls.acme (server/acme), made at start,
// kept or replaced on SIGHUP, and the certificates it installs.
#include "base/log.h"
#include "net/event_loop.h"
#include "server/acme/acme_manager.h"
#include "server/chain.h"
#include "server/server.h"

namespace tern::server {

std::shared_ptr<AcmeChallenges> Server::acme_challenges_for(const Config& config) const {
  if (AcmeManager::sites(config).empty()) return nullptr;
  AcmeManager::prepare(config);
  if (acme_ != nullptr && acme_->same(config)) return acme_challenges_;
  return std::make_shared<AcmeChallenges>(AcmeStorage(config.acme.storage));
}

void Server::start_acme(const Config& config, std::shared_ptr<AcmeChallenges> challenges) {
  if (challenges == acme_challenges_ && (acme_ != nullptr) == (challenges != nullptr)) return;
  std::unique_ptr<AcmeManager> old;
  {
    std::lock_guard lock(acme_mu_);
    old = std::move(acme_);
  }
  old.reset();  // an order in progress is given up
  acme_challenges_ = std::move(challenges);
  if (acme_challenges_ == nullptr) return;
  auto manager = std::make_unique<AcmeManager>(config, acme_challenges_, [this] {
    loop_->queue_in_loop([this] { reload_certificates(); });
  });
  // As the user the process becomes (announce_ready); on a reload, now.
  if (ready_) manager->start();
  std::lock_guard lock(acme_mu_);
  acme_ = std::move(manager);
}

void Server::reload_certificates() {
  try {
    apply_tls(tls_for(*config_, *chain_, acme_challenges_.get()));
  } catch (const std::exception& e) {
    TERN_LOG_ERROR("acme: the new certificates do not load, the running ones stay: {}", e.what());
  }
}

}  // namespace tern::server
