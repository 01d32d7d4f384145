#pragma once
// Status and Result<T>: expected failures travel as values, never as exceptions across modules.
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace peak {

// An error: a message written for the user (what happened and, where possible, what to do).
struct Error {
  std::string message;
};

class Status {
 public:
  Status() = default;
  static Status ok() { return Status(); }
  static Status error(std::string message) { return Status(std::move(message)); }
  Status(Error e) : message_(std::move(e.message)), ok_(false) {}  // NOLINT: implicit on purpose
  bool is_ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const std::string& message() const { return message_; }
  Status status() const { return *this; }

 private:
  explicit Status(std::string m) : message_(std::move(m)), ok_(false) {}
  std::string message_;
  bool ok_ = true;
};

template <typename T>
class Result {
 public:
  Result(T value) : v_(std::move(value)) {}        // NOLINT: implicit on purpose
  Result(Error e) : v_(std::move(e)) {}            // NOLINT: implicit on purpose
  Result(const Status& s) : v_(Error{s.message()}) {}  // NOLINT: only for failed statuses
  bool is_ok() const { return v_.index() == 0; }
  explicit operator bool() const { return is_ok(); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &std::get<0>(v_); }
  const T* operator->() const { return &std::get<0>(v_); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  const std::string& error() const { return std::get<1>(v_).message; }
  Status status() const { return is_ok() ? Status::ok() : Status::error(error()); }

 private:
  std::variant<T, Error> v_;
};

inline Error make_error(std::string message) { return Error{std::move(message)}; }

}  // namespace peak

// Propagate a failed Status/Result from the current function.
#define PEAK_TRY(expr)                                        \
  do {                                                        \
    auto&& peak_try_s_ = (expr);                              \
    if (!peak_try_s_) return ::peak::Error{peak_try_s_.status().message()}; \
  } while (0)
