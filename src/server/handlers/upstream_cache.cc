#include "server/handlers/upstream_cache.h"

#include <algorithm>
#include <ctime>
#include <optional>
#include <stdexcept>

#include "base/log.h"
#include "cache/vary.h"
#include "http/error_page.h"
#include "net/event_loop.h"
#include "server/cache_zones.h"
#include "server/handlers/background_exchange.h"
#include "server/handler.h"
#include "server/handlers/upstream_cache_tap.h"
#include "server/observability/metrics.h"

namespace tern::server {
namespace {

using cache::EntryHead;
using cache::KeyHash;
using cache::Stored;
using FillEnd = cache::Zone::FillEnd;

int64_t unix_now() { return static_cast<int64_t>(std::time(nullptr)); }

// Whether a stored response may answer a request with Authorization.
bool shared_with_authorization(const EntryHead& head) {
  for (const auto& [name, value] : head.fields) {
    if (!http::iequals(name, "Cache-Control")) continue;
    if (cache::directive(value, "public") || cache::directive(value, "s-maxage") ||
        cache::directive(value, "must-revalidate")) {
      return true;
    }
  }
  return false;
}

// Whether one of `conditions` expands to neither "" nor "0" (nginx's
// proxy_cache_bypass and proxy_no_cache).
bool any_set(const std::vector<VariableText>& conditions, const Route& route) {
  std::string value;
  for (const VariableText& condition : conditions) {
    value.clear();
    condition.expand(route, false, &value);
    if (!value.empty() && value != "0") return true;
  }
  return false;
}

// A request's Cache-Control: no-store (RFC 9111 5.2.1.5): its response is
// not kept, though a kept one may answer it.
bool request_forbids_store(const http::Request& request) {
  for (const http::Header& field : request.headers()) {
    if (field.id == http::FieldId::kCacheControl && cache::directive(field.value, "no-store")) return true;
  }
  return false;
}

std::vector<VariableText> texts(const std::vector<std::string>& from) {
  return {from.begin(), from.end()};
}

}  // namespace

std::unique_ptr<UpstreamCache> make_upstream_cache(const CacheZones* zones, const CacheUseConfig& use,
                                                   Metrics* metrics) {
  cache::Zone* zone = zones != nullptr ? zones->find(use.zone) : nullptr;
  if (zone == nullptr) {
    throw std::runtime_error("cache \"" + use.zone + "\" is not a zone of the running server ([[cache]] zones are "
                             "made at start: restart to add one)");
  }
  return std::make_unique<UpstreamCache>(zones, zone, use, metrics);
}

UpstreamCache::UpstreamCache(const CacheZones* zones, cache::Zone* zone, const CacheUseConfig& config,
                             Metrics* metrics)
    : zones_(zones),
      zone_(zone),
      key_(config.key),
      policy_{config.valid, config.store_set_cookie},
      lock_(config.lock),
      lock_timeout_(config.lock_timeout),
      lock_age_(config.lock_age),
      revalidate_(config.revalidate),
      background_update_(config.background_update),
      use_stale_(config.use_stale),
      bypass_(texts(config.bypass)),
      no_store_(texts(config.no_store)),
      purge_(config.purge),
      metrics_(metrics) {}

bool UpstreamCache::answer(const Route& route, http::Exchange& exchange, Miss* miss) const {
  const http::Request& request = exchange.request();
  if (!purge_.empty() && request.method() == http::Method::kPurge) {
    purge(route, exchange);
    return true;
  }
  if (request.method() != http::Method::kGet && request.method() != http::Method::kHead) {
    miss->status = "tern; fwd=method";
    // RFC 9111 4.4: a success to an unsafe method ends the entry of its target.
    miss->invalidate = request.method() != http::Method::kOptions && request.method() != http::Method::kTrace;
    if (miss->invalidate) key_.expand(route, false, &miss->key);
    return false;
  }
  key_.expand(route, false, &miss->key);
  // A HEAD fills as a GET would (go() asks the application for one; over
  // HTTP/2 its stream ends with the head, and the call reads on for the
  // entry). A protocol switch (a WebSocket) is a tunnel, not a response to
  // keep.
  miss->fill = (request.method() == http::Method::kGet || request.method() == http::Method::kHead) &&
               !request.has_header(http::FieldId::kUpgrade) && !any_set(no_store_, route) &&
               !request_forbids_store(request);
  if (any_set(bypass_, route)) {
    miss->status = "tern; fwd=bypass";
    miss->bypass = true;
    request.set_cache_status("BYPASS");
    if (metrics_ != nullptr) metrics_->loop(exchange.loop()).response_cache_bypass.add();
    return false;
  }
  return answer_key(exchange, miss, {});
}

void UpstreamCache::invalidate(const std::string& key) const {
  const int64_t now = unix_now();
  const std::shared_ptr<const Stored> found = zone_->find(KeyHash::of(key), now);
  if (!found || found->head.key != key) return;
  if ((found->head.flags & EntryHead::kVaryMarker) == 0) {
    zone_->forget(*found);
    return;
  }
  // The marker of its variants: one of a new epoch takes its place, and
  // they are not found again (they age out of the zone).
  store_marker(*zone_, key, found->head.vary, cache::new_epoch(), found->head.expires, now);
}

void UpstreamCache::purge(const Route& route, http::Exchange& exchange) const {
  http::ResponseWriter& w = exchange.writer();
  const bool allowed = std::any_of(purge_.begin(), purge_.end(),
                                   [&route](const Cidr& network) { return network.contains(*route.client); });
  if (!allowed) {
    http::write_error_page(w, 403);
    return exchange.finish();
  }
  std::string key;
  key_.expand(route, false, &key);
  int status = 200;
  if (key.ends_with('*')) {
    key.pop_back();
    zone_->purge(key, true);
    key.push_back('*');
  } else {
    // Found under the key alone: a response, or the marker of its variants.
    // Either goes now, file and all. Variants are stored under what they
    // vary on, which a purge does not know: the manager finds them by their
    // keys, as it does those of a key whose marker went before.
    const std::shared_ptr<const Stored> found = zone_->find(KeyHash::of(key), unix_now());
    if (found) zone_->forget(*found);
    if (!found) status = 404;
    if (!found || (found->head.flags & EntryHead::kVaryMarker) != 0) zone_->purge(key, false);
  }
  TERN_LOG_INFO("cache {}: {} purged by {}", zone_->options().name, key, route.client->to_ip());
  w.start(status);
  w.header("Content-Type", "text/plain; charset=utf-8");
  w.body((status == 200 ? "purged " : "not cached ") + key + "\n");
  exchange.finish();
}

bool UpstreamCache::answer_key(http::Exchange& exchange, Miss* miss, std::string_view collapsed,
                               uint64_t waited_from) const {
  const http::Request& request = exchange.request();
  const std::string& key = miss->key;
  const int64_t now = unix_now();
  miss->lock = KeyHash::of(key);
  std::shared_ptr<const Stored> entry = zone_->find(miss->lock, now);
  miss->status = "tern; fwd=uri-miss";
  miss->stale = nullptr;
  if (entry && entry->head.key != key) entry = nullptr;  // another key under the same hash
  if (entry && (entry->head.flags & EntryHead::kVaryMarker) != 0) {
    const std::string variant = cache::variant_of(request, entry->head.vary);
    miss->lock = cache::variant_hash(key, entry->head.variant, variant);
    entry = zone_->find(miss->lock, now);
    if (entry && (entry->head.key != key || entry->head.variant != variant)) entry = nullptr;
    if (!entry) miss->status = "tern; fwd=vary-miss";
  }
  if (entry && request.has_header(http::FieldId::kAuthorization) && !shared_with_authorization(entry->head)) {
    entry = nullptr;
    miss->status = "tern; fwd=request";
  }
  // Stored by the fill a request waited for: as fresh to it as the
  // application's answer would be, unless the response may never be
  // served stale (must-revalidate, s-maxage: RFC 9111 4.2.4).
  const bool filled_for_it = entry && entry->sequence > waited_from && (entry->head.flags & EntryHead::kNoStale) == 0;
  if (entry && ((entry->head.expires <= now && !filled_for_it) || (entry->head.flags & EntryHead::kRevalidate) != 0)) {
    miss->stale = std::move(entry);
    entry = nullptr;
    miss->status = "tern; fwd=stale";
  }
  request.set_cache_status(miss->stale ? "EXPIRED" : "MISS");
  if (entry) {
    serve(*entry, now, exchange, collapsed);
    if (exchange.writer().started()) {
      request.set_cache_status("HIT");
      if (metrics_ != nullptr) metrics_->loop(exchange.loop()).response_cache_hits.add();
      exchange.finish();
      return true;
    }
    miss->status = "tern; fwd=uri-miss";  // its file went
  }
  miss->looked_up = true;
  return false;
}

bool UpstreamCache::may_serve_stale(const EntryHead& head, int64_t now, int status, bool failure) const {
  if ((head.flags & (EntryHead::kNoStale | EntryHead::kRevalidate)) != 0) return false;
  const bool configured = failure ? (status == 504 ? use_stale_.timeout : use_stale_.error)
                                  : std::find(use_stale_.statuses.begin(), use_stale_.statuses.end(), status) !=
                                        use_stale_.statuses.end();
  if (configured) return true;
  // RFC 5861 4: an error is what would be answered 500, 502, 503 or 504.
  const bool error = failure || status == 500 || status == 502 || status == 503 || status == 504;
  return error && head.stale_if_error > 0 && now <= head.expires + head.stale_if_error;
}

bool UpstreamCache::may_serve_updating(const EntryHead& head, int64_t now) const {
  if ((head.flags & (EntryHead::kNoStale | EntryHead::kRevalidate)) != 0) return false;
  return use_stale_.updating || (head.stale_while_revalidate > 0 && now <= head.expires + head.stale_while_revalidate);
}

void UpstreamCache::go(http::Exchange& exchange, Miss& miss, const Fetch& fetch, bool fill, uint64_t lock) const {
  if (miss.looked_up && metrics_ != nullptr) metrics_->loop(exchange.loop()).response_cache_misses.add();
  miss.looked_up = false;
  Forward forward;
  forward.status = miss.status;
  if (fill || miss.stale || miss.invalidate) {
    auto tap = std::make_unique<Tap>(this, miss.key, exchange.request(), fill, miss.lock, lock, miss.stale,
                                     miss.invalidate);
    forward.asks.whole_response = fill;
    if (fill && exchange.request().method() == http::Method::kHead) forward.asks.method = "GET";
    forward.asks.conditions = tap->conditions();
    forward.tap = std::move(tap);
  }
  fetch(exchange, std::move(forward));
}

// A request waiting for the fill of its key (or of its variant): woken when
// the fill ends (it is then answered from the entry; or fills the entry
// itself when the fill failed, or stored another variant than its own, and
// it is the first to wake, else waits on; or goes to the application) or
// when lock_timeout, counted from its first wait, runs out (it goes to the
// application). On its exchange's loop; whichever comes first wins.
struct UpstreamCache::Wait {
  // Used only while the exchange is there to hold its configuration; the
  // zone lives as long as the server (a reload cannot make one).
  const UpstreamCache* cache;
  cache::Zone* zone;
  http::ExchangeId exchange;
  Miss miss;
  Fetch fetch;
  KeyHash hash;          // of the fill it takes or waits for (miss.lock when it began)
  uint64_t waited_from;  // the zone's inserts when it began to wait
  // Waiting, its wake-up among the fill's; filling, the fill's ticket.
  uint64_t id = 0;
  net::TimerId timer;
  bool done = false;
  // Its Cache-Status if the fill it waits for answers it: the lookup's
  // that chose `hash`, collapsed onto the fill.
  std::string_view collapsed_status = "tern; fwd=uri-miss; collapsed";

  // Whether it fills its key or variant (true), or waits for the fill under
  // way. While the exchange is there.
  static bool begin(const std::shared_ptr<Wait>& wait) {
    wait->hash = wait->miss.lock;
    wait->collapsed_status = collapsed(wait->miss.status);
    return wait->zone->begin_fill(
        wait->hash,
        [wait](FillEnd end) {
          // Queued even on its own loop: the fill's end is deep in its call.
          wait->exchange.loop->queue_in_loop([wait, end] { resume(wait, end); });
        },
        wait->cache->lock_age_, &wait->id);
  }

  // The fill ended (`end`), or lock_timeout ran out (nullopt).
  static void resume(const std::shared_ptr<Wait>& wait, std::optional<FillEnd> end) {
    if (wait->done) return;
    http::Exchange* ex = http::Exchange::find(wait->exchange);
    bool filler = false;
    if (!end) {
      wait->zone->leave_fill(wait->hash, wait->id);
    } else if (ex != nullptr && wait->cache->answer_key(*ex, &wait->miss, wait->collapsed_status, wait->waited_from)) {
      ex = nullptr;  // answered
    } else if (ex != nullptr && (*end == FillEnd::kFailed || wait->miss.lock != wait->hash)) {
      // The fill failed, or stored a variant not this request's: the
      // first to wake fills (its variant), the others wait on.
      if (!begin(wait)) return;
      filler = true;
    }
    // It goes: to fill the entry when it took the fill above, else on its
    // own (the fill stored nothing, or took too long), or not at all.
    wait->done = true;
    if (end) wait->exchange.loop->cancel(wait->timer);  // (a timer that ran holds this wait while it runs)
    const Fetch go = std::move(wait->fetch);
    wait->fetch = nullptr;
    Miss mine = std::move(wait->miss);
    wait->miss = Miss{};
    if (ex == nullptr) return;  // answered, or the client went away meanwhile
    wait->cache->go(*ex, mine, go, filler, filler ? wait->id : 0);
  }

  // The Cache-Status of a request whose lookup said `status`, answered
  // from the fill it waited for.
  static std::string_view collapsed(std::string_view status) {
    if (status == "tern; fwd=vary-miss") return "tern; fwd=vary-miss; collapsed";
    if (status == "tern; fwd=stale") return "tern; fwd=stale; collapsed";
    if (status == "tern; fwd=request") return "tern; fwd=request; collapsed";
    return "tern; fwd=uri-miss; collapsed";
  }
};

void UpstreamCache::fetch(http::Exchange& exchange, Miss miss, Fetch fetch) const {
  const http::Request& request = exchange.request();
  // A request with a body goes at once: its body is not held while it
  // would wait.
  const bool body = request.has_body();
  if (!miss.fill || !lock_ || body || miss.bypass) return go(exchange, miss, fetch, miss.fill, 0);
  const KeyHash hash = miss.lock;
  net::EventLoop* loop = exchange.loop();
  auto wait =
      std::make_shared<Wait>(Wait{this, zone_, exchange.id(), std::move(miss), std::move(fetch), hash,
                                  zone_->inserts(), 0, {}});
  const bool filler = Wait::begin(wait);
  const int64_t now = unix_now();
  const bool updating = wait->miss.stale && may_serve_updating(wait->miss.stale->head, now);
  if (filler) {
    wait->done = true;
    if (updating && background_update_ &&
        refresh_in_background(exchange, wait->miss, wait->fetch, hash, wait->id, now)) {
      return;
    }
    return go(exchange, wait->miss, wait->fetch, true, wait->id);
  }
  // Another request refreshes the entry: this one has the stale one now.
  if (updating && serve_updating(*wait->miss.stale, now, exchange)) {
    wait->done = true;
    zone_->leave_fill(hash, wait->id);
    return exchange.finish();
  }
  wait->timer = loop->run_after(lock_timeout_, [wait] { Wait::resume(wait, std::nullopt); });
}

bool UpstreamCache::serve_updating(const Stored& entry, int64_t now, http::Exchange& exchange) const {
  const std::string status = "tern; hit; ttl=" + std::to_string(entry.head.expires - now) + "; detail=updating";
  serve(entry, now, exchange, status);
  if (!exchange.writer().started()) return false;
  exchange.request().set_cache_status("UPDATING");
  if (metrics_ != nullptr) metrics_->loop(exchange.loop()).response_cache_stale.add();
  return true;
}

bool UpstreamCache::refresh_in_background(http::Exchange& exchange, Miss& miss, Fetch& fetch, const KeyHash& hash,
                                          uint64_t lock, int64_t now) const {
  // The client first: when the entry's file went, it fills as usual.
  if (!serve_updating(*miss.stale, now, exchange)) return false;
  miss.looked_up = false;  // a request of the server's own: not a client's miss
  const bool started = BackgroundExchange::start(
      exchange, [this, miss = std::move(miss), fetch = std::move(fetch), lock](http::Exchange& refresh) mutable {
        go(refresh, miss, fetch, true, lock);
      });
  // No refresh: the fill is given up, and a later request makes one.
  if (!started) zone_->end_fill(hash, lock, FillEnd::kFailed);
  exchange.finish();
  return true;
}

}  // namespace tern::server
