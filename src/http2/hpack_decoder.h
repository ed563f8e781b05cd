// HpackDecoder: turns HPACK header blocks (RFC 7541) back into fields, one
// complete block (HEADERS plus its CONTINUATIONs) per call.
//
//   HpackDecoder decoder({.table_size_limit = 4096, .max_header_list_size = 16384});
//   HpackError e = decoder.decode(block, [&](const HpackField& f) { ... });
//
// Fields reach the sink in order, as views valid during that sink call
// only: a plain literal is a view into the block, a Huffman-coded one a
// view into a scratch buffer reused across calls, an indexed field a view
// into the table. Nothing is allocated per field once the scratch buffers
// and the table have grown to their working size.
//
// Errors. Any error leaves the dynamic table out of step with the peer's
// encoder, so the decoder is unusable afterwards (decode() returns the
// same error again) and the connection must end:
//   - kHeaderListTooLarge: the decoded list (name + value + 32 per field,
//     RFC 9113 section 6.5.2) passed max_header_list_size. Decoding stops
//     at the field that passed it, so a block that names one large entry
//     many times (an HPACK bomb) costs no more than the limit; answer
//     GOAWAY ENHANCE_YOUR_CALM (431 on the stream alone is not possible,
//     since the rest of the block was not applied to the table).
//   - every other error is a COMPRESSION_ERROR (RFC 9113 section 4.3).
//
// Field names are passed on as they came; checking them (lower case, no
// connection-specific fields, pseudo-fields first) is the caller's job.
//
// One decoder per connection, for the blocks the peer sends; loop thread
// only.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

#include "http2/hpack_primitives.h"
#include "http2/hpack_table.h"

namespace tern::http2 {

struct HpackField {
  std::string_view name;
  std::string_view value;
  // 1..61 when the name came from the static table (directly, or through
  // a dynamic entry that was inserted with a static name), else 0: lets
  // the caller recognise common names without comparing strings.
  uint8_t static_index = 0;
  bool never_indexed = false;  // must stay a never-indexed literal if forwarded
  // The value holds only what a field value may (RFC 9110 section 5.5: no
  // control byte but HTAB; RFC 9113 section 8.2.1 forbids NUL, CR and LF):
  // checked once, as the value came off the wire, and remembered with a
  // dynamic table entry, so that a value sent again by index is not
  // scanned again.
  bool field_text = true;
};

class HpackDecoder {
 public:
  struct Settings {
    // The SETTINGS_HEADER_TABLE_SIZE we advertise: the most a size update
    // may ask for. Also the table's initial max size.
    uint32_t table_size_limit = kHpackDefaultTableSize;
    // The decoded size of one block's field list (name + value + 32 each);
    // RFC 9113's SETTINGS_MAX_HEADER_LIST_SIZE.
    uint32_t max_header_list_size = 16384;
    // One name or value, as sent and as decoded.
    uint32_t max_string_length = 16384;
  };

  HpackDecoder() : HpackDecoder(Settings{}) {}
  explicit HpackDecoder(const Settings& settings);
  HpackDecoder(const HpackDecoder&) = delete;
  HpackDecoder& operator=(const HpackDecoder&) = delete;

  // Decodes one complete header block, calling sink(const HpackField&) for
  // each field. Returns kOk, or the error that ends the connection.
  template <class Sink>
  HpackError decode(std::string_view block, Sink&& sink) {
    using S = std::remove_reference_t<Sink>;
    return decode(block, FieldSink{&sink, [](void* s, const HpackField& f) { (*static_cast<S*>(s))(f); }});
  }

  // Our advertised SETTINGS_HEADER_TABLE_SIZE changed; call when the peer
  // acknowledges the SETTINGS frame that carried it (before that, the peer
  // may still use the old size). When the table's current max size is
  // above the new limit, the peer's next block must begin with a size
  // update to at most the limit (RFC 7541 section 4.2), else that block
  // fails with kBadSizeUpdate.
  void set_table_size_limit(uint32_t limit);

  const HpackDynamicTable& table() const { return table_; }
  HpackError error() const { return error_; }

 private:
  struct FieldSink {
    void* self;
    void (*call)(void*, const HpackField&);
  };

  HpackError decode(std::string_view block, FieldSink sink);
  HpackError decode_block(const uint8_t* p, const uint8_t* end, FieldSink sink);
  HpackError indexed(const uint8_t*& p, const uint8_t* end, FieldSink sink);
  HpackError literal(const uint8_t*& p, const uint8_t* end, FieldSink sink);
  HpackError size_update(const uint8_t*& p, const uint8_t* end);
  HpackError lookup(uint32_t index, HpackEntry& entry) const;
  HpackError read_string(const uint8_t*& p, const uint8_t* end, std::string& scratch, std::string_view& out);
  HpackError emit(const HpackField& field, FieldSink sink);

  Settings settings_;
  HpackDynamicTable table_;
  HpackError error_ = HpackError::kOk;
  bool update_required_ = false;  // the next block must begin with a size update
  uint64_t list_size_ = 0;        // of the block being decoded
  // Huffman output, and copies of dynamic names about to be re-inserted.
  std::string name_scratch_;
  std::string value_scratch_;
};

}  // namespace tern::http2
