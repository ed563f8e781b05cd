#include "http2/hpack_table.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <cstring>

#include "http2/hpack_primitives.h"

namespace tern::http2 {
namespace {

struct StaticField {
  std::string_view name;
  std::string_view value;
};

// RFC 7541 Appendix A; index 1 first.
constexpr StaticField kStatic[kHpackStaticCount] = {
    {":authority", ""},
    {":method", "GET"},
    {":method", "POST"},
    {":path", "/"},
    {":path", "/index.html"},
    {":scheme", "http"},
    {":scheme", "https"},
    {":status", "200"},
    {":status", "204"},
    {":status", "206"},
    {":status", "304"},
    {":status", "400"},
    {":status", "404"},
    {":status", "500"},
    {"accept-charset", ""},
    {"accept-encoding", "gzip, deflate"},
    {"accept-language", ""},
    {"accept-ranges", ""},
    {"accept", ""},
    {"access-control-allow-origin", ""},
    {"age", ""},
    {"allow", ""},
    {"authorization", ""},
    {"cache-control", ""},
    {"content-disposition", ""},
    {"content-encoding", ""},
    {"content-language", ""},
    {"content-length", ""},
    {"content-location", ""},
    {"content-range", ""},
    {"content-type", ""},
    {"cookie", ""},
    {"date", ""},
    {"etag", ""},
    {"expect", ""},
    {"expires", ""},
    {"from", ""},
    {"host", ""},
    {"if-match", ""},
    {"if-modified-since", ""},
    {"if-none-match", ""},
    {"if-range", ""},
    {"if-unmodified-since", ""},
    {"last-modified", ""},
    {"link", ""},
    {"location", ""},
    {"max-forwards", ""},
    {"proxy-authenticate", ""},
    {"proxy-authorization", ""},
    {"range", ""},
    {"referer", ""},
    {"refresh", ""},
    {"retry-after", ""},
    {"server", ""},
    {"set-cookie", ""},
    {"strict-transport-security", ""},
    {"transfer-encoding", ""},
    {"user-agent", ""},
    {"vary", ""},
    {"via", ""},
    {"www-authenticate", ""},
};

// Name lookup: an open-addressing hash of the 52 distinct names, built at
// compile time; a slot holds the first static index with that name (the
// entries sharing a name are adjacent), 0 when empty. The hash reads the
// length and two bytes only (the first is often ':'): a hash over every
// byte cost more than the rest of encoding a field. Its multipliers were
// picked so that at most one of these names is one slot off its hash; any
// other choice would still be correct, only slower.
constexpr uint32_t kNameSlots = 128;

constexpr uint32_t name_hash(std::string_view s) {
  if (s.size() < 2) return static_cast<uint32_t>(s.size());
  return static_cast<uint32_t>(s.size() * 13 + static_cast<unsigned char>(s[1]) * 57 +
                               static_cast<unsigned char>(s.back()) * 45);
}

constexpr std::array<uint8_t, kNameSlots> make_name_slots() {
  std::array<uint8_t, kNameSlots> slots{};
  for (uint32_t i = 0; i < kHpackStaticCount; ++i) {
    if (i > 0 && kStatic[i].name == kStatic[i - 1].name) continue;
    uint32_t h = name_hash(kStatic[i].name) % kNameSlots;
    while (slots[h] != 0) h = (h + 1) % kNameSlots;
    slots[h] = static_cast<uint8_t>(i + 1);
  }
  return slots;
}

constexpr std::array<uint8_t, kNameSlots> kNameIndex = make_name_slots();

// How many entries from index i (1-based) on share its name.
constexpr std::array<uint8_t, kHpackStaticCount + 2> make_runs() {
  std::array<uint8_t, kHpackStaticCount + 2> runs{};
  for (uint32_t i = kHpackStaticCount; i >= 1; --i) {
    const bool same = i < kHpackStaticCount && kStatic[i].name == kStatic[i - 1].name;
    runs[i] = static_cast<uint8_t>(same ? runs[i + 1] + 1 : 1);
  }
  return runs;
}

constexpr std::array<uint8_t, kHpackStaticCount + 2> kRuns = make_runs();

// The last byte of s, or 0.
char last(std::string_view s) { return s.empty() ? '\0' : s.back(); }

uint8_t static_name_index(std::string_view name) {
  for (uint32_t h = name_hash(name) % kNameSlots; kNameIndex[h] != 0; h = (h + 1) % kNameSlots) {
    if (kStatic[kNameIndex[h] - 1].name == name) return kNameIndex[h];
  }
  return 0;
}

}  // namespace

HpackEntry hpack_static_entry(uint32_t index) {
  assert(index >= 1 && index <= kHpackStaticCount);
  const StaticField& f = kStatic[index - 1];
  return {f.name, f.value, static_cast<uint8_t>(index)};
}

HpackStaticMatch hpack_static_find(std::string_view name, std::string_view value) {
  return hpack_static_find(static_name_index(name), value);
}

HpackStaticMatch hpack_static_find(uint8_t first, std::string_view value) {
  if (first == 0) return {};
  assert(first <= kHpackStaticCount);
  for (uint32_t i = first; i < first + kRuns[first]; ++i) {
    if (same_bytes(kStatic[i - 1].value, value)) return {static_cast<uint8_t>(i), true};
  }
  return {first, false};
}

uint8_t hpack_static_name(std::string_view name) { return static_name_index(name); }

void HpackDynamicTable::set_max_size(uint32_t max_size) {
  max_size_ = max_size;
  while (size_ > max_size_) evict_oldest();
}

void HpackDynamicTable::evict_oldest() {
  const Slot& s = slots_[first_];
  size_ -= s.name_len + s.value_len + kHpackEntryOverhead;
  first_ = (first_ + 1) & (slot_cap_ - 1);
  // An empty table starts its bytes over at the front: no compaction.
  if (--count_ == 0) base_ = tail_;
}

void HpackDynamicTable::insert(std::string_view name, std::string_view value, uint8_t static_name,
                               bool field_text) {
  assert(name.empty() || bytes_cap_ == 0 || name.data() < bytes_.get() ||
         name.data() >= bytes_.get() + bytes_cap_);
  const uint64_t entry = uint64_t{name.size()} + value.size() + kHpackEntryOverhead;
  if (entry > max_size_) {
    while (count_ > 0) evict_oldest();
    return;
  }
  while (size_ + entry > max_size_) evict_oldest();
  if (count_ == slot_cap_) grow_slots();
  char* p = make_room(name.size() + value.size());
  if (!name.empty()) std::memcpy(p, name.data(), name.size());
  if (!value.empty()) std::memcpy(p + name.size(), value.data(), value.size());
  const auto name_len = static_cast<uint32_t>(name.size());
  const auto value_len = static_cast<uint32_t>(value.size());
  slots_[(first_ + count_) & (slot_cap_ - 1)] = {tail_, name_len, value_len, static_name, last(name), last(value), field_text};
  tail_ += name_len + value_len;
  ++count_;
  ++inserted_;
  size_ += static_cast<uint32_t>(entry);
}

// Room for len bytes at tail_. When the end of the buffer is reached, the
// live bytes move to the front if they fill at most half of it, else to a
// buffer twice their size: either way what is moved is paid for by at
// least as many bytes appended since the last move.
char* HpackDynamicTable::make_room(size_t len) {
  if ((tail_ - base_) + len <= bytes_cap_) return bytes_.get() + (tail_ - base_);
  const uint32_t head = count_ > 0 ? slots_[first_].offset : tail_;
  const size_t live = tail_ - head;
  if (live + len <= bytes_cap_ / 2) {
    if (live > 0) std::memmove(bytes_.get(), bytes_at(head), live);
  } else {
    const size_t cap = std::max<size_t>(256, 2 * (live + len));
    auto bigger = std::make_unique_for_overwrite<char[]>(cap);
    if (live > 0) std::memcpy(bigger.get(), bytes_at(head), live);
    bytes_ = std::move(bigger);
    bytes_cap_ = static_cast<uint32_t>(cap);
  }
  base_ = head;
  return bytes_.get() + live;
}

void HpackDynamicTable::grow_slots() {
  const uint32_t cap = std::max<uint32_t>(16, slot_cap_ * 2);
  auto bigger = std::make_unique_for_overwrite<Slot[]>(cap);
  for (uint32_t i = 0; i < count_; ++i) bigger[i] = slots_[(first_ + i) & (slot_cap_ - 1)];
  slots_ = std::move(bigger);
  slot_cap_ = cap;
  first_ = 0;
}

HpackEntry HpackDynamicTable::at(size_t i) const {
  assert(i < count_);
  const Slot& s = slot(i);
  const char* p = bytes_at(s.offset);
  return {{p, s.name_len}, {p + s.name_len, s.value_len}, s.static_name, s.field_text};
}

HpackDynamicTable::Match HpackDynamicTable::find(std::string_view name, std::string_view value) const {
  Match m;
  const char name_last = last(name);
  const char value_last = last(value);
  for (uint32_t i = 0; i < count_; ++i) {
    const Slot& s = slot(i);
    if (s.name_len != name.size() || s.name_last != name_last) continue;
    const bool value_may = s.value_len == value.size() && s.value_last == value_last;
    if (!value_may && m.name != 0) continue;  // the name is known: nothing to learn here
    const char* p = bytes_at(s.offset);
    if (!name.empty() && std::memcmp(p, name.data(), name.size()) != 0) continue;
    if (m.name == 0) m.name = i + 1;
    if (value_may && (value.empty() || std::memcmp(p + s.name_len, value.data(), value.size()) == 0)) {
      m.full = i + 1;
      return m;
    }
  }
  return m;
}

}  // namespace tern::http2
