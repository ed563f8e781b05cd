// HPACK's two indexing tables (RFC 7541 section 2.3): the static table of
// Appendix A, and HpackDynamicTable, the FIFO of recent fields that each
// side of a connection keeps (one in the decoder, one in the encoder).
//
// Index space: 1..61 are static entries, 62 the newest dynamic entry, 63
// the one before it, and so on.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

namespace tern::http2 {

struct HpackEntry {
  std::string_view name;
  std::string_view value;
  // The static index the name came from (1..61), or 0: set for static
  // entries and for dynamic ones inserted with a static name reference.
  uint8_t static_name = 0;
  // The value is all bytes a field value may hold (RFC 9110 section 5.5):
  // true for static entries; for dynamic ones, what the decoder found when
  // the value came off the wire, kept so that it is checked once.
  bool field_text = true;
};

inline constexpr uint32_t kHpackStaticCount = 61;
inline constexpr uint32_t kHpackEntryOverhead = 32;  // section 4.1
inline constexpr uint32_t kHpackDefaultTableSize = 4096;

// Static entry `index`, 1..kHpackStaticCount.
HpackEntry hpack_static_entry(uint32_t index);

// The static entry matching name and value (full), else the first with
// this name, else index 0. Names are compared as given: HTTP/2 field names
// are lower case.
struct HpackStaticMatch {
  uint8_t index = 0;
  bool full = false;
};
HpackStaticMatch hpack_static_find(std::string_view name, std::string_view value);
// The same for a name known to be the static table's: `name_index` is the
// first entry with that name (as hpack_static_name gives it).
HpackStaticMatch hpack_static_find(uint8_t name_index, std::string_view value);
// The first static entry with this name, or 0.
uint8_t hpack_static_name(std::string_view name);

// The dynamic table (section 4). Entries are stored compactly: their bytes
// in one buffer (appended at the end, given up at the front, compacted in
// place when the end is reached), their lengths in one ring of fixed-size
// slots. Nothing is allocated per entry; the two buffers grow on demand to
// at most about twice the table's max size and are kept for reuse, so a
// connection in its steady state allocates nothing here, and one that
// never indexes allocates nothing at all.
//
// Owned by one HpackDecoder or HpackEncoder; not thread-safe.
class HpackDynamicTable {
 public:
  explicit HpackDynamicTable(uint32_t max_size = kHpackDefaultTableSize) : max_size_(max_size) {}
  HpackDynamicTable(HpackDynamicTable&&) noexcept = default;
  HpackDynamicTable& operator=(HpackDynamicTable&&) noexcept = default;

  // Sum of the entries' sizes (name + value + 32 each).
  uint32_t size() const { return size_; }
  uint32_t max_size() const { return max_size_; }
  size_t count() const { return count_; }
  // Bytes held for entries, for tests and memory accounting.
  size_t allocated() const { return bytes_cap_ + slot_cap_ * sizeof(Slot); }

  // Sets the max size, evicting the oldest entries until the rest fit
  // (section 4.3).
  void set_max_size(uint32_t max_size);

  // Adds a field as the newest entry, first evicting the oldest until it
  // fits; a field larger than max_size() empties the table and is not added
  // (section 4.4). name and value must not point into this table: a name
  // taken from an entry is copied first, since this call may evict it.
  void insert(std::string_view name, std::string_view value, uint8_t static_name = 0, bool field_text = true);

  // Entry i, 0 the newest; i < count(). The views stay valid until the next
  // insert() or set_max_size().
  HpackEntry at(size_t i) const;
  // Entry i's value alone, inline: the encoder's hot path compares it.
  std::string_view value_at(size_t i) const {
    const Slot& s = slot(i);
    return {bytes_at(s.offset) + s.name_len, s.value_len};
  }

  // Entries ever inserted: entry i is insertion number inserted() - 1 - i,
  // so a number kept from an insertion names the entry as long as it stays.
  uint32_t inserted() const { return inserted_; }

  // For the encoder: positions (1 the newest, 0 none) of the newest entry
  // with this name and value, and of the newest entry with this name.
  // A linear scan: a 4 KiB table holds at most 128 entries, and most
  // names differ in length from the one sought.
  struct Match {
    uint32_t full = 0;
    uint32_t name = 0;
  };
  Match find(std::string_view name, std::string_view value) const;

 private:
  // An entry: where its bytes start (a virtual offset, see base_), then
  // name and value back to back. The last bytes of both let find() skip
  // most entries without comparing strings.
  struct Slot {
    uint32_t offset;
    uint32_t name_len;
    uint32_t value_len;
    uint8_t static_name;
    char name_last;
    char value_last;
    bool field_text;
  };

  const Slot& slot(size_t i) const { return slots_[(first_ + count_ - 1 - i) & (slot_cap_ - 1)]; }
  const char* bytes_at(uint32_t offset) const { return bytes_.get() + (offset - base_); }
  void evict_oldest();
  char* make_room(size_t len);
  void grow_slots();

  std::unique_ptr<char[]> bytes_;
  std::unique_ptr<Slot[]> slots_;
  uint32_t bytes_cap_ = 0;
  // Offsets only ever grow (modulo 2^32): bytes_[0] holds offset base_, and
  // the next entry goes at tail_. Compacting moves base_, not the slots.
  uint32_t base_ = 0;
  uint32_t tail_ = 0;
  uint32_t slot_cap_ = 0;  // a power of two
  uint32_t first_ = 0;     // the oldest entry's slot
  uint32_t count_ = 0;
  uint32_t size_ = 0;
  uint32_t max_size_;
  uint32_t inserted_ = 0;
};

}  // namespace tern::http2
