#include "server/access/basic_auth.h"

#include <fmt/format.h>
#include <sodium.h>

#include <charconv>
#include <ctime>
#include <vector>

#include "base/base64.h"
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

// A client's user name for the log: at most 64 bytes, control bytes and
// backslashes escaped (it could hold anything but a colon).
std::string printable(std::string_view user) {
  std::string out;
  for (unsigned char ch : user.substr(0, 64)) {
    if (ch < 0x20 || ch == 0x7f || ch == '\\') {
      out += fmt::format("\\x{:02x}", ch);
    } else {
      out += static_cast<char>(ch);
    }
  }
  if (user.size() > 64) out += "...";
  return out;
}

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
  if (!base64_decode(encoded, scratch)) return false;
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

uint64_t BasicUsers::key(std::string_view credentials) const {
  // A user has no ':' in it: "user:password" names the pair alone.
  return successes_.hash(credentials);
}

bool BasicUsers::remembered(uint64_t key, int64_t now) {
  bool fresh = false;
  // A success in use stays remembered: a session of requests is checked once.
  successes_.if_present(
      key,
      [&](int64_t& until) {
        fresh = until > now;
        if (fresh) until = now + kRememberedMs;
      },
      [now](const int64_t& until) { return until > now; });
  return fresh;
}

void BasicUsers::remember(uint64_t key, int64_t now) {
  successes_.with(key, [now](int64_t& until, bool) { until = now + kRememberedMs; });
}

BasicUsers::Begin BasicUsers::begin(uint64_t key, const Waiter& waiter, const net::InetAddress& client, int64_t now_s,
                                    int64_t* retry_after) {
  std::lock_guard lock(pending_mu_);
  if (auto it = pending_.find(key); it != pending_.end()) {
    it->second.push_back(waiter);
    return Begin::kJoined;
  }
  if (!checks_.allow(auth::address_key(client), now_s, retry_after)) return Begin::kRefused;
  pending_[key].push_back(waiter);
  return Begin::kCheck;
}

std::vector<BasicUsers::Waiter> BasicUsers::end(uint64_t key) {
  std::lock_guard lock(pending_mu_);
  auto it = pending_.find(key);
  if (it == pending_.end()) return {};
  std::vector<Waiter> waiters = std::move(it->second);
  pending_.erase(it);
  return waiters;
}

BasicAuthHandler::BasicAuthHandler(std::shared_ptr<BasicUsers> users, const AuthBasicConfig& config,
                                   const Chain* chain, TaskPool* tasks)
    : users_(std::move(users)), challenge_(challenge(config.realm)), chain_(chain), tasks_(tasks) {}

Claim BasicAuthHandler::claim(Route& route) {
  const http::Request& request = *route.request;
  std::string_view user, password;
  const bool given = basic_credentials(request.header(http::FieldId::kAuthorization), &route.scratch, &user, &password);
  // A request whose check came back finds its success here, as does one
  // remembered; another location's file (an internal redirect) is asked
  // on its own.
  const bool known = given && users_->remembered(users_->key(route.scratch), now_ms());
  if (known) request.set_remote_user(user);
  // The password leaves no copy behind in the route.
  sodium_memzero(route.scratch.data(), route.scratch.size());
  if (!given) {
    route.status = 401;
    return Claim::kRespond;
  }
  return known ? Claim::kPass : Claim::kExchange;
}

void BasicAuthHandler::respond(const Route&, http::ResponseWriter& writer) {
  http::write_error_page(writer, 401, http::ErrorField{"WWW-Authenticate", challenge_});
}

void BasicAuthHandler::start(const Route& route, http::Exchange& exchange) {
  exchange.hold_body();
  std::string decoded;
  std::string_view user, password;
  (void)basic_credentials(route.request->header(http::FieldId::kAuthorization), &decoded, &user, &password);
  const uint64_t key = users_->key(decoded);
  int64_t retry_after = 0;
  const BasicUsers::Begin begun =
      users_->begin(key, {exchange.id(), this}, *route.client, static_cast<int64_t>(::time(nullptr)), &retry_after);
  if (begun == BasicUsers::Begin::kJoined) {
    // The same credentials are being checked: this request has that answer.
    sodium_memzero(decoded.data(), decoded.size());
    return;
  }
  if (begun == BasicUsers::Begin::kRefused) {
    sodium_memzero(decoded.data(), decoded.size());
    TERN_LOG_EVERY_SECOND(spdlog::level::warn, "auth_basic: {} has had its password checks this minute: 429",
                          route.client->to_ip());
    char digits[24];
    const auto end = std::to_chars(digits, digits + sizeof digits, std::max<int64_t>(retry_after, 1)).ptr;
    http::write_error_page(exchange.writer(), 429,
                           http::ErrorField{"Retry-After", std::string_view(digits, static_cast<size_t>(end - digits))});
    return exchange.finish();
  }
  struct Check {
    std::shared_ptr<BasicUsers> users;
    uint64_t key;
    std::string user;
    std::string password;
    std::string client;
    net::EventLoop* loop;
    ~Check() { sodium_memzero(password.data(), password.size()); }
  };
  auto check = std::make_shared<Check>(
      Check{users_, key, std::string(user), std::string(password), route.client->to_ip(), exchange.loop()});
  sodium_memzero(decoded.data(), decoded.size());
  auto answer = [check](bool ok) {
    if (ok) check->users->remember(check->key, now_ms());
    if (!ok) {
      TERN_LOG_WARN("auth_basic: {} from {}: no such user or a wrong password", printable(check->user),
                    check->client);
    }
    // Every request that waited for this check, on its own loop.
    for (const BasicUsers::Waiter& waiter : check->users->end(check->key)) {
      waiter.id.loop->run_in_loop([waiter, ok] {
        http::Exchange* waited = http::Exchange::find(waiter.id);
        if (waited == nullptr) return;  // the client left meanwhile
        if (!ok) return waiter.handler->refuse(*waited);
        resume_on(waiter.handler->chain_, *waited);
      });
    }
  };
  const bool queued = tasks_ != nullptr && tasks_->submit([check, answer] {
    const bool ok = check->users->file().verify(check->user, check->password);
    check->loop->run_in_loop([answer, ok] { answer(ok); });
  });
  if (!queued) {
    TERN_LOG_EVERY_SECOND(spdlog::level::err, "auth_basic: the task threads' queue is full: 503");
    for (const BasicUsers::Waiter& waiter : users_->end(key)) {
      waiter.id.loop->run_in_loop([id = waiter.id] {
        if (http::Exchange* waited = http::Exchange::find(id)) {
          http::write_error_page(waited->writer(), 503);
          waited->finish();
        }
      });
    }
  }
}

void BasicAuthHandler::refuse(http::Exchange& exchange) const {
  http::write_error_page(exchange.writer(), 401, http::ErrorField{"WWW-Authenticate", challenge_});
  exchange.finish();
}

}  // namespace tern::server
