#include "http/range.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

namespace tern::http {
namespace {

// "single 0+500", "none", "unsatisfiable", "multiple": compact to compare.
std::string parsed(std::string_view header, uint64_t size) {
  RangeResult r = parse_range(header, size);
  switch (r.kind) {
    case RangeKind::kNone: return "none";
    case RangeKind::kUnsatisfiable: return "unsatisfiable";
    case RangeKind::kMultiple: return "multiple";
    case RangeKind::kSingle: return "single " + std::to_string(r.offset) + "+" + std::to_string(r.length);
  }
  return "?";
}

TEST(Range, ParsesTheThreeSingleForms) {
  EXPECT_EQ(parsed("bytes=0-499", 1234), "single 0+500");
  EXPECT_EQ(parsed("bytes=500-", 1234), "single 500+734");
  EXPECT_EQ(parsed("bytes=-500", 1234), "single 734+500");
  EXPECT_EQ(parsed("bytes=0-0", 1234), "single 0+1");
  EXPECT_EQ(parsed("bytes=1233-1233", 1234), "single 1233+1");
}

TEST(Range, ClampsTheLastBytePosition) {
  EXPECT_EQ(parsed("bytes=1000-99999", 1234), "single 1000+234");
  EXPECT_EQ(parsed("bytes=1000-1234", 1234), "single 1000+234");  // one past the end
  EXPECT_EQ(parsed("bytes=1000-1233", 1234), "single 1000+234");
  EXPECT_EQ(parsed("bytes=0-18446744073709551615", 10), "single 0+10");
  EXPECT_EQ(parsed("bytes=0-99999999999999999999999999", 10), "single 0+10");
}

TEST(Range, SuffixLongerThanTheFileMeansAllOfIt) {
  EXPECT_EQ(parsed("bytes=-5000", 1234), "single 0+1234");
  EXPECT_EQ(parsed("bytes=-99999999999999999999999999", 10), "single 0+10");
}

TEST(Range, UnitIsCaseInsensitive) {
  EXPECT_EQ(parsed("Bytes=0-1", 10), "single 0+2");
  EXPECT_EQ(parsed("BYTES=0-1", 10), "single 0+2");
}

TEST(Range, AllowsWhitespaceAroundListElementsOnly) {
  EXPECT_EQ(parsed("bytes= 0-1", 10), "single 0+2");
  EXPECT_EQ(parsed("bytes=0-1 \t", 10), "single 0+2");
  EXPECT_EQ(parsed("bytes=0-1 , 20-30", 10), "single 0+2");
  EXPECT_EQ(parsed("bytes=0 -1", 10), "none");
  EXPECT_EQ(parsed("bytes=0- 1", 10), "none");
  EXPECT_EQ(parsed("bytes =0-1", 10), "none");
}

TEST(Range, IgnoresEmptyListElements) {
  EXPECT_EQ(parsed("bytes=,0-1", 10), "single 0+2");
  EXPECT_EQ(parsed("bytes=0-1,,", 10), "single 0+2");
  EXPECT_EQ(parsed("bytes=,", 10), "none");
}

TEST(Range, IgnoresInvalidHeaders) {
  for (std::string_view bad : {
           "",
           "bytes",
           "bytes=",
           "bytes=-",
           "bytes=abc",
           "bytes=5",
           "bytes=5-4",      // last < first
           "bytes=1-2-3",
           "bytes=1-2x",
           "bytes=+1-2",
           "bytes=0x10-20",
           "bytes=0-1,junk",  // one bad element spoils the header
           "bytes=--5",
           "items=0-1",       // a unit we do not know
           "bytesx=0-1",
           "0-1",
       }) {
    EXPECT_EQ(parsed(bad, 100), "none") << bad;
  }
}

TEST(Range, FirstBytePastTheEndIsUnsatisfiable) {
  EXPECT_EQ(parsed("bytes=1234-", 1234), "unsatisfiable");
  EXPECT_EQ(parsed("bytes=1234-2000", 1234), "unsatisfiable");
  EXPECT_EQ(parsed("bytes=99999999999999999999999-", 1234), "unsatisfiable");
}

TEST(Range, ZeroSuffixIsUnsatisfiable) { EXPECT_EQ(parsed("bytes=-0", 1234), "unsatisfiable"); }

TEST(Range, UnsatisfiableRangesAreDroppedWhenOthersRemain) {
  EXPECT_EQ(parsed("bytes=5000-6000, 0-9", 1234), "single 0+10");
  EXPECT_EQ(parsed("bytes=-0,2-3", 1234), "single 2+2");
  EXPECT_EQ(parsed("bytes=5000-, 6000-", 1234), "unsatisfiable");
}

TEST(Range, SeveralSatisfiableRangesAreReportedAsMultiple) {
  EXPECT_EQ(parsed("bytes=0-1,5-6", 1234), "multiple");
  EXPECT_EQ(parsed("bytes=0-1, -5", 1234), "multiple");
  EXPECT_EQ(parsed("bytes=0-1,0-1", 1234), "multiple");
}

TEST(Range, EmptyRepresentationHasNoByteRanges) {
  EXPECT_EQ(parsed("bytes=0-", 0), "unsatisfiable");
  EXPECT_EQ(parsed("bytes=0-0", 0), "unsatisfiable");
  EXPECT_EQ(parsed("bytes=-0", 0), "unsatisfiable");
  // RFC 9110 14.1.1: a non-zero suffix is satisfiable even here; there is
  // nothing to send but the (empty) whole, so the answer is a plain 200.
  EXPECT_EQ(parsed("bytes=-1", 0), "none");
}

TEST(Range, FormatsContentRange) {
  std::array<char, kContentRangeMaxSize> buf{};
  EXPECT_EQ(format_content_range(0, 500, 1234, buf), "bytes 0-499/1234");
  EXPECT_EQ(format_content_range(1233, 1, 1234, buf), "bytes 1233-1233/1234");
  EXPECT_EQ(format_unsatisfied_range(1234, buf), "bytes */1234");
  EXPECT_EQ(format_unsatisfied_range(0, buf), "bytes */0");
}

TEST(Range, FormatFitsTheLargestNumbers) {
  std::array<char, kContentRangeMaxSize> buf{};
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  EXPECT_EQ(format_content_range(kMax - 1, 1, kMax, buf),
            "bytes 18446744073709551614-18446744073709551614/18446744073709551615");
}

}  // namespace
}  // namespace tern::http
