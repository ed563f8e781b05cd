#include "server/limits/limit_handler.h"

#include <algorithm>
#include <charconv>

#include "base/log.h"
#include "http/error_page.h"
#include "net/event_loop.h"
#include "net/timer_wheel.h"
#include "server/chain.h"

namespace tern::server {
namespace {

// A request waiting for its turn: its timer goes with the exchange (or
// with the handler's job that replaces this one once it has run).
class Waiting final : public http::ExchangeJob {
 public:
  explicit Waiting(net::EventLoop* on) : loop(on) {}
  ~Waiting() override {
    if (timer.valid()) loop->cancel(timer);
  }

  net::EventLoop* const loop;
  net::TimerId timer;
};

// The places a request holds under limits of requests in flight, given
// back when its exchange ends (Exchange::hold_until_end).
struct Places {
  std::shared_ptr<const KeyLimits> limits;  // outlives the places
  std::vector<std::pair<ConcurrencyLimit*, uint64_t>> held;  // limit, key hash
  ~Places() {
    for (const auto& [limit, hash] : held) limit->release_hash(hash);
  }
};

void go_on(const Chain* chain, http::ExchangeId id) {
  if (http::Exchange* waited = http::Exchange::find(id)) resume_on(chain, *waited);
}

}  // namespace

LimitHandler::LimitHandler(std::shared_ptr<const KeyLimits> limits, const LocationConfig& location,
                           const Chain* chain)
    : all_(std::move(limits)), chain_(chain) {
  for (const std::string& name : location.limit) {
    const KeyLimits::Limit* limit = all_->find(name);
    if (limit != nullptr && limit->rate) limits_.push_back(limit);
    if (limit != nullptr && limit->connections) in_flight_.push_back(limit);
  }
}

Claim LimitHandler::claim(Route& route) {
  if (route.limited) return Claim::kPass;  // counted before it waited
  route.limited = true;  // an internal redirect is not counted again
  const int64_t now = static_cast<int64_t>(net::EventLoop::current()->clock().now_ms());
  std::chrono::milliseconds wait{0};
  for (const KeyLimits::Limit* limit : limits_) {
    const KeyLimitConfig& config = limit->config;
    // On the route's scratch: no allocation once it has grown to the keys.
    std::string& key = route.scratch;
    key.clear();
    limit->key.expand(route, false, &key);
    if (key.empty()) continue;
    const RateLimit::Verdict verdict = limit->rate->check(key, now);
    if (!verdict.allowed) {
      if (verdict.first_this_second) {
        TERN_LOG_WARN("limit {}: {} is over {} r/s (burst {}): {}", config.name, key,
                      static_cast<double>(config.rate_milli) / 1000, config.burst, config.status);
      }
      route.status = config.status;
      route.wait = std::max(verdict.wait, std::chrono::milliseconds(1));  // Retry-After
      return Claim::kRespond;
    }
    wait = std::max(wait, verdict.wait);
  }
  if (wait.count() == 0 && in_flight_.empty()) return Claim::kPass;
  route.wait = wait;
  return Claim::kExchange;
}

void LimitHandler::respond(const Route& route, http::ResponseWriter& writer) {
  // Whole seconds, at least one (a client retrying sooner is refused again).
  const int64_t seconds = std::max<int64_t>((route.wait.count() + 999) / 1000, 1);
  char digits[24];
  const auto end = std::to_chars(digits, digits + sizeof digits, seconds).ptr;
  http::write_error_page(writer, route.status,
                         http::ErrorField{"Retry-After", std::string_view(digits, static_cast<size_t>(end - digits))});
}

bool LimitHandler::take_places(const Route& route, http::Exchange& exchange) const {
  if (in_flight_.empty()) return true;
  auto places = std::make_shared<Places>();
  places->limits = all_;
  const int64_t now_s = static_cast<int64_t>(exchange.loop()->clock().now_ms() / 1000);
  std::string key;
  for (const KeyLimits::Limit* limit : in_flight_) {
    key.clear();
    limit->key.expand(route, false, &key);
    if (key.empty()) continue;
    const uint64_t hash = limit->connections->hash(key);
    const ConcurrencyLimit::Verdict verdict = limit->connections->acquire_hash(hash, now_s);
    if (!verdict.allowed) {
      if (verdict.first_this_second) {
        TERN_LOG_WARN("limit {}: {} has {} requests in flight: {}", limit->config.name, key,
                      limit->config.connections, limit->config.status);
      }
      http::write_error_page(exchange.writer(), limit->config.status);
      exchange.finish();
      return false;  // the places taken so far go with `places`
    }
    places->held.emplace_back(limit->connections.get(), hash);
  }
  exchange.hold_until_end(std::move(places));
  return true;
}

void LimitHandler::start(const Route& route, http::Exchange& exchange) {
  if (!take_places(route, exchange)) return;
  // What arrives of the body waits with the request.
  exchange.hold_body();
  if (route.wait.count() == 0) {
    // Only places to take: on with the chain, after this round (the chain
    // is still in the call that started this one).
    exchange.loop()->defer([id = exchange.id(), chain = chain_] { go_on(chain, id); });
    return;
  }
  auto waiting = std::make_shared<Waiting>(exchange.loop());
  const http::ExchangeId id = exchange.id();
  const Chain* chain = chain_;
  // The job may be gone once resume() has run (a handler adopts its own):
  // nothing of it is used after.
  waiting->timer = waiting->loop->run_after(route.wait, [id, chain, job = waiting.get()] {
    job->timer = net::TimerId{};
    go_on(chain, id);
  });
  exchange.adopt(std::move(waiting));
}

}  // namespace tern::server
