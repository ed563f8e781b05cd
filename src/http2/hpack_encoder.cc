#include "http2/hpack_encoder.h"

#include <algorithm>
#include <cassert>
#include <charconv>

#include "http2/hpack_primitives.h"

namespace tern::http2 {
namespace {

// Room for the size updates that may open a block.
constexpr size_t kUpdateRoom = 2 * kMaxIntBytes;

// A string literal as it will be written.
struct Literal {
  bool huffman = false;
  size_t huffman_size = 0;

  size_t room(std::string_view s) const { return kMaxIntBytes + (huffman ? huffman_size : s.size()); }
};

// Static table entries (RFC 7541 Appendix A) by the names below.
constexpr uint8_t kAuthorization = 23;
constexpr uint8_t kContentLength = 28;
constexpr uint8_t kCookie = 32;
constexpr uint8_t kProxyAuthorization = 49;
constexpr uint8_t kSetCookie = 55;

// Never indexed (RFC 7541 7.1.3): credentials, and cookies short enough
// to guess. All four names are the static table's, so a field's static
// name index says whether it is one of them.
bool sensitive(uint8_t static_name, std::string_view value) {
  if (static_name == kAuthorization || static_name == kProxyAuthorization) return true;
  return value.size() < 20 && (static_name == kCookie || static_name == kSetCookie);
}

}  // namespace

HpackEncoder::HpackEncoder(const Settings& settings)
    : settings_(settings),
      table_(kHpackDefaultTableSize),
      target_size_(std::min(settings.max_table_size, kHpackDefaultTableSize)),
      min_size_(target_size_) {
  // Both ends start at 4096 (RFC 9113 section 6.5.2); a smaller table of
  // ours is announced in the first block.
  update_pending_ = target_size_ != kHpackDefaultTableSize;
}

void HpackEncoder::set_peer_table_size(uint32_t size) {
  target_size_ = std::min({size, settings_.max_table_size, kHpackMaxInt});
  min_size_ = update_pending_ ? std::min(min_size_, target_size_) : target_size_;
  update_pending_ = true;
}

void HpackEncoder::reset_table() {
  min_size_ = 0;
  update_pending_ = true;
}

// Runs before every representation, so that the table a field is looked
// up in is the one the peer's decoder has once it read the updates.
void HpackEncoder::write_size_updates(net::Buffer& out) {
  if (!update_pending_) return;
  update_pending_ = false;
  out.ensure_writable(kUpdateRoom);
  char* const begin = out.begin_write();
  char* p = begin;
  // The peer's decoder saw its limit fall to min_size_: when that is below
  // the table's size it waits for an update at most that large first.
  if (min_size_ < table_.max_size() && min_size_ < target_size_) {
    p = hpack_write_int(p, 0x20, 5, min_size_);
    table_.set_max_size(min_size_);
  }
  if (target_size_ != table_.max_size()) {
    p = hpack_write_int(p, 0x20, 5, target_size_);
    table_.set_max_size(target_size_);
  }
  out.has_written(static_cast<size_t>(p - begin));
}

void HpackEncoder::encode(std::string_view name, std::string_view value, net::Buffer& out) {
  encode(name, value, hpack_static_name(name), out);
}

void HpackEncoder::encode_known(std::string_view name, std::string_view value, uint8_t static_name,
                                net::Buffer& out) {
  write_size_updates(out);
  const Coding coding = settings_.huffman ? Coding::kShorter : Coding::kRaw;
  // content-length is never indexed (it differs from one response to the
  // next and would only churn the table), nor in the static table with a value.
  if (static_name == kContentLength) return literal(name, value, kContentLength, Indexing::kNone, coding, out);
  const HpackStaticMatch in_static = hpack_static_find(static_name, value);
  const bool secret = sensitive(static_name, value);
  if (in_static.full && !secret) return encode_indexed(in_static.index, out);
  if (static_name != 0 && !secret) {
    if (const uint32_t at = recent(static_name, value); at != 0) return encode_indexed(at + kHpackStaticCount, out);
  }
  const HpackDynamicTable::Match in_table = table_.find(name, value);
  if (in_table.full && !secret) {
    if (static_name != 0 && recent_ != nullptr) recent_[static_name] = table_.inserted() - in_table.full + 1;
    return encode_indexed(in_table.full + kHpackStaticCount, out);
  }
  uint32_t name_index = in_static.index;
  if (name_index == 0 && in_table.name != 0) name_index = in_table.name + kHpackStaticCount;
  if (secret) return literal(name, value, name_index, Indexing::kNever, coding, out);
  const uint64_t entry = uint64_t{name.size()} + value.size() + kHpackEntryOverhead;
  const bool worth = entry <= table_.max_size() / 2;
  const uint32_t before = table_.inserted();
  literal(name, value, name_index, worth ? Indexing::kIncremental : Indexing::kNone, coding, out);
  if (static_name != 0 && table_.inserted() != before) {
    if (recent_ == nullptr) recent_ = std::make_unique<uint32_t[]>(kHpackStaticCount + 1);
    recent_[static_name] = table_.inserted();
  }
}

void HpackEncoder::encode_static_only(std::string_view name, std::string_view value, uint8_t static_name,
                                      net::Buffer& out) {
  const HpackStaticMatch in_static = hpack_static_find(static_name, value);
  const bool secret = sensitive(static_name, value);
  if (in_static.full && !secret) {
    out.ensure_writable(kMaxIntBytes);
    char* const begin = out.begin_write();
    out.has_written(static_cast<size_t>(hpack_write_int(begin, 0x80, 7, in_static.index) - begin));
    return;
  }
  const Coding coding = settings_.huffman ? Coding::kShorter : Coding::kRaw;
  literal(name, value, in_static.index, secret ? Indexing::kNever : Indexing::kNone, coding, out);
}

void HpackEncoder::encode_content_length(uint64_t length, net::Buffer& out) {
  constexpr size_t kDigits = 20;  // of the largest uint64_t
  out.ensure_writable(3 + kDigits);
  char* const begin = out.begin_write();
  char* p = hpack_write_int(begin, 0x00, 4, kContentLength);
  char* const digits = p + 1;
  char* const end = std::to_chars(digits, digits + kDigits, length).ptr;
  *p = static_cast<char>(end - digits);  // no Huffman bit; under 127
  out.has_written(static_cast<size_t>(end - begin));
}

void HpackEncoder::encode_indexed(uint32_t index, net::Buffer& out) {
  write_size_updates(out);
  assert(index >= 1 && index <= kHpackStaticCount + table_.count());
  out.ensure_writable(kMaxIntBytes);
  char* const begin = out.begin_write();
  char* p = hpack_write_int(begin, 0x80, 7, index);
  out.has_written(static_cast<size_t>(p - begin));
}

void HpackEncoder::encode_literal(std::string_view name, std::string_view value, uint32_t name_index,
                                  Indexing indexing, bool huffman, net::Buffer& out) {
  write_size_updates(out);
  assert(name_index <= kHpackStaticCount + table_.count());
  literal(name, value, name_index, indexing, huffman ? Coding::kHuffman : Coding::kRaw, out);
}

void HpackEncoder::literal(std::string_view name, std::string_view value, uint32_t name_index, Indexing indexing,
                           Coding coding, net::Buffer& out) {
  auto choose = [coding](std::string_view s) {
    Literal l;
    if (coding == Coding::kRaw) return l;
    l.huffman_size = huffman::encoded_size(s);
    l.huffman = coding == Coding::kHuffman || l.huffman_size < s.size();
    return l;
  };
  const Literal name_literal = name_index == 0 ? choose(name) : Literal{};
  const Literal value_literal = choose(value);
  out.ensure_writable(kMaxIntBytes + (name_index == 0 ? name_literal.room(name) : 0) + value_literal.room(value));
  char* const begin = out.begin_write();
  char* p = begin;
  switch (indexing) {
    case Indexing::kIncremental: p = hpack_write_int(p, 0x40, 6, name_index); break;
    case Indexing::kNone: p = hpack_write_int(p, 0x00, 4, name_index); break;
    case Indexing::kNever: p = hpack_write_int(p, 0x10, 4, name_index); break;
  }
  if (name_index == 0) p = hpack_write_string(p, name, name_literal.huffman, name_literal.huffman_size);
  p = hpack_write_string(p, value, value_literal.huffman, value_literal.huffman_size);
  out.has_written(static_cast<size_t>(p - begin));
  if (indexing != Indexing::kIncremental) return;
  const uint8_t static_name = name_index > kHpackStaticCount
                                  ? table_.at(name_index - kHpackStaticCount - 1).static_name
                                  : static_cast<uint8_t>(name_index);
  table_.insert(name, value, static_name);
}

}  // namespace tern::http2
