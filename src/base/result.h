// Result<T>: a value or an Error, shaped like C++23 std::expected.
//
// Used for expected runtime outcomes (a refused connect, EAGAIN, a bad address):
// the caller decides what to do. Bugs are assertions (base/assert.h) and start-up
// failures in the server may throw; neither goes through Result.
#pragma once

#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include "base/assert.h"

namespace tern {

// An errno value plus the operation that failed. `what` must point to a string
// with static storage ("connect", "bind"), so making an Error never allocates.
struct Error {
  int code = 0;           // the errno value; 0 when there is none
  const char* what = "";  // the operation, with static storage

  // "connect: Connection refused"
  std::string message() const {
    std::string s(what);
    if (code != 0) {
      s += ": ";
      s += std::strerror(code);
    }
    return s;
  }
  // The same errno value and the same operation.
  friend bool operator==(const Error& a, const Error& b) {
    return a.code == b.code && std::strcmp(a.what, b.what) == 0;
  }
};

// A T, or the Error that kept it from being made. Must be looked at.
template <typename T>
class [[nodiscard]] Result {
 public:
  // Implicit both ways, so that a function returns a value or an error alike.
  Result(T value) : v_(std::in_place_index<0>, std::move(value)) {}  // NOLINT: implicit by design
  Result(Error error) : v_(std::in_place_index<1>, error) {}         // NOLINT

  // Whether it holds a value.
  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  // The value; aborts (naming the error) when there is none.
  T& value() & {
    TERN_CHECK_MSG(ok(), "Result::value() on an error: {}", std::get<1>(v_).message());
    return std::get<0>(v_);
  }
  const T& value() const& {
    TERN_CHECK_MSG(ok(), "Result::value() on an error: {}", std::get<1>(v_).message());
    return std::get<0>(v_);
  }
  T&& value() && {
    TERN_CHECK_MSG(ok(), "Result::value() on an error: {}", std::get<1>(v_).message());
    return std::get<0>(std::move(v_));
  }
  // The value, or `fallback` when there is none.
  T value_or(T fallback) const& { return ok() ? std::get<0>(v_) : std::move(fallback); }

  // The error; aborts when there is a value.
  const Error& error() const {
    TERN_CHECK(!ok());
    return std::get<1>(v_);
  }

  // value(), as std::optional and std::expected spell it.
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Error> v_;
};

// Success, or the Error of an operation that returns nothing else.
template <>
class [[nodiscard]] Result<void> {
 public:
  // Success.
  Result() = default;
  // Failure; implicit, so that a function returns an Error as it is.
  Result(Error error) : error_(error), ok_(false) {}  // NOLINT: implicit by design

  // Whether it succeeded.
  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  // The error; aborts on success.
  const Error& error() const {
    TERN_CHECK(!ok_);
    return error_;
  }

 private:
  Error error_;
  bool ok_ = true;
};

// Builds an Error from the current errno. Read errno once, right after the call.
inline Error errno_error(const char* what, int code) { return Error{code, what}; }

}  // namespace tern
