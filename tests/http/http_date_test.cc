#include "http/http_date.h"

#include <gtest/gtest.h>
#include <time.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>

namespace tern::http {
namespace {

constexpr time_t kRfcExample = 784111777;  // Sun, 06 Nov 1994 08:49:37 GMT

std::string format(time_t t) {
  std::array<char, kHttpDateSize> buf{};
  return std::string(format_http_date(t, buf));
}

TEST(HttpDate, FormatsTheRfcExample) { EXPECT_EQ(format(kRfcExample), "Sun, 06 Nov 1994 08:49:37 GMT"); }

TEST(HttpDate, FormatsTheEpochAndLeapDays) {
  EXPECT_EQ(format(0), "Thu, 01 Jan 1970 00:00:00 GMT");
  EXPECT_EQ(format(951782400), "Tue, 29 Feb 2000 00:00:00 GMT");
  EXPECT_EQ(format(1709164799), "Wed, 28 Feb 2024 23:59:59 GMT");
  EXPECT_EQ(format(4107542400), "Mon, 01 Mar 2100 00:00:00 GMT");  // 2100 is not leap
}

TEST(HttpDate, FormatsTimesBeforeTheEpoch) {
  EXPECT_EQ(format(-1), "Wed, 31 Dec 1969 23:59:59 GMT");
  EXPECT_EQ(format(-2208988800), "Mon, 01 Jan 1900 00:00:00 GMT");
}

TEST(HttpDate, ClampsYearsTheFormatCannotHold) {
  EXPECT_EQ(format(INT64_MAX), "Fri, 31 Dec 9999 23:59:59 GMT");
  EXPECT_EQ(format(INT64_MIN), "Sat, 01 Jan 0000 00:00:00 GMT");
}

TEST(HttpDate, FormatAgreesWithGmtimeOverManyDays) {
  // One sample every 9973 minutes across ~200 years, against libc.
  for (int64_t t = -2208988800; t < 4102444800; t += 9973 * 60 + 17) {
    struct tm tm {};
    time_t tt = static_cast<time_t>(t);
    ASSERT_NE(gmtime_r(&tt, &tm), nullptr);
    char expected[64];
    static const char* const kDay[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
    static const char* const kMon[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                       "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    snprintf(expected, sizeof expected, "%s, %02d %s %04d %02d:%02d:%02d GMT", kDay[tm.tm_wday],
             tm.tm_mday, kMon[tm.tm_mon], tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
    ASSERT_EQ(format(tt), expected) << t;
    ASSERT_EQ(parse_http_date(expected), std::optional<time_t>(tt)) << expected;
  }
}

TEST(HttpDate, ParsesAllThreeFormats) {
  EXPECT_EQ(parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT"), kRfcExample);
  EXPECT_EQ(parse_http_date("Sunday, 06-Nov-94 08:49:37 GMT"), kRfcExample);
  EXPECT_EQ(parse_http_date("Sun Nov  6 08:49:37 1994"), kRfcExample);
  EXPECT_EQ(parse_http_date("Sun Nov 06 08:49:37 1994"), kRfcExample);
}

TEST(HttpDate, TwoDigitYearsPivotAtSeventy) {
  EXPECT_EQ(parse_http_date("Thursday, 01-Jan-70 00:00:00 GMT"), 0);
  EXPECT_EQ(parse_http_date("Saturday, 01-Jan-00 00:00:00 GMT"), 946684800);
  EXPECT_EQ(parse_http_date("Tuesday, 31-Dec-69 00:00:00 GMT"), 3155673600);  // 2069
}

TEST(HttpDate, AcceptsALeapSecond) {
  EXPECT_EQ(parse_http_date("Sat, 31 Dec 2016 23:59:60 GMT"), 1483228800);
}

TEST(HttpDate, RejectsMalformedDates) {
  for (const char* bad : {
           "",
           "Sun, 06 Nov 1994 08:49:37",          // no zone
           "Sun, 06 Nov 1994 08:49:37 UTC",      // wrong zone
           "Sun, 06 Nov 1994 08:49:37 GMT ",     // trailing space
           " Sun, 06 Nov 1994 08:49:37 GMT",     // leading space
           "Sun, 6 Nov 1994 08:49:37 GMT",       // one-digit day
           "Sun, 06 nov 1994 08:49:37 GMT",      // month case
           "sun, 06 Nov 1994 08:49:37 GMT",      // day-name case
           "Sun, 06 Nov 94 08:49:37 GMT",        // two-digit year in IMF-fixdate
           "Sun, 06 Xyz 1994 08:49:37 GMT",      // no such month
           "Sux, 06 Nov 1994 08:49:37 GMT",      // no such day
           "Sun, 31 Nov 1994 08:49:37 GMT",      // November has 30 days
           "Sun, 29 Feb 1900 08:49:37 GMT",      // 1900 is not leap
           "Sun, 00 Nov 1994 08:49:37 GMT",      // day zero
           "Sun, 06 Nov 1994 24:00:00 GMT",      // hour 24
           "Sun, 06 Nov 1994 08:60:00 GMT",      // minute 60
           "Sun, 06 Nov 1994 08:49:61 GMT",      // second 61
           "Sun, 06 Nov 1994 8:49:37 GMT",       // one-digit hour
           "Sun,06 Nov 1994 08:49:37 GMT",       // missing space
           "Sunday, 06-Nov-1994 08:49:37 GMT",   // four-digit year in RFC 850
           "Sun Nov 6 08:49:37 1994",            // asctime needs two columns for the day
           "Sun Nov  6 08:49:37 94",             // asctime needs four digits
           "1994-11-06T08:49:37Z",               // ISO 8601 is not an HTTP-date
           "784111777",
       }) {
    EXPECT_EQ(parse_http_date(bad), std::nullopt) << bad;
  }
}

TEST(HttpDate, AcceptsFebruaryTwentyNinthInLeapYears) {
  EXPECT_EQ(parse_http_date("Tue, 29 Feb 2000 00:00:00 GMT"), 951782400);
  EXPECT_EQ(parse_http_date("Mon, 29 Feb 2100 00:00:00 GMT"), std::nullopt);
}

}  // namespace
}  // namespace tern::http
