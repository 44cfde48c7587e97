// Status and Expected<T>: how every API boundary in Kipp reports failure.
// A failure carries one human-readable message that names what is wrong, the
// expected and the found value; nothing below the CLI prints or aborts.
#pragma once

#include <cassert>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>

namespace kipp {

struct Error {
  std::string message;
};

inline Error make_error(std::string message) { return Error{std::move(message)}; }

template <typename T>
class [[nodiscard]] Expected {
 public:
  Expected(T value) : state_(std::move(value)) {}      // NOLINT: implicit by design
  Expected(Error error) : state_(std::move(error)) {}  // NOLINT: implicit by design

  bool ok() const { return state_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & {
    assert(ok());
    return std::get<0>(state_);
  }
  const T& value() const& {
    assert(ok());
    return std::get<0>(state_);
  }
  T&& value() && {
    assert(ok());
    return std::get<0>(std::move(state_));
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const Error& error() const {
    assert(!ok());
    return std::get<1>(state_);
  }
  const std::string& message() const { return error().message; }

 private:
  std::variant<T, Error> state_;
};

template <>
class [[nodiscard]] Expected<void> {
 public:
  Expected() = default;
  Expected(Error error) : error_(std::move(error)), failed_(true) {}  // NOLINT

  bool ok() const { return !failed_; }
  explicit operator bool() const { return ok(); }
  const Error& error() const {
    assert(failed_);
    return error_;
  }
  const std::string& message() const { return error().message; }

 private:
  Error error_;
  bool failed_ = false;
};

using Status = Expected<void>;

inline Status ok_status() { return Status{}; }

// Prefixes a failure's message with context ("reading config.json: ...").
template <typename T>
Expected<T> with_context(Expected<T> result, const std::string& context) {
  if (result.ok()) return result;
  return make_error(context + ": " + result.message());
}

}  // namespace kipp

#define KIPP_CONCAT_INNER(a, b) a##b
#define KIPP_CONCAT(a, b) KIPP_CONCAT_INNER(a, b)

// Returns the error of a failed Status/Expected from the enclosing function.
#define KIPP_RETURN_IF_ERROR(expr)                                      \
  do {                                                                  \
    auto kipp_status_ = (expr);                                         \
    if (!kipp_status_.ok()) return ::kipp::Error{kipp_status_.error()}; \
  } while (0)

// `KIPP_ASSIGN_OR_RETURN(auto x, MakeX());` binds the value or returns the error.
#define KIPP_ASSIGN_OR_RETURN(lhs, expr)                                 \
  auto KIPP_CONCAT(kipp_expected_, __LINE__) = (expr);                   \
  if (!KIPP_CONCAT(kipp_expected_, __LINE__).ok())                       \
    return ::kipp::Error{KIPP_CONCAT(kipp_expected_, __LINE__).error()}; \
  lhs = std::move(KIPP_CONCAT(kipp_expected_, __LINE__)).value()
