#include "cache/vary.h"

#include <algorithm>
#include <cctype>

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

std::string variant_of(const http::Request& request, const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& name : names) {
    out.append(request.header(name));
    out.push_back('\n');
  }
  return out;
}

std::string variant_of(std::span<const std::pair<std::string, std::string>> fields,
                       const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& name : names) {
    // The first field of the name, as Request::header() finds it.
    const auto found = std::find_if(fields.begin(), fields.end(),
                                    [&name](const auto& field) { return http::iequals(field.first, name); });
    if (found != fields.end()) out.append(found->second);
    out.push_back('\n');
  }
  return out;
}

KeyHash variant_hash(const std::string& key, const std::string& variant) {
  std::string text = key;
  text.push_back('\0');
  text.append(variant);
  return KeyHash::of(text);
}

}  // namespace tern::cache
