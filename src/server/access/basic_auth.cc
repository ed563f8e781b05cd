#include "server/access/basic_auth.h"

#include <sodium.h>

#include <charconv>
#include <ctime>
#include <vector>

#include "base/log.h"
#include "base/task_pool.h"
#include "http/error_page.h"
#include "http/exchange.h"
#include "net/event_loop.h"
#include "server/chain.h"

namespace tern::server {
namespace {

// Successes remembered, at most (the least recently used go).
constexpr size_t kRememberedUsers = 4096;

std::string challenge(std::string_view realm) {
  // A quoted-string (RFC 9110 5.6.4): quotes and backslashes escaped.
  std::string out = "Basic realm=\"";
  for (char ch : realm) {
    if (ch == '"' || ch == '\\') out += '\\';
    out += ch;
  }
  out += "\", charset=\"UTF-8\"";
  return out;
}

int64_t now_ms() { return static_cast<int64_t>(net::EventLoop::current()->clock().now_ms()); }

}  // namespace

bool basic_credentials(std::string_view field, std::string* scratch, std::string_view* user,
                       std::string_view* password) {
  constexpr std::string_view kScheme = "Basic";
  if (field.size() <= kScheme.size() || !http::iequals(field.substr(0, kScheme.size()), kScheme) ||
      field[kScheme.size()] != ' ') {
    return false;
  }
  std::string_view encoded = field.substr(kScheme.size());
  while (!encoded.empty() && encoded.front() == ' ') encoded.remove_prefix(1);
  while (!encoded.empty() && encoded.back() == ' ') encoded.remove_suffix(1);
  scratch->resize(encoded.size() / 4 * 3 + 3);
  size_t length = 0;
  const char* end = nullptr;
  if (sodium_base642bin(reinterpret_cast<unsigned char*>(scratch->data()), scratch->size(), encoded.data(),
                        encoded.size(), nullptr, &length, &end, sodium_base64_VARIANT_ORIGINAL) != 0 ||
      end != encoded.data() + encoded.size()) {
    return false;
  }
  scratch->resize(length);
  const size_t colon = scratch->find(':');
  if (colon == std::string::npos || colon == 0) return false;
  *user = std::string_view(*scratch).substr(0, colon);
  *password = std::string_view(*scratch).substr(colon + 1);
  return true;
}

BasicUsers::BasicUsers(const std::string& path, uint32_t attempts)
    : successes_(kRememberedUsers), checks_(attempts, std::chrono::seconds(60)) {
  std::vector<std::string> warnings;
  file_ = auth::Htpasswd::load(path, &warnings);
  for (const std::string& warning : warnings) TERN_LOG_WARN("auth_basic: {}", warning);
}

uint64_t BasicUsers::key(std::string_view user, std::string_view password) const {
  // A user has no ':' in it: "user:password" names the pair alone.
  std::string pair;
  pair.reserve(user.size() + 1 + password.size());
  pair.append(user).append(1, ':').append(password);
  const uint64_t hash = successes_.hash(pair);
  sodium_memzero(pair.data(), pair.size());
  return hash;
}

bool BasicUsers::remembered(uint64_t key, int64_t now) {
  bool fresh = false;
  successes_.if_present(key, [&](int64_t& until) { fresh = until > now; },
                        [now](const int64_t& until) { return until > now; });
  return fresh;
}

void BasicUsers::remember(uint64_t key, int64_t now) {
  successes_.with(key, [now](int64_t& until, bool) { until = now + kRememberedMs; });
}

bool BasicUsers::may_check(const net::InetAddress& client, int64_t now_s, int64_t* retry_after) {
  return checks_.allow(auth::address_key(client), now_s, retry_after);
}

BasicAuthHandler::BasicAuthHandler(std::shared_ptr<BasicUsers> users, const AuthBasicConfig& config,
                                   const Chain* chain, TaskPool* tasks)
    : users_(std::move(users)), challenge_(challenge(config.realm)), chain_(chain), tasks_(tasks) {}

Claim BasicAuthHandler::claim(Route& route) {
  const http::Request& request = *route.request;
  std::string_view user, password;
  if (!basic_credentials(request.header(http::FieldId::kAuthorization), &route.scratch, &user, &password)) {
    route.status = 401;
    return Claim::kRespond;
  }
  const Claim claim = claim_checked(route, user, password);
  // The password leaves no copy behind in the route.
  sodium_memzero(route.scratch.data(), route.scratch.size());
  return claim;
}

Claim BasicAuthHandler::claim_checked(Route& route, std::string_view user, std::string_view password) {
  // A request whose check came back finds its success here, as does one
  // remembered; another location's file (an internal redirect) is asked
  // on its own.
  const http::Request& request = *route.request;
  if (users_->remembered(users_->key(user, password), now_ms())) {
    request.set_remote_user(user);
    return Claim::kPass;
  }
  int64_t retry_after = 0;
  if (!users_->may_check(*route.client, static_cast<int64_t>(::time(nullptr)), &retry_after)) {
    TERN_LOG_EVERY_SECOND(spdlog::level::warn, "auth_basic: {} has had its password checks this minute: 429",
                          route.client->to_ip());
    route.status = 429;
    route.wait = std::chrono::seconds(retry_after);
    return Claim::kRespond;
  }
  return Claim::kExchange;
}

void BasicAuthHandler::respond(const Route& route, http::ResponseWriter& writer) {
  if (route.status == 401) return http::write_error_page(writer, 401, http::ErrorField{"WWW-Authenticate", challenge_});
  char digits[24];
  const int64_t seconds = std::max<int64_t>(std::chrono::ceil<std::chrono::seconds>(route.wait).count(), 1);
  const auto end = std::to_chars(digits, digits + sizeof digits, seconds).ptr;
  http::write_error_page(writer, route.status,
                         http::ErrorField{"Retry-After", std::string_view(digits, static_cast<size_t>(end - digits))});
}

void BasicAuthHandler::start(const Route& route, http::Exchange& exchange) {
  std::string decoded;
  std::string_view user, password;
  (void)basic_credentials(route.request->header(http::FieldId::kAuthorization), &decoded, &user, &password);
  exchange.hold_body();
  struct Check {
    std::shared_ptr<BasicUsers> users;
    std::string user;
    std::string password;
    std::string client;
    http::ExchangeId id;
    const Chain* chain;
    std::string challenge;
    ~Check() { sodium_memzero(password.data(), password.size()); }
  };
  auto check = std::make_shared<Check>(Check{users_, std::string(user), std::string(password),
                                             route.client->to_ip(), exchange.id(), chain_, challenge_});
  sodium_memzero(decoded.data(), decoded.size());
  const bool queued = tasks_ != nullptr && tasks_->submit([check] {
    const bool ok = check->users->file().verify(check->user, check->password);
    check->id.loop->run_in_loop([check, ok] {
      http::Exchange* waited = http::Exchange::find(check->id);
      if (waited == nullptr) return;  // the client left meanwhile
      if (!ok) {
        TERN_LOG_WARN("auth_basic: {} from {}: no such user or a wrong password", check->user, check->client);
        http::write_error_page(waited->writer(), 401, http::ErrorField{"WWW-Authenticate", check->challenge});
        return waited->finish();
      }
      check->users->remember(check->users->key(check->user, check->password), now_ms());
      resume_on(check->chain, *waited);
    });
  });
  if (!queued) {
    TERN_LOG_EVERY_SECOND(spdlog::level::err, "auth_basic: the task threads' queue is full: 503");
    http::write_error_page(exchange.writer(), 503);
    exchange.finish();
  }
}

}  // namespace tern::server
