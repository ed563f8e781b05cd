// Percent-decoding and normalisation of request paths.
//
// normalize_path turns the still-encoded path of an origin-form request-target
// ("/a/./b%20c//d/../e.html", the part before '?') into a decoded, absolute,
// canonical path ("/a/b c/e.html") that cannot name anything above "/". The
// static-file handler appends it to a document root, so this function is the
// line between the client's bytes and the file system: every way of spelling
// ".." (encoded or not) is resolved here, and one that would climb above "/"
// is an error (answered 400, as nginx answers "GET /../x").
//
// Rules, following nginx's ngx_http_parse_complex_uri:
//   - "%XX" is decoded; a bad escape ("%zz", a truncated "%4") is an error.
//   - A decoded NUL is an error: no file name can contain one, and C APIs
//     would silently truncate at it.
//   - "%2F" decodes to '/' and then counts as a separator like any other
//     slash. (Apache refuses it by default; nginx decodes it. Either way it
//     cannot escape, because dot segments are resolved after decoding.)
//   - Repeated slashes merge; "." segments vanish; ".." removes the previous
//     segment.
//   - A trailing slash is kept ("/a/" stays "/a/", and "/a/." or "/a/b/.."
//     become "/a/"), because the caller needs it: a directory requested
//     without one is redirected.
//   - A backslash is an ordinary byte. On Linux it is a legal file-name
//     character, not a separator, so "/a\..\b" names one odd file in the root
//     and nothing is resolved through it.
//
// Free functions on caller-owned strings: the output is written into a
// std::string the caller reuses, so steady-state requests do not allocate.
// Any thread.
#pragma once

#include <string>
#include <string_view>

#include "base/result.h"

namespace tern::http {

// Decodes and normalises `encoded` into *out (replacing its contents). On
// success *out starts with '/', holds no "." or ".." segment and no "//", and
// ends with '/' exactly when the request named a directory form. `encoded`
// must start with '/' (origin-form); anything else is an error. Errors carry
// EINVAL and a short reason in `what`; callers answer 400. On error *out holds
// unspecified contents. With `dot_segment` set, *dot_segment says whether a
// segment of the result starts with '.' (".git", ".env"): found for free,
// since the common path that needs no work has none.
Result<void> normalize_path(std::string_view encoded, std::string* out,
                            bool* dot_segment = nullptr);

// The same, without a copy for a path that needs no work (most do not): a
// view of `encoded` itself, or of *scratch where the result was built.
Result<std::string_view> normalized_path(std::string_view encoded, std::string* scratch,
                                         bool* dot_segment = nullptr);

// Decodes every "%XX" in `encoded` into *out (replacing its contents). '+' is
// left alone (it means a space only in HTML form bodies and queries, which is
// the caller's decision). A decoded NUL is kept, because a query value is not
// a file name. An invalid escape is an error (EINVAL).
Result<void> percent_decode(std::string_view encoded, std::string* out);

// Appends `path` to *out, percent-encoding every byte that may not appear
// literally in an absolute path (RFC 3986 "pchar" plus '/'). Used to build a
// Location header from a decoded path.
void append_percent_encoded_path(std::string_view path, std::string* out);

// A handler's URL prefix ("/assets/", "/api", "/") decoded and normalised,
// without its final '/' ("/assets", "/api", ""); an error for one that is
// not an absolute path.
Result<std::string> normalize_prefix(std::string_view prefix);

// Whether the normalised `path` is `prefix` (as normalize_prefix made it)
// or beneath it at a segment: "/assets" and "/assets/a.css" are beneath
// "/assets", "/assetsx" is not. *rest is what follows the prefix: empty, or
// from its '/'.
bool path_beneath(std::string_view prefix, std::string_view path, std::string_view* rest);

}  // namespace tern::http
