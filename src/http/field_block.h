// FieldBlock: response fields prepared once and sent with many responses
// (a cached file's Content-Type, Last-Modified and ETag; a location's
// add_header fields). It holds their HTTP/1 text, ready to copy
// ("Name: value\r\n" each), and where each name and value lies in it, for
// a protocol that sends them as separate fields (HTTP/2's HPACK).
//
// A value type; not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tern::http {

class FieldBlock {
 public:
  // Adds one field, or every field of `other`, at the end.
  void add(std::string_view name, std::string_view value);
  void append(const FieldBlock& other);
  // Holds no field again.
  void clear() {
    text_.clear();
    spans_.clear();
  }

  bool empty() const { return spans_.empty(); }  // holds no field
  size_t size() const { return spans_.size(); }  // fields held
  // Every field as HTTP/1 writes it.
  std::string_view text() const { return text_; }
  // The name and the value of field `i`, in the order added.
  std::string_view name(size_t i) const { return {text_.data() + spans_[i].name_at, spans_[i].name_size}; }
  std::string_view value(size_t i) const { return {text_.data() + spans_[i].value_at, spans_[i].value_size}; }

 private:
  struct Span {
    uint32_t name_at, name_size, value_at, value_size;
  };
  std::string text_;
  std::vector<Span> spans_;
};

}  // namespace tern::http
