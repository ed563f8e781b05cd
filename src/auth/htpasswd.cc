#include "auth/htpasswd.h"

#include <crypt.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>

namespace tern::auth {
namespace {

enum class Scheme { kCrypt, kApr1, kSha1, kNone };

Scheme scheme_of(std::string_view hash) {
  for (std::string_view prefix : {"$2y$", "$2a$", "$2b$", "$5$", "$6$"}) {
    if (hash.starts_with(prefix)) return Scheme::kCrypt;
  }
  if (hash.starts_with("$apr1$")) return Scheme::kApr1;
  if (hash.starts_with("{SHA}")) return Scheme::kSha1;
  return Scheme::kNone;
}

bool same(std::string_view a, std::string_view b) {
  // The lengths are no secret (the stored hash's is in the file format).
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

struct MdFree {
  void operator()(EVP_MD_CTX* ctx) const { EVP_MD_CTX_free(ctx); }
};

// One digest of the pieces.
template <size_t N>
std::array<unsigned char, N> digest(const EVP_MD* md, std::initializer_list<std::string_view> pieces) {
  std::unique_ptr<EVP_MD_CTX, MdFree> ctx(EVP_MD_CTX_new());
  std::array<unsigned char, N> out{};
  EVP_DigestInit_ex(ctx.get(), md, nullptr);
  for (std::string_view p : pieces) EVP_DigestUpdate(ctx.get(), p.data(), p.size());
  unsigned int length = 0;
  EVP_DigestFinal_ex(ctx.get(), out.data(), &length);
  return out;
}

std::string_view bytes(const std::array<unsigned char, 16>& d, size_t n = 16) {
  return {reinterpret_cast<const char*>(d.data()), n};
}

// Apache's MD5 ($apr1$salt$digest): the MD5-crypt algorithm with its own
// magic, 1,000 rounds.
std::string apr1(std::string_view password, std::string_view hash) {
  constexpr std::string_view kMagic = "$apr1$";
  std::string_view salt = hash.substr(kMagic.size());
  salt = salt.substr(0, std::min(salt.find('$'), size_t{8}));
  const EVP_MD* md5 = EVP_md5();
  const auto alternate = digest<16>(md5, {password, salt, password});
  std::unique_ptr<EVP_MD_CTX, MdFree> ctx(EVP_MD_CTX_new());
  EVP_DigestInit_ex(ctx.get(), md5, nullptr);
  EVP_DigestUpdate(ctx.get(), password.data(), password.size());
  EVP_DigestUpdate(ctx.get(), kMagic.data(), kMagic.size());
  EVP_DigestUpdate(ctx.get(), salt.data(), salt.size());
  for (size_t left = password.size(); left > 0; left -= std::min<size_t>(left, 16)) {
    EVP_DigestUpdate(ctx.get(), alternate.data(), std::min<size_t>(left, 16));
  }
  for (size_t i = password.size(); i != 0; i >>= 1) {
    const char zero = 0;
    EVP_DigestUpdate(ctx.get(), (i & 1) != 0 ? &zero : password.data(), 1);
  }
  std::array<unsigned char, 16> sum{};
  unsigned int length = 0;
  EVP_DigestFinal_ex(ctx.get(), sum.data(), &length);
  for (int round = 0; round < 1000; ++round) {
    const std::string_view odd = (round & 1) != 0 ? password : bytes(sum);
    const std::string_view even = (round & 1) != 0 ? bytes(sum) : password;
    sum = digest<16>(md5, {odd, round % 3 != 0 ? salt : std::string_view(),
                           round % 7 != 0 ? password : std::string_view(), even});
  }
  static constexpr char kItoa64[] = "./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
  std::string out(kMagic);
  out.append(salt);
  out += '$';
  auto put = [&out](unsigned value, int chars) {
    for (int i = 0; i < chars; ++i, value >>= 6) out += kItoa64[value & 0x3f];
  };
  static constexpr int kGroups[5][3] = {{0, 6, 12}, {1, 7, 13}, {2, 8, 14}, {3, 9, 15}, {4, 10, 5}};
  for (const auto& g : kGroups) put((unsigned{sum[g[0]]} << 16) | (unsigned{sum[g[1]]} << 8) | sum[g[2]], 4);
  put(sum[11], 2);
  return out;
}

// {SHA}: base64 of the password's SHA-1.
std::string sha1(std::string_view password) {
  const auto d = digest<20>(EVP_sha1(), {password});
  unsigned char text[32] = {};
  const int n = EVP_EncodeBlock(text, d.data(), static_cast<int>(d.size()));
  return "{SHA}" + std::string(reinterpret_cast<const char*>(text), static_cast<size_t>(n));
}

bool crypt_matches(std::string_view hash, std::string_view password) {
  // crypt needs NUL-terminated strings; a password with a NUL in it cannot
  // be one htpasswd hashed.
  if (password.find('\0') != std::string_view::npos) return false;
  std::string key(password);
  const std::string setting(hash);
  // Per thread: struct crypt_data is 32 KiB, too much for every call's stack.
  thread_local std::unique_ptr<crypt_data> data = std::make_unique<crypt_data>();
  data->initialized = 0;
  const char* out = crypt_rn(key.c_str(), setting.c_str(), data.get(), sizeof(crypt_data));
  const bool matches = out != nullptr && out[0] != '*' && same(out, hash);
  // No copy of the password stays behind (crypt_data holds the key's state).
  OPENSSL_cleanse(key.data(), key.size());
  OPENSSL_cleanse(data.get(), sizeof(crypt_data));
  return matches;
}

}  // namespace

bool password_matches(std::string_view hash, std::string_view password) {
  switch (scheme_of(hash)) {
    case Scheme::kCrypt: return crypt_matches(hash, password);
    case Scheme::kApr1: return same(apr1(password, hash), hash);
    case Scheme::kSha1: return same(sha1(password), hash);
    case Scheme::kNone: return false;
  }
  return false;
}

Htpasswd Htpasswd::load(const std::string& path, std::vector<std::string>* warnings) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": " + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw std::runtime_error(path + ": " + std::strerror(errno));
  return parse(text.str(), path, warnings);
}

Htpasswd Htpasswd::parse(std::string_view text, std::string_view name, std::vector<std::string>* warnings) {
  Htpasswd file;
  int number = 0;
  while (!text.empty()) {
    const size_t end = std::min(text.find('\n'), text.size());
    std::string_view line = text.substr(0, end);
    text.remove_prefix(std::min(end + 1, text.size()));
    ++number;
    if (line.ends_with('\r')) line.remove_suffix(1);
    if (line.empty() || line.front() == '#') continue;
    const std::string where = std::string(name) + ":" + std::to_string(number) + ": ";
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0) {
      throw std::runtime_error(where + "expected user:hash");
    }
    const std::string user(line.substr(0, colon));
    // What follows the hash after another ':' is a comment (no hash holds one).
    std::string_view hash = line.substr(colon + 1);
    hash = hash.substr(0, hash.find(':'));
    const Scheme scheme = scheme_of(hash);
    if (scheme == Scheme::kNone) {
      throw std::runtime_error(where + user + ": a hash tern does not take (bcrypt \"$2y$\", \"$5$\", \"$6$\", \"$apr1$\" or "
                           "\"{SHA}\"; DES crypt and plain text are refused): htpasswd -B makes bcrypt");
    }
    if (scheme != Scheme::kCrypt && warnings != nullptr) {
      warnings->push_back(where + user + ": " + (scheme == Scheme::kApr1 ? "apr1 (MD5)" : "{SHA} (unsalted SHA-1)") +
                          " is a weak hash; htpasswd -B makes bcrypt");
    }
    if (!file.users_.emplace(user, std::string(hash)).second) {
      throw std::runtime_error(where + user + ": named twice");
    }
    // The decoy costs what the dearest scheme costs: an unknown name must
    // not answer sooner than a known one.
    if (file.decoy_.empty() || (scheme == Scheme::kCrypt && scheme_of(file.decoy_) != Scheme::kCrypt)) {
      file.decoy_ = hash;
    }
  }
  return file;
}

bool Htpasswd::verify(std::string_view user, std::string_view password) const {
  const auto it = users_.find(std::string(user));
  if (it == users_.end()) {
    // As long as a real user's check, and false whatever it finds.
    if (!decoy_.empty()) (void)password_matches(decoy_, password);
    return false;
  }
  return password_matches(it->second, password);
}

}  // namespace tern::auth
