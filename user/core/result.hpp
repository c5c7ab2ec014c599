// A value or a one-line error message. Errors in pspxdp are for people: they
// name what was wrong ("rate \"5xbit\": unknown unit \"xbit\""), not a code.
#pragma once

#include <optional>
#include <string>
#include <utility>

namespace pspxdp {

struct Error {
    std::string message;
    // The process's exit code when this error ends a command: 1 for a failure
    // of the system (a syscall, a missing pin), 2 for bad input (the user's
    // words or file were refused and nothing was changed).
    int exit_code = 1;
};

template <class T> class [[nodiscard]] Result {
  public:
    Result(T value) : value_(std::move(value)) {}
    Result(Error error) : error_(std::move(error.message)), exit_code_(error.exit_code) {}

    bool ok() const { return value_.has_value(); }
    explicit operator bool() const { return ok(); }
    const T &value() const & { return *value_; }
    T &value() & { return *value_; }
    T &&value() && { return std::move(*value_); }
    const T &operator*() const { return *value_; }
    const T *operator->() const { return &*value_; }
    const std::string &error() const { return error_; }
    int exit_code() const { return exit_code_; }
    // The error, to pass up unchanged (message and exit code).
    Error failure() const { return Error{error_, exit_code_}; }

  private:
    std::optional<T> value_;
    std::string error_;
    int exit_code_ = 1;
};

template <> class [[nodiscard]] Result<void> {
  public:
    Result() = default;
    Result(Error error)
        : error_(std::move(error.message)), exit_code_(error.exit_code), failed_(true) {}
    bool ok() const { return !failed_; }
    explicit operator bool() const { return ok(); }
    const std::string &error() const { return error_; }
    int exit_code() const { return exit_code_; }
    Error failure() const { return Error{error_, exit_code_}; }

  private:
    std::string error_;
    int exit_code_ = 1;
    bool failed_ = false;
};

inline Error err(std::string message) { return Error{std::move(message)}; }
// Refused input: exit code 2.
inline Error bad_input(std::string message) { return Error{std::move(message), 2}; }

} // namespace pspxdp
