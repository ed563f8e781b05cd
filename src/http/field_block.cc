#include "http/field_block.h"

namespace tern::http {

void FieldBlock::add(std::string_view name, std::string_view value) {
  const auto at = static_cast<uint32_t>(text_.size());
  text_.reserve(text_.size() + name.size() + value.size() + 4);
  text_.append(name).append(": ").append(value).append("\r\n");
  spans_.push_back({at, static_cast<uint32_t>(name.size()), static_cast<uint32_t>(at + name.size() + 2),
                    static_cast<uint32_t>(value.size())});
}

void FieldBlock::append(const FieldBlock& other) {
  for (size_t i = 0; i < other.size(); ++i) add(other.name(i), other.value(i));
}

}  // namespace tern::http
