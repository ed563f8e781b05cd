#include "auth/session_signer.h"

#include <charconv>

namespace tern::auth {
namespace {

constexpr int kVariant = sodium_base64_VARIANT_URLSAFE_NO_PADDING;

std::string to_base64(std::string_view data) {
  std::string out(sodium_base64_encoded_len(data.size(), kVariant), '\0');
  sodium_bin2base64(out.data(), out.size(), reinterpret_cast<const unsigned char*>(data.data()),
                    data.size(), kVariant);
  out.resize(out.size() - 1);  // the terminating NUL
  return out;
}

std::optional<std::string> from_base64(std::string_view text) {
  std::string out(text.size(), '\0');
  size_t length = 0;
  if (sodium_base642bin(reinterpret_cast<unsigned char*>(out.data()), out.size(), text.data(),
                        text.size(), nullptr, &length, nullptr, kVariant) != 0) {
    return std::nullopt;
  }
  out.resize(length);
  return out;
}

}  // namespace

SessionSigner::SessionSigner(std::string_view secret, std::chrono::seconds ttl) : ttl_(ttl) {
  // A key of the right size whatever the secret's length.
  crypto_generichash(key_.data(), key_.size(), reinterpret_cast<const unsigned char*>(secret.data()),
                     secret.size(), nullptr, 0);
}

std::string SessionSigner::mac(std::string_view message) const {
  unsigned char out[crypto_auth_hmacsha256_BYTES];
  crypto_auth_hmacsha256(out, reinterpret_cast<const unsigned char*>(message.data()), message.size(),
                         key_.data());
  return std::string(reinterpret_cast<const char*>(out), sizeof out);
}

// Digits only, no sign, no leading '+', within range.
template <typename T>
std::optional<T> parse_number(std::string_view text) {
  T n{};
  if (text.empty() || text.front() == '-' || text.front() == '+') return std::nullopt;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return n;
}

std::string SessionSigner::sign(std::string_view username, uint64_t generation, int64_t now) const {
  std::string value = to_base64(username);
  value += '.';
  value += std::to_string(generation);
  value += '.';
  value += std::to_string(now + ttl_.count());
  value += '.' + to_base64(mac(value));
  return value;
}

std::optional<SessionSigner::Session> SessionSigner::verify(std::string_view value, int64_t now) const {
  const size_t last_dot = value.rfind('.');
  if (last_dot == std::string_view::npos) return std::nullopt;
  const std::string_view signed_part = value.substr(0, last_dot);
  auto given = from_base64(value.substr(last_dot + 1));
  if (!given || given->size() != crypto_auth_hmacsha256_BYTES) return std::nullopt;
  const std::string expected = mac(signed_part);
  if (sodium_memcmp(given->data(), expected.data(), expected.size()) != 0) return std::nullopt;
  // base64url(username) "." generation "." expiry; base64url has no dots.
  const size_t first = signed_part.find('.');
  const size_t second = first == std::string_view::npos ? first : signed_part.find('.', first + 1);
  if (second == std::string_view::npos) return std::nullopt;
  auto generation = parse_number<uint64_t>(signed_part.substr(first + 1, second - first - 1));
  auto expiry = parse_number<int64_t>(signed_part.substr(second + 1));
  if (!generation || !expiry || *expiry <= now) return std::nullopt;
  auto username = from_base64(signed_part.substr(0, first));
  if (!username) return std::nullopt;
  return Session{std::move(*username), *generation};
}

std::string_view SessionSigner::find_cookie(std::string_view header) {
  while (!header.empty()) {
    size_t semi = header.find(';');
    std::string_view pair = header.substr(0, semi);
    header = semi == std::string_view::npos ? std::string_view() : header.substr(semi + 1);
    while (!pair.empty() && pair.front() == ' ') pair.remove_prefix(1);
    if (pair.starts_with(kCookieName) && pair.size() > kCookieName.size() &&
        pair[kCookieName.size()] == '=') {
      return pair.substr(kCookieName.size() + 1);
    }
  }
  return {};
}

}  // namespace tern::auth
