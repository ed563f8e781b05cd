// Regex: a compiled PCRE2 pattern (JIT where the CPU has it), the engine
// nginx uses for its location and server_name regexes, searched in
// decoded request paths and host names.
//
//   Regex re("\\.(png|jpg)$", Regex::kCaseless);  // std::invalid_argument if bad
//   Captures captures;
//   if (re.search("/img/A.PNG", &captures)) captures.get(1);  // "PNG"
//
// A Regex is immutable after compile() and may be searched from any thread;
// each thread keeps its own match data.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>


namespace tern::server {

// The groups of the last successful search: $0 (the whole match) to $9,
// as views into the subject (which must outlive them).
class Captures {
 public:
  static constexpr size_t kMax = 10;
  std::string_view get(size_t i) const { return i < count_ ? groups_[i] : std::string_view(); }
  size_t count() const { return count_; }
  void clear() { count_ = 0; }

 private:
  friend class Regex;
  std::array<std::string_view, kMax> groups_{};
  size_t count_ = 0;
};

class Regex {
 public:
  enum Flags : uint32_t { kNone = 0, kCaseless = 1 };

  // Throws std::invalid_argument with PCRE2's message and the offset
  // ("missing closing parenthesis at offset 4").
  explicit Regex(std::string_view pattern, uint32_t flags = kNone);

  // Whether the pattern matches somewhere in `subject`; the groups go to
  // `captures` when given.
  bool search(std::string_view subject, Captures* captures = nullptr) const;
  // The number of the group `(?<name>...)`; -1 when the pattern has none of
  // that name.
  int group_number(std::string_view name) const;

  const std::string& pattern() const { return pattern_; }

 private:
  struct Code;

  std::shared_ptr<const Code> code_;
  std::string pattern_;
};

}  // namespace tern::server
