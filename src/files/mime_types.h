// MimeTypes: maps a file name's extension to a Content-Type value.
//
// Starts with a built-in table of common web types; the config file may add or
// replace entries (nginx's "types" block) and change the default. Extensions
// compare case-insensitively ("PNG" == "png").
//
// Text types carry "; charset=utf-8": text/*, JavaScript, JSON, XML and SVG.
// nginx's stock mime.types does not (it leaves charset to a separate
// "charset" directive, off by default), and browsers then guess, which breaks
// non-ASCII pages; Caddy, Go's net/http and most CDNs label them UTF-8, and
// so do we. JavaScript is "text/javascript" (RFC 9239), not the older
// "application/javascript".
//
// Owned by the server configuration, built before the loops start. After that
// it is read-only and lookups may run on any thread at once; set() and
// set_default() are for start-up only, and they invalidate views returned
// earlier for the entries they touch.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <unordered_map>

namespace tern::files {

class MimeTypes {
 public:
  static constexpr std::string_view kDefaultType = "application/octet-stream";  // until set_default()

  // The built-in table.
  MimeTypes();

  // Maps `extension` (without the dot, any case) to `type`, replacing an
  // existing mapping. Start-up only.
  void set(std::string_view extension, std::string_view type);
  // The type of files whose extension is unknown or missing. Start-up only.
  void set_default(std::string_view type) { default_type_ = type; }

  // The type for a path or file name: its extension is what follows the last
  // '.' of the last segment. A leading dot does not start an extension
  // (".profile" has none), and neither does a trailing one. Never allocates;
  // the view lives as long as this object's entry does.
  std::string_view lookup(std::string_view path) const;
  // The type for a bare extension ("html"), or the default.
  std::string_view lookup_extension(std::string_view extension) const;

  size_t size() const { return types_.size(); }  // the extensions mapped

 private:
  // Case-insensitive hashing and equality, transparent so that lookups with a
  // string_view neither allocate nor lower-case a copy.
  struct CaseInsensitiveHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const;
  };
  struct CaseInsensitiveEqual {
    using is_transparent = void;
    bool operator()(std::string_view a, std::string_view b) const;
  };

  std::unordered_map<std::string, std::string, CaseInsensitiveHash, CaseInsensitiveEqual> types_;
  std::string default_type_{kDefaultType};
};

}  // namespace tern::files
