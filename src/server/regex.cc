#define PCRE2_CODE_UNIT_WIDTH 8
#include "server/regex.h"

#include <pcre2.h>

#include <stdexcept>

namespace tern::server {

struct Regex::Code {
  pcre2_code* code = nullptr;
  ~Code() { pcre2_code_free(code); }
};

namespace {

// One match-data block per thread, big enough for $0..$9.
pcre2_match_data* thread_match_data() {
  struct Holder {
    pcre2_match_data* data = pcre2_match_data_create(Captures::kMax, nullptr);
    ~Holder() { pcre2_match_data_free(data); }
  };
  thread_local Holder holder;
  return holder.data;
}

}  // namespace

Regex::Regex(std::string_view pattern, uint32_t flags) : pattern_(pattern) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  uint32_t options = PCRE2_UTF | PCRE2_MATCH_INVALID_UTF;
  if (flags & kCaseless) options |= PCRE2_CASELESS;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   options, &error, &offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof message);
    throw std::invalid_argument(std::string(reinterpret_cast<const char*>(message)) + " at offset " +
                                std::to_string(offset));
  }
  // Without JIT support (some CPUs, some builds) the interpreter runs.
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  auto owned = std::make_shared<Code>();
  owned->code = code;
  code_ = std::move(owned);
}

int Regex::group_number(std::string_view name) const {
  const std::string text(name);
  const int n = pcre2_substring_number_from_name(code_->code, reinterpret_cast<PCRE2_SPTR>(text.c_str()));
  return n > 0 ? n : -1;
}

bool Regex::search(std::string_view subject, Captures* captures) const {
  pcre2_match_data* data = thread_match_data();
  const int rc = pcre2_match(code_->code, reinterpret_cast<PCRE2_SPTR>(subject.data()),
                             subject.size(), 0, 0, data, nullptr);
  if (rc < 0) return false;  // no match, or a match limit reached
  if (captures != nullptr) {
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(data);
    // rc == 0: more groups than the ovector holds; it holds kMax.
    const size_t groups = rc == 0 ? Captures::kMax : static_cast<size_t>(rc);
    for (size_t i = 0; i < groups; ++i) {
      const PCRE2_SIZE begin = ovector[2 * i], end = ovector[2 * i + 1];
      captures->groups_[i] =
          begin == PCRE2_UNSET ? std::string_view() : subject.substr(begin, end - begin);
    }
    captures->count_ = groups;
  }
  return true;
}

}  // namespace tern::server
