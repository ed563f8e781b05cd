#include "cache/vary.h"

#include <cctype>
#include <charconv>
#include <random>

#include "http/field_values.h"

namespace tern::cache {

std::vector<std::string> vary_names(std::span<const http::Header> fields) {
  std::vector<std::string> names;
  for (const http::Header& field : fields) {
    if (!http::iequals(field.name, "Vary")) continue;
    http::fields::for_each_element(field.value, [&names](std::string_view name) {
      if (!name.empty()) {
        std::string lower(name);
        for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        names.push_back(std::move(lower));
      }
      return true;
    });
  }
  return names;
}

namespace {

// Each name's value as RFC 9111 4.1 compares it: the field's lines joined
// by ", " (as one line listing them), after a mark that tells a field sent
// empty from one not sent at all.
template <typename Fields, typename NameOf, typename ValueOf>
std::string values_of(const Fields& fields, const std::vector<std::string>& names, NameOf name_of,
                      ValueOf value_of) {
  std::string out;
  for (const std::string& name : names) {
    bool present = false;
    for (const auto& field : fields) {
      if (!http::iequals(name_of(field), name)) continue;
      out.append(present ? ", " : "=");
      out.append(value_of(field));
      present = true;
    }
    out.push_back('\n');
  }
  return out;
}

}  // namespace

std::string variant_of(const http::Request& request, const std::vector<std::string>& names) {
  return values_of(
      request.headers(), names, [](const http::Header& h) { return std::string_view(h.name); },
      [](const http::Header& h) { return std::string_view(h.value); });
}

std::string variant_of(std::span<const std::pair<std::string, std::string>> fields,
                       const std::vector<std::string>& names) {
  return values_of(
      fields, names, [](const auto& field) { return std::string_view(field.first); },
      [](const auto& field) { return std::string_view(field.second); });
}

KeyHash variant_hash(const std::string& key, std::string_view epoch, const std::string& variant) {
  std::string text = key;
  text.push_back('\0');
  text.append(epoch);
  text.push_back('\0');
  text.append(variant);
  return KeyHash::of(text);
}

std::string new_epoch() {
  thread_local std::mt19937_64 random{std::random_device{}()};
  char text[16];
  const auto end = std::to_chars(text, text + sizeof text, random(), 16).ptr;
  return std::string(text, end);
}

}  // namespace tern::cache
