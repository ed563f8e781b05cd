// VariableText: a configuration's text with variables in it (a `return`
// URL, a try_files entry, a [[limit]]'s key), read into its parts once so
// that a request only appends them:
//
//   VariableText key("$remote_addr:$http_x_api_key");
//   key.expand(route, false, &out);
//
// $scheme $host $request_uri $uri $args $is_args $remote_addr
// $server_name $server_port $http_NAME $cookie_NAME $arg_NAME, $1..$9 and
// a regex location's named groups, each also as ${name}. A name that is none of
// these expands to nothing (the configuration refuses it: its checks ask
// variables() what the text holds).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace tern::server {

struct Route;

class VariableText {
 public:
  VariableText() = default;
  explicit VariableText(std::string_view text);

  // Appends the text to *out with the request's values in place of its
  // variables; in a URL ($uri percent-encoded) or not.
  void expand(const Route& route, bool url, std::string* out) const;

  const std::string& text() const { return text_; }
  bool empty() const { return text_.empty(); }

  enum class Kind : uint8_t {
    kLiteral,
    kCapture,  // $1..$9
    kNamedGroup,
    kServerName,
    kServerPort,
    kScheme,
    kHost,
    kRequestUri,
    kUri,
    kArgs,
    kIsArgs,
    kRemoteAddr,
    kField,   // $http_NAME
    kCookie,  // $cookie_NAME
    kArg,     // $arg_NAME: the query's parameter, as sent (not decoded)
  };
  struct Variable {
    Kind kind;
    uint8_t capture;        // $1..$9
    std::string_view name;  // a named group's, a field's or a cookie's name
  };

  // For the configuration's checks: the variables in the text, and whether
  // each '$' had a name (and each "${" its '}').
  std::vector<Variable> variables() const;
  bool well_formed() const { return well_formed_; }
  // Whether the text is well formed, has a variable, and has only
  // variables of these kinds (a key's check).
  bool only(std::initializer_list<Kind> kinds) const;

 private:
  struct Part {
    Kind kind;
    uint8_t capture = 0;
    std::string text;  // literal text, a field's variable name, a cookie's or group's name
  };

  std::string text_;
  std::vector<Part> parts_;
  bool well_formed_ = true;
};

}  // namespace tern::server
