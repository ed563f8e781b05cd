#include "server/acme/acme_manager.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <random>

#include "acme/account_key.h"
#include "acme/acme_client.h"
#include "acme/certificates.h"
#include "acme/https_client.h"
#include "base/log.h"
#include "server/process/privileges.h"

namespace tern::server {
namespace {

// How often the files are looked at for another node's certificate (or
// check_interval, when shorter); as often, whether another node that held
// the storage's lock is done.
constexpr std::chrono::milliseconds kLook{60000};
// The most one authorization or one finalization may take.
constexpr std::chrono::minutes kOrderDeadline{3};
// The stand-in's lifetime: long enough never to expire while the CA is
// away, short enough that nobody mistakes it for the real one.
constexpr std::chrono::hours kStandInLifetime{24 * 7};

int64_t unix_now() { return static_cast<int64_t>(std::time(nullptr)); }

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& name : names) out += (out.empty() ? "" : ", ") + name;
  return out;
}

std::string describe(const acme::Problem& problem) {
  std::string out = problem.detail().empty() ? "the CA refused" : problem.detail();
  if (!problem.type().empty()) out += " (" + problem.type() + ")";
  return out;
}

void write_pair(const std::string& cert_path, const std::string& key_path, const std::string& cert,
                const std::string& key) {
  // The key first: a node that sees the new chain finds its key beside it.
  AcmeStorage::write_file(key_path, key, 0600);
  AcmeStorage::write_file(cert_path, cert, 0644);
}

}  // namespace

std::vector<std::vector<std::string>> AcmeManager::sites(const Config& config) {
  std::vector<std::vector<std::string>> out;
  for (const SiteConfig& site : config.sites) {
    if (site.tls.acme) out.push_back(site.names);
  }
  return out;
}

void AcmeManager::prepare(const Config& config) {
  const std::vector<std::vector<std::string>> all = sites(config);
  if (all.empty()) return;
  const AcmeStorage storage(config.acme.storage);
  const std::optional<Identity> owner = future_owner(config.user, config.group);
  storage.prepare(owner);
  for (const std::vector<std::string>& names : all) {
    const std::string cert_path = storage.certificate_path(names.front());
    const std::string key_path = storage.key_path(names.front());
    if (AcmeStorage::read_file(cert_path) && AcmeStorage::read_file(key_path)) continue;
    const acme::PemPair pair = acme::make_self_signed(names, kStandInLifetime);
    write_pair(cert_path, key_path, pair.cert, pair.key);
    if (owner) {
      const std::string dir = cert_path.substr(0, cert_path.rfind('/'));
      for (const std::string& path : {dir, cert_path, key_path}) {
        if (::chown(path.c_str(), owner->uid, owner->gid) != 0) {
          throw std::runtime_error("acme storage: chown " + path + ": " + std::strerror(errno));
        }
      }
    }
    TERN_LOG_WARN("acme: {}: no certificate from the CA yet: a self-signed one is served until it is issued",
                  joined(names));
  }
}

AcmeManager::AcmeManager(const Config& config, std::shared_ptr<AcmeChallenges> challenges,
                         std::function<void()> installed)
    : config_(config.acme),
      look_(std::min(kLook, config.acme.check_interval)),
      storage_(config.acme.storage),
      challenges_(std::move(challenges)),
      installed_(std::move(installed)) {
  for (std::vector<std::string>& names : sites(config)) {
    Certificate& c = certificates_.emplace_back();
    c.cert_path = storage_.certificate_path(names.front());
    c.key_path = storage_.key_path(names.front());
    c.status.names = names;
    c.names = std::move(names);
    reread(c);
  }
  for (const Certificate& c : certificates_) status_.push_back(c.status);
}

AcmeManager::~AcmeManager() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void AcmeManager::start() {
  if (certificates_.empty() || thread_.joinable()) return;
  thread_ = std::thread([this] { run(); });
}

std::vector<AcmeCertificateStatus> AcmeManager::status() const {
  std::lock_guard lock(mu_);
  return status_;
}

bool AcmeManager::same(const Config& config) const {
  if (!(config.acme == config_)) return false;
  const std::vector<std::vector<std::string>> now = sites(config);
  if (now.size() != certificates_.size()) return false;
  for (size_t i = 0; i < now.size(); ++i) {
    if (now[i] != certificates_[i].names) return false;
  }
  return true;
}

bool AcmeManager::wait(std::chrono::milliseconds delay) {
  std::unique_lock lock(mu_);
  wake_.wait_for(lock, delay, [this] { return stopping_; });
  return !stopping_;
}

bool AcmeManager::reread(Certificate& c) {
  std::optional<std::string> pem = AcmeStorage::read_file(c.cert_path);
  if (!pem || *pem == c.loaded) return false;
  c.loaded = std::move(*pem);
  try {
    c.facts = acme::read_certificate(c.loaded);
  } catch (const std::exception&) {
    c.facts.reset();
  }
  c.status.not_after = c.facts ? c.facts->not_after : 0;
  c.status.self_signed = c.facts ? c.facts->self_signed : true;
  return true;
}

bool AcmeManager::due(Certificate& c, bool ask_ca) {
  if (!c.facts) return true;  // none, or one that does not parse
  const acme::CertificateFacts& facts = *c.facts;
  if (facts.self_signed) return true;
  std::vector<std::string> have = facts.names;
  std::vector<std::string> want = c.names;
  std::sort(have.begin(), have.end());
  std::sort(want.begin(), want.end());
  if (have != want) return true;
  const int64_t now = unix_now();
  const int64_t renew_before = std::chrono::duration_cast<std::chrono::seconds>(config_.renew_before).count();
  const int64_t point = renew_before > 0 ? facts.not_after - renew_before
                                         : facts.not_before + (facts.not_after - facts.not_before) * 2 / 3;
  if (now >= point) return true;
  if (!ask_ca || facts.renewal_id.empty()) return false;
  // RFC 9773: a moment in the CA's window (the CA may have moved it
  // earlier, for a revocation to come).
  try {
    if (std::optional<acme::AcmeClient::RenewalWindow> window = client().renewal_window(facts.renewal_id)) {
      if (window->start != c.window_start || window->end != c.window_end) {
        // A moment picked at random in the window, once (nodes and
        // servers spread over it, as the CA asks).
        static thread_local std::mt19937_64 random{std::random_device{}()};
        c.window_start = window->start;
        c.window_end = window->end;
        c.renew_at = window->start;
        if (window->end > window->start) {
          c.renew_at += static_cast<int64_t>(random() % static_cast<uint64_t>(window->end - window->start));
        }
      }
      return now >= c.renew_at;
    }
  } catch (const acme::Stopped&) {
    throw;
  } catch (const std::exception& e) {
    TERN_LOG_WARN("acme: {}: the CA's renewal information: {}", joined(c.names), e.what());
  }
  return false;
}

acme::AcmeClient& AcmeManager::client() {
  if (client_ != nullptr) return *client_;
  acme::HttpsClient::Options options;
  options.ca_root = config_.ca_root;
  options.timeout = std::chrono::seconds(10);
  https_ = std::make_unique<acme::HttpsClient>(options);
  const std::string key_path = storage_.account_key_path();
  if (std::optional<std::string> pem = AcmeStorage::read_file(key_path)) {
    key_ = std::make_unique<acme::AccountKey>(acme::AccountKey::from_pem(*pem));
  } else {
    key_ = std::make_unique<acme::AccountKey>(acme::AccountKey::generate());
    AcmeStorage::write_file(key_path, key_->pem(), 0600);
    TERN_LOG_INFO("acme: a new account key in {}", key_path);
  }
  client_ = std::make_unique<acme::AcmeClient>(https_.get(), config_.directory, key_.get(),
                                               [this](std::chrono::milliseconds delay) { return wait(delay); });
  return *client_;
}

void AcmeManager::order(Certificate& c) {
  acme::AcmeClient& ca = client();
  std::vector<std::string> contact;
  if (!config_.email.empty()) contact.push_back("mailto:" + config_.email);
  acme::ExternalAccount external{config_.eab_kid, config_.eab_hmac_key};
  ca.account(contact, config_.agree_tos, config_.eab_kid.empty() ? nullptr : &external);

  std::string replaces;
  if (c.facts && !c.facts->self_signed && !ca.directory().renewal_info.empty()) replaces = c.facts->renewal_id;
  acme::AcmeClient::Order order;
  try {
    order = ca.new_order(c.names, replaces);
  } catch (const acme::Problem& problem) {
    // The CA does not take the certificate named as replaced (another CA's,
    // after `directory` changed; one it no longer knows; one replaced
    // already): an order of its own, as RFC 9773 has clients do.
    if (replaces.empty() || problem.status() < 400 || problem.status() >= 500 || problem.status() == 429) throw;
    TERN_LOG_INFO("acme: {}: the CA refused the order as a replacement ({}); ordering anew", joined(c.names),
                  describe(problem));
    order = ca.new_order(c.names, "");
  }
  for (const std::string& url : order.authorizations) {
    acme::AcmeClient::Authorization authz = ca.authorization(url);
    if (authz.status == "valid") continue;
    // The first of ours the CA offers.
    const acme::AcmeClient::Challenge* challenge = nullptr;
    for (const std::string& type : config_.challenges) {
      if ((challenge = authz.challenge(type)) != nullptr) break;
    }
    if (challenge == nullptr) {
      throw std::runtime_error(authz.name + ": the CA offers none of the challenges tern answers (" +
                               joined(config_.challenges) + ")");
    }
    const std::string token = challenge->token;
    const std::string key_authorization = key_->key_authorization(token);
    const bool http = challenge->type == "http-01";
    if (http) {
      challenges_->publish(token, key_authorization);
    } else {
      const acme::PemPair pair = acme::make_challenge_certificate(authz.name, key_authorization);
      challenges_->alpn()->add(authz.name, pair.cert, pair.key);
    }
    const auto withdraw = [&] {
      if (http) {
        challenges_->withdraw(token);
      } else {
        challenges_->alpn()->remove(authz.name);
      }
    };
    try {
      ca.respond(challenge->url);
      authz = ca.wait_for_authorization(url, std::chrono::steady_clock::now() + kOrderDeadline);
    } catch (...) {
      withdraw();
      throw;
    }
    withdraw();
  }
  const acme::SigningRequest request = acme::make_signing_request(c.names);
  order = ca.finalize(order, request.der, std::chrono::steady_clock::now() + kOrderDeadline);
  const std::string chain = ca.certificate(order.certificate);
  acme::CertificateFacts facts = acme::read_certificate(chain);  // it parses before it is installed
  write_pair(c.cert_path, c.key_path, chain, request.key_pem);
  c.loaded = chain;
  c.facts = facts;
  c.status.not_after = facts.not_after;
  c.status.self_signed = false;
  c.status.last_issued = unix_now();
  c.status.last_result = "issued";
  c.backoff = std::chrono::milliseconds(0);
  c.retry_at = {};
  char until[32];
  const std::time_t end = static_cast<std::time_t>(facts.not_after);
  std::tm tm{};
  ::gmtime_r(&end, &tm);
  std::strftime(until, sizeof until, "%Y-%m-%d %H:%M:%SZ", &tm);
  TERN_LOG_INFO("acme: {}: certificate issued, valid until {}", joined(c.names), until);
}

void AcmeManager::failed(Certificate& c, const std::string& why, std::chrono::seconds retry_after) {
  c.backoff = c.backoff.count() == 0 ? config_.retry_after : std::min(c.backoff * 2, config_.check_interval);
  std::chrono::milliseconds wait = c.backoff;
  if (retry_after.count() > 0) wait = std::max<std::chrono::milliseconds>(wait, retry_after);
  c.retry_at = std::chrono::steady_clock::now() + wait;
  c.status.last_result = "failed: " + why;
  TERN_LOG_ERROR("acme: {}: ordering a certificate failed: {}; the current one stays in use, next try in {} s",
                 joined(c.names), why, std::chrono::duration_cast<std::chrono::seconds>(wait).count());
}

void AcmeManager::run() {
  auto next_check = std::chrono::steady_clock::now();
  for (;;) {
    const auto now = std::chrono::steady_clock::now();
    const bool check = now >= next_check;
    if (check) next_check = now + config_.check_interval;
    bool changed = false;
    try {
      for (Certificate& c : certificates_) {
        changed = reread(c) || changed;  // another node's
        if (now < c.retry_at || !due(c, check)) continue;
        std::optional<AcmeStorage::Lock> lock;
        try {
          lock = storage_.try_lock();
        } catch (const std::exception& e) {
          failed(c, e.what(), std::chrono::seconds(0));
          continue;
        }
        if (!lock) {
          TERN_LOG_INFO("acme: {}: another node orders its certificate; waiting for it", joined(c.names));
          c.retry_at = now + look_;
          continue;
        }
        // It may have been ordered while this node waited for the lock.
        if (reread(c)) {
          changed = true;
          if (!due(c, false)) continue;
        }
        c.status.last_attempt = unix_now();
        try {
          order(c);
          changed = true;
        } catch (const acme::Problem& problem) {
          failed(c, describe(problem), problem.retry_after());
        } catch (const acme::Stopped&) {
          throw;
        } catch (const std::exception& e) {
          failed(c, e.what(), std::chrono::seconds(0));
        }
      }
    } catch (const acme::Stopped&) {
      return;
    }
    {
      std::lock_guard lock(mu_);
      status_.clear();
      for (const Certificate& c : certificates_) status_.push_back(c.status);
    }
    if (changed && installed_) installed_();
    // Until the next look, the next check or the next retry.
    auto until = std::min(next_check, std::chrono::steady_clock::now() + look_);
    for (const Certificate& c : certificates_) {
      if (c.retry_at > std::chrono::steady_clock::now()) until = std::min(until, c.retry_at);
    }
    const auto delay = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
    if (!wait(std::max(delay, std::chrono::milliseconds(10)))) return;
  }
}

}  // namespace tern::server
