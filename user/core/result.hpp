// A value or a one-line error message. Errors in pspxdp are for people: they
// name what was wrong ("rate \"5xbit\": unknown unit \"xbit\""), not a code.
#pragma once

#include <optional>
#include <string>
#include <utility>

namespace pspxdp {

struct Error {
    std::string message;
    // What a command exits with when it stops on this error: 2 when the
    // user's input was refused (a bad word, a class that does not exist, a
    // rate that does not fit: fix the command), 1 when the system failed.
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
    // The error with its exit code, to pass on unchanged.
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
// The user's input is refused: a command exits 2 on it.
inline Error refuse(std::string message) { return Error{std::move(message), 2}; }

} // namespace pspxdp
