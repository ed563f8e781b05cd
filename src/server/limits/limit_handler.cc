#include "server/limits/limit_handler.h"

#include <algorithm>
#include <charconv>

#include "base/log.h"
#include "http/error_page.h"
#include "net/event_loop.h"
#include "net/timer_wheel.h"
#include "server/chain.h"
#include "server/handlers/location_handlers.h"

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

}  // namespace

LimitHandler::LimitHandler(const KeyLimits& limits, const LocationConfig& location, const Chain* chain)
    : chain_(chain) {
  for (const std::string& name : location.limit) {
    const KeyLimits::Limit* limit = limits.find(name);
    if (limit != nullptr && limit->rate) limits_.push_back(limit);
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
    expand_variables(config.key, route, false, &key);
    if (key.empty()) continue;
    const RateLimit::Verdict verdict = limit->rate->check(key, now);
    if (!verdict.allowed) {
      if (verdict.first_this_second) {
        TERN_LOG_WARN("limit {}: {} is over {} r/s (burst {}): {}", config.name, key,
                      static_cast<double>(config.rate_milli) / 1000, config.burst, config.status);
      }
      route.status = config.status;
      route.wait = verdict.wait;
      return Claim::kRespond;
    }
    wait = std::max(wait, verdict.wait);
  }
  if (wait.count() == 0) return Claim::kPass;
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

void LimitHandler::start(const Route& route, http::Exchange& exchange) {
  // What arrives of the body waits with the request.
  exchange.hold_body();
  auto waiting = std::make_shared<Waiting>(exchange.loop());
  const http::ExchangeId id = exchange.id();
  const Chain* chain = chain_;
  // The job may be gone once resume() has run (a handler adopts its own):
  // nothing of it is used after.
  waiting->timer = waiting->loop->run_after(route.wait, [id, chain, job = waiting.get()] {
    job->timer = net::TimerId{};
    if (http::Exchange* waited = http::Exchange::find(id)) resume_on(chain, *waited);
  });
  exchange.adopt(std::move(waiting));
}

}  // namespace tern::server
