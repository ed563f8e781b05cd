// HTTP-date formatting and parsing (RFC 9110 section 5.6.7).
//
// Senders must produce IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT");
// recipients must also accept the obsolete RFC 850 form
// ("Sunday, 06-Nov-94 08:49:37 GMT") and C's asctime form
// ("Sun Nov  6 08:49:37 1994"). Both directions use plain calendar arithmetic
// (Howard Hinnant's days-from-civil algorithms) instead of gmtime_r/timegm or
// strftime/strptime: no locale, no time-zone lock shared between loop
// threads, no allocation, and the same answer on every libc.
//
// Free functions without state. Any thread.
#pragma once

#include <cstddef>
#include <ctime>
#include <optional>
#include <span>
#include <string_view>

namespace tern::http {

// Length of an IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT".
inline constexpr size_t kHttpDateSize = 29;

// Writes `t` (seconds since the Unix epoch) as an IMF-fixdate into `out`
// (exactly kHttpDateSize bytes, no NUL) and returns a view of it. Times
// outside years 0000..9999, which the format cannot express, are clamped.
std::string_view format_http_date(time_t t, std::span<char, kHttpDateSize> out);

// Parses any of the three HTTP-date forms. Returns nullopt for anything else,
// including out-of-range fields (Feb 30, 24:00:00) and trailing bytes. Names
// of days and months are case-sensitive, as the grammar says; the day name is
// checked for spelling but not against the date (nginx does not either). A
// two-digit RFC 850 year means 20yy when yy < 70 and 19yy otherwise (nginx's
// fixed pivot, not RFC 9110's "at most 50 years ahead" rule, which would need
// the current date and only differs for dates few clients ever send). A
// seconds value of 60 (a leap second) is accepted and counts as the first
// second of the next minute.
std::optional<time_t> parse_http_date(std::string_view text);

}  // namespace tern::http
