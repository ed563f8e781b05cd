#include "http2/hpack_decoder.h"

#include <algorithm>

#include "http/chars.h"

namespace tern::http2 {

const char* to_string(HpackError error) {
  switch (error) {
    case HpackError::kOk: return "ok";
    case HpackError::kTruncated: return "truncated representation";
    case HpackError::kIntegerOverflow: return "integer overflow";
    case HpackError::kBadIndex: return "index out of range";
    case HpackError::kBadHuffman: return "invalid Huffman string";
    case HpackError::kStringTooLong: return "string too long";
    case HpackError::kBadSizeUpdate: return "invalid dynamic table size update";
    case HpackError::kHeaderListTooLarge: return "header list too large";
  }
  return "unknown";
}

HpackDecoder::HpackDecoder(const Settings& settings)
    : settings_(settings), table_(std::min(settings.table_size_limit, kHpackMaxInt)) {}

void HpackDecoder::set_table_size_limit(uint32_t limit) {
  settings_.table_size_limit = limit;
  if (table_.max_size() > limit) update_required_ = true;
}

HpackError HpackDecoder::decode(std::string_view block, FieldSink sink) {
  if (error_ != HpackError::kOk) return error_;
  const auto* p = reinterpret_cast<const uint8_t*>(block.data());
  error_ = decode_block(p, p + block.size(), sink);
  return error_;
}

HpackError HpackDecoder::decode_block(const uint8_t* p, const uint8_t* end, FieldSink sink) {
  list_size_ = 0;
  // Size updates may only open a block (section 4.2), and one must when
  // our limit fell below the table's size.
  while (p < end && (*p & 0xe0) == 0x20) {
    if (HpackError e = size_update(p, end); e != HpackError::kOk) return e;
  }
  if (update_required_ && p < end) return HpackError::kBadSizeUpdate;
  while (p < end) {
    HpackError e;
    if (*p & 0x80) {
      e = indexed(p, end, sink);
    } else if ((*p & 0xe0) == 0x20) {
      e = HpackError::kBadSizeUpdate;
    } else {
      e = literal(p, end, sink);
    }
    if (e != HpackError::kOk) return e;
  }
  return HpackError::kOk;
}

HpackError HpackDecoder::size_update(const uint8_t*& p, const uint8_t* end) {
  uint32_t size;
  if (HpackError e = hpack_read_int(p, end, 5, size); e != HpackError::kOk) return e;
  if (size > settings_.table_size_limit) return HpackError::kBadSizeUpdate;
  table_.set_max_size(size);
  update_required_ = false;
  return HpackError::kOk;
}

HpackError HpackDecoder::lookup(uint32_t index, HpackEntry& entry) const {
  if (index == 0) return HpackError::kBadIndex;
  if (index <= kHpackStaticCount) {
    entry = hpack_static_entry(index);
    return HpackError::kOk;
  }
  if (index - kHpackStaticCount - 1 >= table_.count()) return HpackError::kBadIndex;
  entry = table_.at(index - kHpackStaticCount - 1);
  return HpackError::kOk;
}

// Indexed field (section 6.1): 1xxxxxxx.
HpackError HpackDecoder::indexed(const uint8_t*& p, const uint8_t* end, FieldSink sink) {
  uint32_t index;
  HpackEntry entry;
  if (HpackError e = hpack_read_int(p, end, 7, index); e != HpackError::kOk) return e;
  if (HpackError e = lookup(index, entry); e != HpackError::kOk) return e;
  return emit({entry.name, entry.value, entry.static_name, false, entry.field_text}, sink);
}

// Literal fields (section 6.2): 01xxxxxx with incremental indexing, 0000xxxx
// without, 0001xxxx never indexed; the prefix is the name's index, or 0
// for a literal name.
HpackError HpackDecoder::literal(const uint8_t*& p, const uint8_t* end, FieldSink sink) {
  const bool indexing = *p & 0x40;
  HpackField field;
  field.never_indexed = !indexing && (*p & 0x10);
  uint32_t name_index;
  if (HpackError e = hpack_read_int(p, end, indexing ? 6 : 4, name_index); e != HpackError::kOk) return e;
  if (name_index == 0) {
    if (HpackError e = read_string(p, end, name_scratch_, field.name); e != HpackError::kOk) return e;
  } else {
    HpackEntry entry;
    if (HpackError e = lookup(name_index, entry); e != HpackError::kOk) return e;
    field.name = entry.name;
    field.static_index = entry.static_name;
    // Inserting may evict the entry the name lives in (section 4.4).
    if (indexing && name_index > kHpackStaticCount) {
      name_scratch_.assign(entry.name);
      field.name = name_scratch_;
    }
  }
  if (HpackError e = read_string(p, end, value_scratch_, field.value); e != HpackError::kOk) return e;
  field.field_text = http::chars::all_field_text(field.value);
  if (HpackError e = emit(field, sink); e != HpackError::kOk) return e;
  if (indexing) table_.insert(field.name, field.value, field.static_index, field.field_text);
  return HpackError::kOk;
}

HpackError HpackDecoder::read_string(const uint8_t*& p, const uint8_t* end, std::string& scratch,
                                     std::string_view& out) {
  if (p == end) return HpackError::kTruncated;
  const bool huffman = *p & 0x80;
  uint32_t len;
  if (HpackError e = hpack_read_int(p, end, 7, len); e != HpackError::kOk) return e;
  if (len > settings_.max_string_length) return HpackError::kStringTooLong;
  if (len > static_cast<size_t>(end - p)) return HpackError::kTruncated;
  const std::string_view raw(reinterpret_cast<const char*>(p), len);
  p += len;
  if (!huffman) {
    out = raw;
    return HpackError::kOk;
  }
  // The scratch only grows (zero-filled once), so it is reused as is.
  if (scratch.size() < huffman::max_decoded_size(len)) scratch.resize(huffman::max_decoded_size(len));
  const char* decoded_end = huffman::decode(raw, scratch.data());
  if (decoded_end == nullptr) return HpackError::kBadHuffman;
  const auto decoded = static_cast<size_t>(decoded_end - scratch.data());
  if (decoded > settings_.max_string_length) return HpackError::kStringTooLong;
  out = {scratch.data(), decoded};
  return HpackError::kOk;
}

// Counts the field against the list limit before anyone sees it, so that
// decoding stops at the first field past the limit.
HpackError HpackDecoder::emit(const HpackField& field, FieldSink sink) {
  list_size_ += field.name.size() + field.value.size() + kHpackEntryOverhead;
  if (list_size_ > settings_.max_header_list_size) return HpackError::kHeaderListTooLarge;
  sink.call(sink.self, field);
  return HpackError::kOk;
}

}  // namespace tern::http2
