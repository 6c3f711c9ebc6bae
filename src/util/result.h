#pragma once
// Errors on untrusted input travel as values: Result<T> holds either a T or an
// Error with a human-readable message (file and problem), never an exception.
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace ss {

struct Error {
  std::string message;
};

inline Error make_error(std::string msg) { return Error{std::move(msg)}; }

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Error err) : v_(std::move(err)) {}  // NOLINT
  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &std::get<0>(v_); }
  const T* operator->() const { return &std::get<0>(v_); }
  T& operator*() & { return std::get<0>(v_); }
  const Error& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

struct Ok {};

// Result<void> equivalent.
using Status = Result<Ok>;
inline Status ok_status() { return Ok{}; }

}  // namespace ss

// Propagate an error from an expression returning Result<...>.
#define SS_TRY(expr)                               \
  do {                                             \
    auto ss_try_r_ = (expr);                       \
    if (!ss_try_r_.ok()) return ss_try_r_.error(); \
  } while (0)

#define SS_CONCAT_INNER(a, b) a##b
#define SS_CONCAT(a, b) SS_CONCAT_INNER(a, b)
#define SS_ASSIGN_OR_RETURN(lhs, expr)                                             \
  auto SS_CONCAT(ss_r_, __LINE__) = (expr);                                        \
  if (!SS_CONCAT(ss_r_, __LINE__).ok()) return SS_CONCAT(ss_r_, __LINE__).error(); \
  lhs = std::move(SS_CONCAT(ss_r_, __LINE__)).value()
