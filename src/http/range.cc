#include "http/range.h"

#include <algorithm>
#include <charconv>
#include <limits>

#include "base/assert.h"
#include "http/chars.h"
#include "http/request.h"

namespace tern::http {
namespace {

constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();

using chars::is_digit;
using chars::is_ows;

void skip_ows(std::string_view* s) {
  while (!s->empty() && is_ows(s->front())) s->remove_prefix(1);
}

// 1*DIGIT, saturating at UINT64_MAX. Returns false if there is no digit.
bool read_number(std::string_view* s, uint64_t* value) {
  size_t n = 0;
  uint64_t v = 0;
  while (n < s->size() && is_digit((*s)[n])) {
    auto digit = static_cast<uint64_t>((*s)[n] - '0');
    v = v > (kMax - digit) / 10 ? kMax : v * 10 + digit;
    ++n;
  }
  if (n == 0) return false;
  s->remove_prefix(n);
  *value = v;
  return true;
}

// What one range-spec means for this representation.
enum class Spec : uint8_t {
  kInvalid,        // a syntax error: the whole header is ignored
  kUnsatisfiable,  // starts at or past the end, or "-0"
  kSatisfiable,    // *range holds the resolved bytes
  kEmptyWhole,     // "-n" (n > 0) of an empty representation: all of nothing
};

// Parses one range-spec, already cut out of the list and trimmed.
Spec parse_spec(std::string_view spec, uint64_t size, RangeResult* range) {
  if (!spec.empty() && spec.front() == '-') {  // suffix-range
    spec.remove_prefix(1);
    uint64_t suffix = 0;
    if (!read_number(&spec, &suffix) || !spec.empty()) return Spec::kInvalid;
    if (suffix == 0) return Spec::kUnsatisfiable;
    if (size == 0) return Spec::kEmptyWhole;
    range->length = suffix < size ? suffix : size;
    range->offset = size - range->length;
    return Spec::kSatisfiable;
  }
  uint64_t first = 0, last = kMax;
  if (!read_number(&spec, &first) || spec.empty() || spec.front() != '-') return Spec::kInvalid;
  spec.remove_prefix(1);
  if (!spec.empty() && (!read_number(&spec, &last) || !spec.empty())) return Spec::kInvalid;
  if (last < first) return Spec::kInvalid;
  if (first >= size) return Spec::kUnsatisfiable;
  if (last >= size) last = size - 1;
  range->offset = first;
  range->length = last - first + 1;
  return Spec::kSatisfiable;
}

// Removes and returns the next comma-separated element, trimmed of OWS.
std::string_view next_element(std::string_view* list) {
  size_t comma = list->find(',');
  std::string_view element = list->substr(0, comma);
  *list = comma == std::string_view::npos ? std::string_view() : list->substr(comma + 1);
  skip_ows(&element);
  while (!element.empty() && is_ows(element.back())) element.remove_suffix(1);
  return element;
}

}  // namespace

RangeResult parse_range(std::string_view header, uint64_t size) {
  constexpr std::string_view kUnit = "bytes=";
  if (header.size() < kUnit.size() || !iequals(header.substr(0, kUnit.size()), kUnit)) return {};
  std::string_view list = header.substr(kUnit.size());
  RangeResult first_found{RangeKind::kSingle, 0, 0};
  int specs = 0, satisfiable = 0;
  bool empty_whole = false;
  while (!list.empty()) {
    std::string_view element = next_element(&list);
    if (element.empty()) continue;  // empty list elements are allowed
    ++specs;
    RangeResult range{RangeKind::kSingle, 0, 0};
    switch (parse_spec(element, size, &range)) {
      case Spec::kInvalid: return {};
      case Spec::kUnsatisfiable: break;
      case Spec::kEmptyWhole: empty_whole = true; break;
      case Spec::kSatisfiable:
        if (++satisfiable == 1) first_found = range;
        break;
    }
  }
  if (specs == 0 || empty_whole) return {};
  if (satisfiable == 0) return {RangeKind::kUnsatisfiable, 0, 0};
  if (satisfiable > 1) return {RangeKind::kMultiple, 0, 0};
  return first_found;
}

namespace {

char* put_number(char* p, char* end, uint64_t v) {
  auto [ptr, ec] = std::to_chars(p, end, v);
  TERN_CHECK(ec == std::errc());
  return ptr;
}

}  // namespace

std::string_view format_content_range(uint64_t offset, uint64_t length, uint64_t size,
                                      std::span<char, kContentRangeMaxSize> out) {
  TERN_CHECK(length > 0);
  char* p = out.data();
  char* end = p + out.size();
  p = std::copy_n("bytes ", 6, p);
  p = put_number(p, end, offset);
  *p++ = '-';
  p = put_number(p, end, offset + length - 1);
  *p++ = '/';
  p = put_number(p, end, size);
  return {out.data(), static_cast<size_t>(p - out.data())};
}

std::string_view format_unsatisfied_range(uint64_t size,
                                          std::span<char, kContentRangeMaxSize> out) {
  char* p = std::copy_n("bytes */", 8, out.data());
  p = put_number(p, out.data() + out.size(), size);
  return {out.data(), static_cast<size_t>(p - out.data())};
}

}  // namespace tern::http
