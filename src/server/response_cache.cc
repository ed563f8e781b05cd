#include "server/response_cache.h"

#include <charconv>

namespace tern::server {
namespace {

using Clock = std::chrono::steady_clock;

// The value of directive `name` in a Cache-Control list ("max-age=60"), or
// whether a bare directive is present ("no-store" -> "").
std::optional<std::string_view> directive(std::string_view list, std::string_view name) {
  while (!list.empty()) {
    size_t comma = list.find(',');
    std::string_view item = list.substr(0, comma);
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
    while (!item.empty() && (item.front() == ' ' || item.front() == '\t')) item.remove_prefix(1);
    while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) item.remove_suffix(1);
    size_t eq = item.find('=');
    if (!http::iequals(item.substr(0, eq), name)) continue;
    return eq == std::string_view::npos ? std::string_view() : item.substr(eq + 1);
  }
  return std::nullopt;
}

std::optional<int64_t> seconds(std::string_view text) {
  if (text.size() >= 2 && text.front() == '"' && text.back() == '"') text = text.substr(1, text.size() - 2);
  uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec == std::errc::result_out_of_range && end == text.data() + text.size()) {
    return INT64_MAX;  // capped by the caller
  }
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(value);
}

class Filler final : public upstream::ResponseTap {
 public:
  Filler(ResponseCache* cache, std::string key) : cache_(cache), key_(std::move(key)) {}

  void on_head(int status, std::span<const http::Header> headers) override {
    auto ttl = cache_->lifetime(status, headers);
    if (!ttl) return;
    entry_ = std::make_shared<CachedResponse>();
    entry_->status = status;
    for (const http::Header& h : headers) {
      if (http::iequals(h.name, "Content-Length")) continue;  // the writer adds its own
      entry_->headers.emplace_back(h.name, h.value);
    }
    entry_->stored = Clock::now();
    entry_->expires = entry_->stored + *ttl;
  }

  void on_body(std::string_view piece) override {
    if (!entry_) return;
    if (entry_->body.size() + piece.size() > cache_->max_entry_bytes()) return entry_.reset();
    entry_->body.append(piece);
  }

  void on_end(bool complete) override {
    if (complete && entry_) cache_->insert(key_, std::move(entry_));
    entry_.reset();
  }

 private:
  ResponseCache* const cache_;
  const std::string key_;
  std::shared_ptr<CachedResponse> entry_;  // null: not cacheable
};

}  // namespace

size_t CachedResponse::bytes() const {
  size_t n = sizeof *this + body.size();
  for (const auto& [name, value] : headers) n += name.size() + value.size() + 64;
  return n;
}

ResponseCache::ResponseCache(size_t max_bytes, std::chrono::milliseconds default_ttl)
    : max_bytes_(max_bytes), default_ttl_(default_ttl) {}

std::string ResponseCache::key(const http::Request& request) {
  std::string key;
  key.reserve(request.host().size() + 1 + request.uri().size());
  key.append(request.host());
  key.push_back(' ');
  key.append(request.uri());
  return key;
}

std::shared_ptr<const CachedResponse> ResponseCache::find(const std::string& key, Clock::time_point now) {
  std::lock_guard lock(mu_);
  auto it = index_.find(key);
  if (it == index_.end()) return nullptr;
  if (it->second->second->expires <= now) {
    erase(it->second);
    return nullptr;
  }
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->second;
}

void ResponseCache::insert(const std::string& key, std::shared_ptr<const CachedResponse> entry) {
  const size_t size = entry->bytes() + key.size();
  if (size > max_entry_bytes()) return;
  std::lock_guard lock(mu_);
  if (auto it = index_.find(key); it != index_.end()) erase(it->second);
  while (!lru_.empty() && bytes_ + size > max_bytes_) erase(std::prev(lru_.end()));
  lru_.emplace_front(key, std::move(entry));
  index_.emplace(lru_.front().first, lru_.begin());
  bytes_ += size;
}

void ResponseCache::erase(Lru::iterator it) {
  bytes_ -= it->second->bytes() + it->first.size();
  index_.erase(it->first);
  lru_.erase(it);
}

std::optional<std::chrono::milliseconds> ResponseCache::lifetime(
    int status, std::span<const http::Header> headers) const {
  if (status != 200 && status != 301) return std::nullopt;
  std::optional<int64_t> max_age;
  for (const http::Header& h : headers) {
    if (http::iequals(h.name, "Set-Cookie") || http::iequals(h.name, "Vary")) return std::nullopt;
    if (!http::iequals(h.name, "Cache-Control")) continue;
    if (directive(h.value, "no-store") || directive(h.value, "no-cache") ||
        directive(h.value, "private")) {
      return std::nullopt;
    }
    if (auto v = directive(h.value, "s-maxage")) {
      max_age = seconds(*v);
    } else if (auto age = directive(h.value, "max-age"); age && !max_age) {
      max_age = seconds(*age);
    }
  }
  // RFC 9111 1.2.2: a lifetime too large to represent counts as 2^31 s.
  constexpr int64_t kMaxSeconds = int64_t{1} << 31;
  if (max_age && *max_age > kMaxSeconds) max_age = kMaxSeconds;
  std::chrono::milliseconds ttl = max_age ? std::chrono::seconds(*max_age) : default_ttl_;
  if (ttl.count() <= 0) return std::nullopt;
  return ttl;
}

size_t ResponseCache::bytes() const {
  std::lock_guard lock(mu_);
  return bytes_;
}

size_t ResponseCache::entries() const {
  std::lock_guard lock(mu_);
  return lru_.size();
}

std::unique_ptr<upstream::ResponseTap> ResponseCache::filler(std::string key) {
  return std::make_unique<Filler>(this, std::move(key));
}

}  // namespace tern::server
