// Vary (RFC 9111 4.1): a response that names request fields in Vary is
// stored once per combination of the request's values of those fields (its
// variant), under the hash of its key and that variant; the key alone then
// holds a marker entry that names the fields, so that a lookup knows which
// of the request's values make the variant. The marker also holds the
// epoch its variants are stored under (its head's `variant`): a marker
// written with a new epoch leaves the variants of the old one unfound, and
// they age out (an unsafe method's success ends them all so, at the cost of
// one small file).
//
//   names = vary_names(response_fields);           // {"accept-encoding"}
//   hash = variant_hash(key, marker_epoch, variant_of(request, names));
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

// The name of the variant `variant` of `key` under its marker's `epoch`.
KeyHash variant_hash(const std::string& key, std::string_view epoch, const std::string& variant);

// An epoch for a marker made anew: random, so that a marker made again
// (the last one evicted, or ended) never finds variants stored before it.
std::string new_epoch();

}  // namespace tern::cache
