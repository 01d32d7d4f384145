#pragma once
// Status and Result<T>: expected failures travel as values, never as exceptions across modules.
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace peak {

// What kind of failure an error is; front ends map it to an exit code (docs/cli.md).
enum class ErrorKind {
  failed,       // the operation did not succeed (a step, an evaluation, ...)
  input,        // bad arguments or input files, or local changes in the way: fix the input
  environment,  // the machine or a service: no device, no key, unreachable endpoint, busy or
                // read-only workspace
};

// An error: a message written for the user (what happened and, where possible, what to do).
struct Error {
  std::string message;
  ErrorKind kind = ErrorKind::failed;
};

class Status {
 public:
  Status() = default;
  static Status ok() { return Status(); }
  static Status error(std::string message, ErrorKind kind = ErrorKind::failed) {
    return Status(std::move(message), kind);
  }
  Status(Error e)  // NOLINT: implicit on purpose
      : message_(std::move(e.message)), kind_(e.kind), ok_(false) {}
  bool is_ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const std::string& message() const { return message_; }
  ErrorKind kind() const { return kind_; }
  Status status() const { return *this; }

 private:
  Status(std::string m, ErrorKind k) : message_(std::move(m)), kind_(k), ok_(false) {}
  std::string message_;
  ErrorKind kind_ = ErrorKind::failed;
  bool ok_ = true;
};

template <typename T>
class Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit on purpose
  Result(Error e) : v_(std::move(e)) {}      // NOLINT: implicit on purpose
  Result(const Status& s)                    // NOLINT: only for failed statuses
      : v_(Error{s.message(), s.kind()}) {}
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
  ErrorKind error_kind() const { return std::get<1>(v_).kind; }
  Status status() const { return is_ok() ? Status::ok() : Status::error(error(), error_kind()); }

 private:
  std::variant<T, Error> v_;
};

inline Error make_error(std::string message, ErrorKind kind = ErrorKind::failed) {
  return Error{std::move(message), kind};
}

}  // namespace peak

// Propagate a failed Status/Result from the current function.
#define PEAK_TRY(expr)                                                                   \
  do {                                                                                   \
    auto&& peak_try_s_ = (expr);                                                         \
    if (!peak_try_s_)                                                                    \
      return ::peak::Error{peak_try_s_.status().message(), peak_try_s_.status().kind()}; \
  } while (0)
