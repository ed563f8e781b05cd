#include "files/mime_types.h"

#include <array>
#include <utility>

#include "http/request.h"

namespace tern::files {
namespace {

struct Entry {
  std::string_view extension;
  std::string_view type;
};

// Chosen from nginx's mime.types, the IANA registry and what browsers expect
// for the types nginx lacks (avif, wasm, mjs, webmanifest).
constexpr std::array kBuiltIn = {
    // Text and documents.
    Entry{"html", "text/html; charset=utf-8"},
    Entry{"htm", "text/html; charset=utf-8"},
    Entry{"shtml", "text/html; charset=utf-8"},
    Entry{"css", "text/css; charset=utf-8"},
    Entry{"js", "text/javascript; charset=utf-8"},
    Entry{"mjs", "text/javascript; charset=utf-8"},
    Entry{"json", "application/json; charset=utf-8"},
    Entry{"map", "application/json; charset=utf-8"},
    Entry{"webmanifest", "application/manifest+json; charset=utf-8"},
    Entry{"txt", "text/plain; charset=utf-8"},
    Entry{"text", "text/plain; charset=utf-8"},
    Entry{"log", "text/plain; charset=utf-8"},
    Entry{"md", "text/markdown; charset=utf-8"},
    Entry{"markdown", "text/markdown; charset=utf-8"},
    Entry{"csv", "text/csv; charset=utf-8"},
    Entry{"tsv", "text/tab-separated-values; charset=utf-8"},
    Entry{"xml", "text/xml; charset=utf-8"},
    Entry{"rss", "application/rss+xml; charset=utf-8"},
    Entry{"atom", "application/atom+xml; charset=utf-8"},
    Entry{"yaml", "application/yaml; charset=utf-8"},
    Entry{"yml", "application/yaml; charset=utf-8"},
    Entry{"toml", "application/toml; charset=utf-8"},
    Entry{"ics", "text/calendar; charset=utf-8"},
    Entry{"vtt", "text/vtt; charset=utf-8"},
    Entry{"pdf", "application/pdf"},
    Entry{"rtf", "application/rtf"},
    Entry{"wasm", "application/wasm"},
    // Images.
    Entry{"png", "image/png"},
    Entry{"jpg", "image/jpeg"},
    Entry{"jpeg", "image/jpeg"},
    Entry{"gif", "image/gif"},
    Entry{"webp", "image/webp"},
    Entry{"avif", "image/avif"},
    Entry{"svg", "image/svg+xml; charset=utf-8"},
    Entry{"svgz", "image/svg+xml"},
    Entry{"ico", "image/x-icon"},
    Entry{"bmp", "image/bmp"},
    Entry{"tif", "image/tiff"},
    Entry{"tiff", "image/tiff"},
    // Fonts.
    Entry{"woff", "font/woff"},
    Entry{"woff2", "font/woff2"},
    Entry{"ttf", "font/ttf"},
    Entry{"otf", "font/otf"},
    Entry{"eot", "application/vnd.ms-fontobject"},
    // Audio and video.
    Entry{"mp4", "video/mp4"},
    Entry{"m4v", "video/mp4"},
    Entry{"webm", "video/webm"},
    Entry{"ogv", "video/ogg"},
    Entry{"mov", "video/quicktime"},
    Entry{"mkv", "video/x-matroska"},
    Entry{"ts", "video/mp2t"},
    Entry{"m3u8", "application/vnd.apple.mpegurl"},
    Entry{"mp3", "audio/mpeg"},
    Entry{"ogg", "audio/ogg"},
    Entry{"oga", "audio/ogg"},
    Entry{"opus", "audio/ogg"},
    Entry{"wav", "audio/wav"},
    Entry{"flac", "audio/flac"},
    Entry{"m4a", "audio/mp4"},
    Entry{"aac", "audio/aac"},
    // Archives and binaries.
    Entry{"zip", "application/zip"},
    Entry{"gz", "application/gzip"},
    Entry{"tgz", "application/gzip"},
    Entry{"tar", "application/x-tar"},
    Entry{"bz2", "application/x-bzip2"},
    Entry{"xz", "application/x-xz"},
    Entry{"zst", "application/zstd"},
    Entry{"7z", "application/x-7z-compressed"},
    Entry{"bin", "application/octet-stream"},
    Entry{"exe", "application/octet-stream"},
    Entry{"iso", "application/octet-stream"},
};

char ascii_lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + ('a' - 'A')) : c; }

// The extension of the last segment of `path`, or "" if it has none.
std::string_view extension_of(std::string_view path) {
  std::string_view name = path.substr(path.rfind('/') + 1);
  size_t dot = name.rfind('.');
  if (dot == std::string_view::npos || dot == 0) return {};
  return name.substr(dot + 1);
}

}  // namespace

size_t MimeTypes::CaseInsensitiveHash::operator()(std::string_view s) const {
  // FNV-1a over the lower-cased bytes; extensions are short.
  size_t h = 14695981039346656037ull;
  for (char c : s) {
    h ^= static_cast<unsigned char>(ascii_lower(c));
    h *= 1099511628211ull;
  }
  return h;
}

bool MimeTypes::CaseInsensitiveEqual::operator()(std::string_view a, std::string_view b) const {
  return http::iequals(a, b);
}

MimeTypes::MimeTypes() {
  types_.reserve(kBuiltIn.size());
  for (const Entry& e : kBuiltIn) set(e.extension, e.type);
}

void MimeTypes::set(std::string_view extension, std::string_view type) {
  auto it = types_.find(extension);
  if (it != types_.end()) {
    it->second = type;
    return;
  }
  types_.emplace(std::string(extension), std::string(type));
}

std::string_view MimeTypes::lookup(std::string_view path) const {
  return lookup_extension(extension_of(path));
}

std::string_view MimeTypes::lookup_extension(std::string_view extension) const {
  if (extension.empty()) return default_type_;
  auto it = types_.find(extension);
  return it == types_.end() ? std::string_view(default_type_) : std::string_view(it->second);
}

}  // namespace tern::files
