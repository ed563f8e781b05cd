#include "http/http_date.h"

#include <algorithm>
#include <array>
#include <cstdint>

namespace tern::http {
namespace {

constexpr std::array<std::string_view, 7> kDays = {"Sun", "Mon", "Tue", "Wed",
                                                   "Thu", "Fri", "Sat"};
constexpr std::array<std::string_view, 7> kLongDays = {
    "Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"};
constexpr std::array<std::string_view, 12> kMonths = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                                      "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

// Valid IMF-fixdate years: 0000-01-01T00:00:00 .. 9999-12-31T23:59:59.
constexpr int64_t kMinTime = -62167219200;
constexpr int64_t kMaxTime = 253402300799;

struct CivilDate {
  int64_t year;
  unsigned month;  // 1..12
  unsigned day;    // 1..31
};

// Days since 1970-01-01 of a proleptic Gregorian date (Hinnant).
int64_t days_from_civil(CivilDate d) {
  int64_t y = d.year - (d.month <= 2 ? 1 : 0);
  int64_t era = (y >= 0 ? y : y - 399) / 400;
  auto yoe = static_cast<unsigned>(y - era * 400);
  unsigned mp = (d.month + 9) % 12;
  unsigned doy = (153 * mp + 2) / 5 + d.day - 1;
  unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

// The inverse of days_from_civil.
CivilDate civil_from_days(int64_t z) {
  z += 719468;
  int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  auto doe = static_cast<unsigned>(z - era * 146097);
  unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  unsigned mp = (5 * doy + 2) / 153;
  unsigned day = doy - (153 * mp + 2) / 5 + 1;
  unsigned month = mp < 10 ? mp + 3 : mp - 9;
  return {static_cast<int64_t>(yoe) + era * 400 + (month <= 2 ? 1 : 0), month, day};
}

bool is_leap(int64_t y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

unsigned days_in_month(int64_t year, unsigned month) {
  static constexpr unsigned kDaysIn[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return month == 2 && is_leap(year) ? 29 : kDaysIn[month - 1];
}

void put2(char* p, unsigned v) {
  p[0] = static_cast<char>('0' + v / 10);
  p[1] = static_cast<char>('0' + v % 10);
}

// Floor division, so times before 1970 land on the right day.
int64_t floor_div(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

}  // namespace

std::string_view format_http_date(time_t t, std::span<char, kHttpDateSize> out) {
  int64_t secs = std::clamp<int64_t>(t, kMinTime, kMaxTime);
  int64_t days = floor_div(secs, 86400);
  auto sod = static_cast<unsigned>(secs - days * 86400);
  CivilDate d = civil_from_days(days);
  // 1970-01-01 was a Thursday (index 4).
  auto weekday = static_cast<size_t>(((days % 7) + 11) % 7);
  char* p = out.data();
  std::copy_n(kDays[weekday].data(), 3, p);
  p[3] = ',';
  p[4] = ' ';
  put2(p + 5, d.day);
  p[7] = ' ';
  std::copy_n(kMonths[d.month - 1].data(), 3, p + 8);
  p[11] = ' ';
  auto year = static_cast<unsigned>(d.year);
  put2(p + 12, year / 100);
  put2(p + 14, year % 100);
  p[16] = ' ';
  put2(p + 17, sod / 3600);
  p[19] = ':';
  put2(p + 20, sod / 60 % 60);
  p[22] = ':';
  put2(p + 23, sod % 60);
  std::copy_n(" GMT", 4, p + 25);
  return {out.data(), kHttpDateSize};
}

namespace {

// A cursor over the text; every reader fails (returns false) without moving
// on a mismatch, and the caller gives up on the first failure.
class Scanner {
 public:
  explicit Scanner(std::string_view s) : s_(s) {}

  bool literal(std::string_view lit) {
    if (s_.substr(0, lit.size()) != lit) return false;
    s_.remove_prefix(lit.size());
    return true;
  }
  // Exactly `width` ASCII digits.
  bool digits(size_t width, unsigned* value) {
    if (s_.size() < width) return false;
    unsigned v = 0;
    for (size_t i = 0; i < width; ++i) {
      char c = s_[i];
      if (c < '0' || c > '9') return false;
      v = v * 10 + static_cast<unsigned>(c - '0');
    }
    *value = v;
    s_.remove_prefix(width);
    return true;
  }
  template <size_t N>
  bool one_of(const std::array<std::string_view, N>& names, unsigned* index) {
    for (size_t i = 0; i < N; ++i) {
      if (literal(names[i])) {
        *index = static_cast<unsigned>(i);
        return true;
      }
    }
    return false;
  }
  bool at_end() const { return s_.empty(); }

 private:
  std::string_view s_;
};

struct Fields {
  int64_t year = 0;
  unsigned month = 0;  // 0-based while parsing
  unsigned day = 0, hour = 0, minute = 0, second = 0;
};

// "08:49:37"
bool time_of_day(Scanner& s, Fields* f) {
  return s.digits(2, &f->hour) && s.literal(":") && s.digits(2, &f->minute) && s.literal(":") &&
         s.digits(2, &f->second);
}

// "Sun, 06 Nov 1994 08:49:37 GMT"
bool parse_imf_fixdate(std::string_view text, Fields* f) {
  Scanner s(text);
  unsigned wday = 0, year = 0;
  bool ok = s.one_of(kDays, &wday) && s.literal(", ") && s.digits(2, &f->day) && s.literal(" ") &&
            s.one_of(kMonths, &f->month) && s.literal(" ") && s.digits(4, &year) &&
            s.literal(" ") && time_of_day(s, f) && s.literal(" GMT") && s.at_end();
  f->year = year;
  return ok;
}

// "Sunday, 06-Nov-94 08:49:37 GMT"
bool parse_rfc850(std::string_view text, Fields* f) {
  Scanner s(text);
  unsigned wday = 0, yy = 0;
  bool ok = s.one_of(kLongDays, &wday) && s.literal(", ") && s.digits(2, &f->day) &&
            s.literal("-") && s.one_of(kMonths, &f->month) && s.literal("-") &&
            s.digits(2, &yy) && s.literal(" ") && time_of_day(s, f) && s.literal(" GMT") &&
            s.at_end();
  f->year = yy < 70 ? 2000 + yy : 1900 + yy;
  return ok;
}

// "Sun Nov  6 08:49:37 1994" (the day may also be written "06").
bool parse_asctime(std::string_view text, Fields* f) {
  Scanner s(text);
  unsigned wday = 0, year = 0;
  bool ok = s.one_of(kDays, &wday) && s.literal(" ") && s.one_of(kMonths, &f->month) &&
            s.literal(" ") && (s.digits(2, &f->day) || (s.literal(" ") && s.digits(1, &f->day))) &&
            s.literal(" ") && time_of_day(s, f) && s.literal(" ") && s.digits(4, &year) &&
            s.at_end();
  f->year = year;
  return ok;
}

}  // namespace

std::optional<time_t> parse_http_date(std::string_view text) {
  Fields f;
  if (!parse_imf_fixdate(text, &f) && !parse_rfc850(text, &f) && !parse_asctime(text, &f)) {
    return std::nullopt;
  }
  unsigned month = f.month + 1;
  if (f.day < 1 || f.day > days_in_month(f.year, month)) return std::nullopt;
  if (f.hour > 23 || f.minute > 59 || f.second > 60) return std::nullopt;
  int64_t days = days_from_civil({f.year, month, f.day});
  int64_t secs = days * 86400 + f.hour * 3600 + f.minute * 60 + f.second;
  return static_cast<time_t>(secs);
}

}  // namespace tern::http
