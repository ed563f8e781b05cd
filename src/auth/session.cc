#include "auth/session.h"

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

std::string SessionSigner::sign(std::string_view username, int64_t now) const {
  std::string value = to_base64(username);
  value += '.';
  value += std::to_string(now + ttl_.count());
  value += '.' + to_base64(mac(value));
  return value;
}

std::optional<std::string> SessionSigner::verify(std::string_view value, int64_t now) const {
  const size_t last_dot = value.rfind('.');
  if (last_dot == std::string_view::npos) return std::nullopt;
  const std::string_view signed_part = value.substr(0, last_dot);
  auto given = from_base64(value.substr(last_dot + 1));
  if (!given || given->size() != crypto_auth_hmacsha256_BYTES) return std::nullopt;
  const std::string expected = mac(signed_part);
  if (sodium_memcmp(given->data(), expected.data(), expected.size()) != 0) return std::nullopt;
  const size_t dot = signed_part.find('.');
  if (dot == std::string_view::npos) return std::nullopt;
  const std::string_view expiry_text = signed_part.substr(dot + 1);
  int64_t expiry = 0;
  auto [end, ec] = std::from_chars(expiry_text.data(), expiry_text.data() + expiry_text.size(), expiry);
  if (ec != std::errc() || end != expiry_text.data() + expiry_text.size() || expiry <= now) {
    return std::nullopt;
  }
  return from_base64(signed_part.substr(0, dot));
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
