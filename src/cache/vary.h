// Vary (RFC 9111 4.1): a response that names request fields in Vary is
// stored once per combination of the request's values of those fields (its
// variant), under the hash of its key and that variant; the key alone then
// holds a marker entry that names the fields, so that a lookup knows which
// of the request's values make the variant.
//
//   names = vary_names(response_fields);           // {"accept-encoding"}
//   hash = variant_hash(key, variant_of(request, names));
//
// Any thread.
#pragma once

#include <span>
#include <string>
#include <utility>
#include <vector>

#include "cache/entry_file.h"
#include "http/request.h"

namespace tern::cache {

// The field names of a response's Vary fields, lowercased, in order
// (empty: the response does not vary).
std::vector<std::string> vary_names(std::span<const http::Header> fields);

// The request's values of the fields `names`, one a line: the lines of a
// field sent more than once joined by ", ", a field not sent told from one
// sent empty.
std::string variant_of(const http::Request& request, const std::vector<std::string>& names);
// The same of a copy of a request's fields (name, value), in order.
std::string variant_of(std::span<const std::pair<std::string, std::string>> fields,
                       const std::vector<std::string>& names);

// The name of the variant `variant` of `key`.
KeyHash variant_hash(const std::string& key, const std::string& variant);

}  // namespace tern::cache
