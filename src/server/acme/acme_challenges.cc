#include "server/acme/acme_challenges.h"

#include <unistd.h>

#include "http/response_writer.h"

namespace tern::server {

void AcmeChallenges::publish(const std::string& token, const std::string& key_authorization) {
  const std::string path = storage_.challenge_path(token);
  if (path.empty()) throw std::runtime_error("acme: the CA sent a token that is not base64url: " + token);
  {
    std::lock_guard lock(mu_);
    tokens_[token] = key_authorization;
  }
  AcmeStorage::write_file(path, key_authorization, 0644);
}

void AcmeChallenges::withdraw(const std::string& token) {
  {
    std::lock_guard lock(mu_);
    tokens_.erase(token);
  }
  if (const std::string path = storage_.challenge_path(token); !path.empty()) ::unlink(path.c_str());
}

std::optional<std::string> AcmeChallenges::answer(std::string_view token) const {
  {
    std::lock_guard lock(mu_);
    if (auto it = tokens_.find(token); it != tokens_.end()) return it->second;
  }
  const std::string path = storage_.challenge_path(token);
  if (path.empty()) return std::nullopt;
  return AcmeStorage::read_file(path);
}

namespace {

std::string_view token_of(std::string_view path) {
  if (!path.starts_with(AcmeChallenges::kHttpPrefix)) return {};
  return path.substr(AcmeChallenges::kHttpPrefix.size());
}

}  // namespace

Claim AcmeChallengeHandler::claim(Route& route) {
  const std::string_view token = token_of(route.path);
  if (token.empty()) return Claim::kPass;
  std::optional<std::string> answer = challenges_->answer(token);
  if (!answer) return Claim::kPass;
  route.scratch = std::move(*answer);  // for respond(), looked up once
  return Claim::kRespond;
}

void AcmeChallengeHandler::respond(const Route& route, http::ResponseWriter& writer) {
  writer.start(200).header("Content-Type", "text/plain");
  writer.body(route.scratch);
}

}  // namespace tern::server
