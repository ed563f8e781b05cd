#include "http/uri.h"

#include <cerrno>

#include "http/chars.h"

namespace tern::http {
namespace {

using chars::hex_value;

// Decodes the byte at encoded[*i], advancing *i past it (three bytes for an
// escape). Returns -1 for a bad or truncated escape.
int decode_one(std::string_view encoded, size_t* i) {
  char c = encoded[*i];
  if (c != '%') {
    ++*i;
    return static_cast<unsigned char>(c);
  }
  if (*i + 2 >= encoded.size()) return -1;
  int hi = hex_value(encoded[*i + 1]);
  int lo = hex_value(encoded[*i + 2]);
  if (hi < 0 || lo < 0) return -1;
  *i += 3;
  return hi * 16 + lo;
}

// Called when the segment after the last '/' in *out is complete: drops it if
// it is ".", drops it and its parent if it is "..". Leaves *out ending in '/'
// in both cases. Returns false if ".." would climb above the root.
bool finish_segment(std::string* out) {
  size_t start = out->rfind('/') + 1;
  std::string_view segment = std::string_view(*out).substr(start);
  if (segment == ".") {
    out->resize(start);
  } else if (segment == "..") {
    if (start == 1) return false;
    out->resize(start - 1);
    out->resize(out->rfind('/') + 1);
  }
  return true;
}

constexpr Error kBadEscape{EINVAL, "invalid percent escape"};

}  // namespace

namespace {

// True for the common path that normalisation leaves as it is: no escapes,
// no NUL, no empty, "." or ".." segments. One pass, then a single copy.
bool already_normal(std::string_view path) {
  if (path.empty() || path[0] != '/') return false;
  for (size_t i = 0; i < path.size(); ++i) {
    char c = path[i];
    if (c == '%' || c == '\0') return false;
    if (c == '/' && i + 1 < path.size() && (path[i + 1] == '/' || path[i + 1] == '.')) return false;
  }
  return true;
}

}  // namespace

Result<void> normalize_path(std::string_view encoded, std::string* out, bool* dot_segment) {
  if (dot_segment != nullptr) *dot_segment = false;
  if (already_normal(encoded)) {  // no "/." in it
    out->assign(encoded);
    return {};
  }
  out->clear();
  if (encoded.empty() || encoded[0] != '/') return Error{EINVAL, "path is not absolute"};
  out->push_back('/');
  size_t i = 1;
  while (i < encoded.size()) {
    int c = decode_one(encoded, &i);
    if (c < 0) return kBadEscape;
    if (c == 0) return Error{EINVAL, "NUL byte in path"};
    if (c != '/') {
      out->push_back(static_cast<char>(c));
      continue;
    }
    if (!finish_segment(out)) return Error{EINVAL, "path climbs above the root"};
    if (out->back() != '/') out->push_back('/');
  }
  if (!finish_segment(out)) return Error{EINVAL, "path climbs above the root"};
  if (dot_segment != nullptr) *dot_segment = out->find("/.") != std::string::npos;
  return {};
}

Result<std::string_view> normalized_path(std::string_view encoded, std::string* scratch,
                                         bool* dot_segment) {
  if (already_normal(encoded)) {
    if (dot_segment != nullptr) *dot_segment = false;
    return encoded;
  }
  if (Result<void> done = normalize_path(encoded, scratch, dot_segment); !done) return done.error();
  return std::string_view(*scratch);
}

Result<void> percent_decode(std::string_view encoded, std::string* out) {
  out->clear();
  size_t i = 0;
  while (i < encoded.size()) {
    int c = decode_one(encoded, &i);
    if (c < 0) return kBadEscape;
    out->push_back(static_cast<char>(c));
  }
  return {};
}

void append_percent_encoded_path(std::string_view path, std::string* out) {
  // RFC 3986: pchar = unreserved / pct-encoded / sub-delims / ":" / "@".
  static constexpr std::string_view kAllowed =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
      "-._~!$&'()*+,;=:@/";
  static constexpr char kHex[] = "0123456789ABCDEF";
  for (char c : path) {
    if (kAllowed.find(c) != std::string_view::npos) {
      out->push_back(c);
      continue;
    }
    auto byte = static_cast<unsigned char>(c);
    out->push_back('%');
    out->push_back(kHex[byte >> 4]);
    out->push_back(kHex[byte & 0xF]);
  }
}

Result<std::string> normalize_prefix(std::string_view prefix) {
  std::string normalized;
  if (auto done = normalize_path(prefix, &normalized); !done) return done.error();
  while (!normalized.empty() && normalized.back() == '/') normalized.pop_back();
  return normalized;
}

bool path_beneath(std::string_view prefix, std::string_view path, std::string_view* rest) {
  if (!path.starts_with(prefix)) return false;
  *rest = path.substr(prefix.size());
  return rest->empty() || rest->front() == '/';
}

}  // namespace tern::http
