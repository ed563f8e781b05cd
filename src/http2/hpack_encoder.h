// HpackEncoder: writes header blocks (RFC 7541) for the peer's decoder,
// appending each representation straight to the Buffer the frame writer
// sends from.
//
//   HpackEncoder encoder;
//   encoder.set_peer_table_size(n);        // from the peer's SETTINGS
//   for (auto& [name, value] : fields) encoder.encode(name, value, out);
//
// encode() chooses the representation:
//   - a field with a sensitive value is a never-indexed literal (section
//     7.1.3), so that no intermediary indexes it and a table probe cannot
//     guess it: authorization and proxy-authorization always; cookie and
//     set-cookie when the value is shorter than 20 bytes (short values are
//     the guessable ones, and long ones repeat across requests and are
//     worth their table space);
//   - a name and value found in the static or dynamic table is an index
//     (static first: same size or shorter);
//   - otherwise a literal, its name an index when the name is in the
//     static table (preferred) or the dynamic one, with incremental
//     indexing unless the entry would take more than half the table (it
//     would push out everything else) or the field is content-length (it
//     differs from one response to the next and would only churn the
//     table), which go without indexing;
//   - each literal string is Huffman-coded when that makes it strictly
//     shorter (and Settings::huffman is on).
// The low-level calls write a given representation, as a test needs to
// reproduce RFC 7541 Appendix C byte for byte.
//
// Field names must be lower case already (HTTP/2 requires it, RFC 9113
// section 8.2.1); they are written as given. Names and values must not
// point into this encoder's table.
//
// Table size: the table is at most Settings::max_table_size (our memory
// per connection) and at most what the peer's SETTINGS_HEADER_TABLE_SIZE
// allows. When that changes, the next representation written, the first
// of the next block, is preceded by dynamic table size updates: the
// smallest size in between when the table had to shrink below it, then
// the final one (section 4.2). So call set_peer_table_size() between
// blocks only, as SETTINGS frames arrive.
//
// One encoder per connection, for the blocks we send; loop thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>

#include "http2/hpack_primitives.h"
#include "http2/hpack_table.h"
#include "net/buffer.h"

namespace tern::http2 {

class HpackEncoder {
 public:
  struct Settings {
    // Our own bound on the table, whatever the peer allows: it is memory we
    // keep per connection (up to about twice this, see HpackDynamicTable).
    uint32_t max_table_size = kHpackDefaultTableSize;
    // Huffman-code a string when that makes it shorter; off, never.
    bool huffman = true;
  };

  enum class Indexing : uint8_t { kIncremental, kNone, kNever };

  HpackEncoder() : HpackEncoder(Settings{}) {}
  explicit HpackEncoder(const Settings& settings);
  HpackEncoder(const HpackEncoder&) = delete;
  HpackEncoder& operator=(const HpackEncoder&) = delete;

  // The peer's SETTINGS_HEADER_TABLE_SIZE, each time a SETTINGS frame
  // carries it (the initial value is 4096).
  void set_peer_table_size(uint32_t size);

  // Appends one field, in the representation the policy above picks.
  void encode(std::string_view name, std::string_view value, net::Buffer& out);
  // The same for a name the caller knows to be the static table's, at
  // `static_name` (the first entry with that name, hpack_static_name):
  // the name is not looked up, and the newest entry this encoder inserted
  // with that name is tried before the dynamic table is searched (a
  // response's server, content-type or etag is mostly the one before).
  void encode(std::string_view name, std::string_view value, uint8_t static_name, net::Buffer& out) {
    // Inline, the common case of a response field: the same value as the
    // newest entry made with this name, one byte. (Such an entry is never
    // a static match nor sensitive: it would not have been inserted.)
    const uint32_t at = recent(static_name, value);
    if (at != 0 && at + kHpackStaticCount < 0x7f && !update_pending_) {
      out.ensure_writable(1);
      *out.begin_write() = static_cast<char>(0x80 | (at + kHpackStaticCount));
      out.has_written(1);
      return;
    }
    encode_known(name, value, static_name, out);
  }

  // Appends one field in a representation that neither reads nor changes
  // the dynamic table, nor announces a size: a static index, or a literal
  // not indexed (its name a static index when it has one). A block of
  // these decodes the same whatever the peer's table holds, so it may go
  // out of turn, ahead of a block encoded before it and not yet sent.
  void encode_static_only(std::string_view name, std::string_view value, uint8_t static_name, net::Buffer& out);

  // Appends content-length: a literal not indexed, its name the static
  // entry's, its digits as they are (Huffman would save a byte on a common
  // length and cost more than the rest of the field). Neither reads nor
  // changes the table, nor announces a size: it is never a block's first
  // field (:status is).
  void encode_content_length(uint64_t length, net::Buffer& out);

  // Has the next block open with size updates to 0 and back (section
  // 4.2), which empty this table and the peer's: the two agree again after
  // a block that was encoded was never sent.
  void reset_table();

  // Appends an indexed field (section 6.1); index is 1..61 static, 62 and
  // up dynamic, and must exist.
  void encode_indexed(uint32_t index, net::Buffer& out);
  // Appends a literal (section 6.2). name_index is 0 to write the name as a
  // string, else the index of an entry with this name (the name is still
  // needed, for the table). Both strings are Huffman-coded or neither.
  void encode_literal(std::string_view name, std::string_view value, uint32_t name_index, Indexing indexing,
                      bool huffman, net::Buffer& out);

  const HpackDynamicTable& table() const { return table_; }
  // A size update is owed to the next block.
  bool update_pending() const { return update_pending_; }

 private:
  enum class Coding : uint8_t { kRaw, kHuffman, kShorter };

  void literal(std::string_view name, std::string_view value, uint32_t name_index, Indexing indexing,
               Coding coding, net::Buffer& out);
  void write_size_updates(net::Buffer& out);

  // The position (1 the newest) of the entry recent_[static_name] names,
  // if it is still in the table and has this value; 0 otherwise.
  uint32_t recent(uint8_t static_name, std::string_view value) const {
    if (recent_ == nullptr || recent_[static_name] == 0) return 0;
    const uint32_t position = table_.inserted() - recent_[static_name] + 1;
    if (position > table_.count()) return 0;  // evicted
    return same_bytes(table_.value_at(position - 1), value) ? position : 0;
  }
  // Kept out of line, so that encode() stays small enough to inline.
  [[gnu::noinline]] void encode_known(std::string_view name, std::string_view value, uint8_t static_name,
                                      net::Buffer& out);

  Settings settings_;
  HpackDynamicTable table_;
  // Per static name (1..61): the insertion number + 1 of the newest entry
  // inserted with that name (0: none). Made with the first such entry.
  std::unique_ptr<uint32_t[]> recent_;
  // A size change to announce at the next block: the final size, and the
  // smallest one since the last announcement.
  bool update_pending_ = false;
  uint32_t target_size_;
  uint32_t min_size_;
};

}  // namespace tern::http2
