// HPACK against nghttp2's, both ways, on random field lists over many
// blocks per connection with table sizes changing between blocks: tern
// decodes what nghttp2's deflater writes, nghttp2's inflater decodes what
// tern's encoder writes, to the same fields, and after every block both
// ends hold the same dynamic table (entries, size and max size).
#include <gtest/gtest.h>
#include <nghttp2/nghttp2.h>

#include <random>
#include <string>
#include <vector>

#include "http2/hpack_decoder.h"
#include "http2/hpack_encoder.h"
#include "hpack_test_support.h"

namespace tern::http2 {
namespace {

using testing::entries;
using testing::Pairs;

// Random header blocks: common and random names, values printable,
// binary, empty or long, and many fields repeated from earlier blocks so
// that entries get indexed, referenced and evicted.
class Fields {
 public:
  explicit Fields(uint32_t seed) : rng_(seed) {}

  Pairs block() {
    Pairs out;
    const int n = 1 + pick(12);
    for (int i = 0; i < n; ++i) {
      if (!recent_.empty() && pick(100) < 40) {
        out.push_back(recent_[pick(static_cast<int>(recent_.size()))]);
      } else {
        out.emplace_back(name(), value());
        if (recent_.size() < 40) recent_.push_back(out.back());
        else recent_[pick(40)] = out.back();
      }
    }
    return out;
  }

  int pick(int n) { return static_cast<int>(rng_() % static_cast<uint32_t>(n)); }

 private:
  std::string name() {
    static const char* const kCommon[] = {":path", ":status", ":authority", "content-type", "cookie",
                                          "authorization", "set-cookie", "date", "user-agent", "content-length",
                                          "x-trace-id", "accept-encoding", "etag", "vary"};
    const int r = pick(100);
    if (r < 50) return kCommon[pick(std::size(kCommon))];
    if (r < 95) return text(1 + pick(20), "abcdefghijklmnopqrstuvwxyz-");
    return binary(1 + pick(10));
  }

  std::string value() {
    static const char* const kCommon[] = {"", "GET", "200", "gzip, deflate", "text/html", "/", "/index.html"};
    const int r = pick(100);
    if (r < 25) return kCommon[pick(std::size(kCommon))];
    if (r < 60) return text(pick(60), nullptr);
    if (r < 80) return binary(pick(40));
    if (r < 95) return text(100 + pick(500), nullptr);
    return text(2500, nullptr);
  }

  std::string text(int n, const char* alphabet) {
    std::string s(static_cast<size_t>(n), ' ');
    const int size = alphabet ? static_cast<int>(std::char_traits<char>::length(alphabet)) : 95;
    for (char& c : s) c = alphabet ? alphabet[pick(size)] : static_cast<char>(32 + pick(size));
    return s;
  }

  std::string binary(int n) {
    std::string s(static_cast<size_t>(n), '\0');
    for (char& c : s) c = static_cast<char>(pick(256));
    return s;
  }

  std::mt19937 rng_;
  Pairs recent_;
};

const uint32_t kTableSizes[] = {0, 100, 256, 512, 1000, 4096, 8192, 65536};

nghttp2_nv nv(const std::string& name, const std::string& value, uint8_t flags) {
  return {reinterpret_cast<uint8_t*>(const_cast<char*>(name.data())),
          reinterpret_cast<uint8_t*>(const_cast<char*>(value.data())), name.size(), value.size(), flags};
}

std::string str(const uint8_t* p, size_t n) { return std::string(reinterpret_cast<const char*>(p), n); }

TEST(HpackNghttp2, DecodesWhatNghttp2Encodes) {
  Fields gen(1);
  for (int conn = 0; conn < 60; ++conn) {
    nghttp2_hd_deflater* deflater = nullptr;
    ASSERT_EQ(nghttp2_hd_deflate_new(&deflater, kTableSizes[gen.pick(8)]), 0);
    HpackDecoder decoder({.max_header_list_size = 1 << 20, .max_string_length = 1 << 16});
    for (int block = 0; block < 30; ++block) {
      SCOPED_TRACE(::testing::Message() << "connection " << conn << " block " << block);
      while (gen.pick(100) < 15) {  // our SETTINGS_HEADER_TABLE_SIZE changes, and is acknowledged
        const uint32_t size = kTableSizes[gen.pick(8)];
        ASSERT_EQ(nghttp2_hd_deflate_change_table_size(deflater, size), 0);
        decoder.set_table_size_limit(size);
      }
      const Pairs fields = gen.block();
      std::vector<nghttp2_nv> nva;
      std::vector<bool> never;
      for (const auto& [name, value] : fields) {
        never.push_back(gen.pick(100) < 5);
        nva.push_back(nv(name, value, never.back() ? NGHTTP2_NV_FLAG_NO_INDEX : NGHTTP2_NV_FLAG_NONE));
      }
      std::string bytes(nghttp2_hd_deflate_bound(deflater, nva.data(), nva.size()), '\0');
      const ssize_t n = nghttp2_hd_deflate_hd(deflater, reinterpret_cast<uint8_t*>(bytes.data()), bytes.size(),
                                              nva.data(), nva.size());
      ASSERT_GT(n, 0);
      bytes.resize(static_cast<size_t>(n));

      const auto d = testing::decode(decoder, bytes);
      ASSERT_EQ(d.error, HpackError::kOk) << to_string(d.error);
      ASSERT_EQ(d.fields, fields);
      for (size_t i = 0; i < never.size(); ++i) EXPECT_TRUE(!never[i] || d.raw[i].never_indexed);
      ASSERT_EQ(decoder.table().size(), nghttp2_hd_deflate_get_dynamic_table_size(deflater));
      ASSERT_EQ(decoder.table().max_size(), nghttp2_hd_deflate_get_max_dynamic_table_size(deflater));
      Pairs theirs;
      for (size_t i = 0; i < decoder.table().count() + 1; ++i) {
        const nghttp2_nv* e = nghttp2_hd_deflate_get_table_entry(deflater, kHpackStaticCount + 1 + i);
        if (e) theirs.emplace_back(str(e->name, e->namelen), str(e->value, e->valuelen));
      }
      ASSERT_EQ(entries(decoder.table()), theirs);
    }
    nghttp2_hd_deflate_del(deflater);
  }
}

// What nghttp2's inflater makes of a block: the fields, whether each was a
// never-indexed literal, and false when it refused the block.
bool inflate(nghttp2_hd_inflater* inflater, std::string_view block, Pairs& fields, std::vector<bool>& never) {
  const auto* in = reinterpret_cast<const uint8_t*>(block.data());
  size_t left = block.size();
  for (;;) {
    nghttp2_nv out;
    int flags = 0;
    const ssize_t n = nghttp2_hd_inflate_hd2(inflater, &out, &flags, in, left, 1);
    if (n < 0) return false;
    in += n;
    left -= static_cast<size_t>(n);
    if (flags & NGHTTP2_HD_INFLATE_EMIT) {
      fields.emplace_back(str(out.name, out.namelen), str(out.value, out.valuelen));
      never.push_back(out.flags & NGHTTP2_NV_FLAG_NO_INDEX);
    }
    if (flags & NGHTTP2_HD_INFLATE_FINAL) {
      nghttp2_hd_inflate_end_headers(inflater);
      return left == 0;
    }
    if (!(flags & NGHTTP2_HD_INFLATE_EMIT) && left == 0) return false;
  }
}

TEST(HpackNghttp2, Nghttp2DecodesWhatWeEncode) {
  Fields gen(2);
  for (int conn = 0; conn < 60; ++conn) {
    HpackEncoder encoder({.max_table_size = kTableSizes[gen.pick(8)], .huffman = gen.pick(4) != 0});
    HpackDecoder mirror({.max_header_list_size = 1 << 20, .max_string_length = 1 << 16});
    nghttp2_hd_inflater* inflater = nullptr;
    ASSERT_EQ(nghttp2_hd_inflate_new(&inflater), 0);
    for (int block = 0; block < 30; ++block) {
      SCOPED_TRACE(::testing::Message() << "connection " << conn << " block " << block);
      while (gen.pick(100) < 15) {  // the peer's SETTINGS_HEADER_TABLE_SIZE changes
        const uint32_t size = kTableSizes[gen.pick(8)];
        encoder.set_peer_table_size(size);
        mirror.set_table_size_limit(size);
        ASSERT_EQ(nghttp2_hd_inflate_change_table_size(inflater, size), 0);
      }
      const Pairs fields = gen.block();
      net::Buffer out;
      for (const auto& [name, value] : fields) encoder.encode(name, value, out);

      Pairs theirs;
      std::vector<bool> never;
      ASSERT_TRUE(inflate(inflater, out.view(), theirs, never));
      ASSERT_EQ(theirs, fields);
      const auto ours = testing::decode(mirror, out.view());  // the flags as tern reads them
      ASSERT_EQ(ours.error, HpackError::kOk);
      for (size_t i = 0; i < never.size(); ++i) EXPECT_EQ(never[i], ours.raw[i].never_indexed);

      ASSERT_EQ(encoder.table().size(), nghttp2_hd_inflate_get_dynamic_table_size(inflater));
      ASSERT_EQ(encoder.table().max_size(), nghttp2_hd_inflate_get_max_dynamic_table_size(inflater));
      Pairs table;
      for (size_t i = 0; i < encoder.table().count() + 1; ++i) {
        const nghttp2_nv* e = nghttp2_hd_inflate_get_table_entry(inflater, kHpackStaticCount + 1 + i);
        if (e) table.emplace_back(str(e->name, e->namelen), str(e->value, e->valuelen));
      }
      ASSERT_EQ(entries(encoder.table()), table);
    }
    nghttp2_hd_inflate_del(inflater);
  }
}

}  // namespace
}  // namespace tern::http2
