// The HTTP side of static files: turns StaticFiles' decision into a
// response (head fields, then the body with sendfile, or an error page).
//
// Loop thread only (StaticFiles is per loop).
#pragma once

#include <chrono>

#include "http/request.h"
#include "http/response_writer.h"
#include "server/handler.h"
#include "files/static_files.h"
#include "server/handlers/variable_text.h"

namespace tern::server {

struct Location;

// The file `path` names beneath a location's root: the path itself, or for
// an alias location (its `prefix` given) what follows the prefix ("/img/"
// aliased: "/img/a.png" is "/a.png" beneath the alias). False when the
// path does not continue the prefix at a segment ("/imgx" for "/img").
bool alias_file_path(std::string_view prefix, std::string_view path, std::string* out);

// A regex location's alias ("/srv/files/$1", nginx's alias with captures):
// the directory its files are beneath (the part before the first
// variable, up to a '/': "/srv/files") and the rest, expanded for each
// request ("/$1").
struct RegexAlias {
  std::string root;
  std::string rest;
};
RegexAlias split_regex_alias(std::string_view alias);

// The static files of a location on the handler chain: the file the path
// names beneath the location's root (or, with an alias, what follows the
// location's prefix beneath the alias), or with try_files the first
// candidate that exists ("$uri", "$uri/", "/index.html" for a single-page
// app), then the last entry: a status ("=404") or a URI matched again
// against the site's locations. As with nginx, a directory's index file is
// an internal redirect too ("/wiki/" to "/wiki/doku.php", which a PHP
// location then takes; "/" to "/index.html", with that location's
// fields), and a directory named without its slash ("/wiki", by the path
// or by try_files' "$uri/") is 301 to the slash.
class StaticHandler final : public Handler {
 public:
  StaticHandler(const Location& location, bool use_mmap);
  Claim claim(Route& route) override;
  void respond(const Route& route, http::ResponseWriter& writer) override;

 private:
  Claim try_files(Route& route);
  Claim index(Route& route) const;
  // The path beneath the store's root; false when an alias location's
  // prefix does not end at a segment ("/imgx" for "/img").
  bool file_path(std::string_view path, std::string* out) const;

  std::string prefix_;  // of an alias location; empty otherwise
  VariableText regex_alias_;  // of a regex location's alias: the file beneath the root, with captures
  // try_files: each entry but the last, without a final '/' (`directory`:
  // it had one, and wants a directory); the last as written.
  struct TryEntry {
    VariableText path;
    bool directory;
  };
  std::vector<TryEntry> try_entries_;
  std::string try_last_;
  VariableText try_fallback_;  // the last, when a URI
  bool use_mmap_;
};

}  // namespace tern::server
