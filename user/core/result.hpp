// A value or a one-line error message. Errors in pspxdp are for people: they
// name what was wrong ("rate \"5xbit\": unknown unit \"xbit\""), not a code.
#pragma once

#include <optional>
#include <string>
#include <utility>

namespace pspxdp {

struct Error {
    std::string message;
};

template <class T> class [[nodiscard]] Result {
  public:
    Result(T value) : value_(std::move(value)) {}
    Result(Error error) : error_(std::move(error.message)) {}

    bool ok() const { return value_.has_value(); }
    explicit operator bool() const { return ok(); }
    const T &value() const & { return *value_; }
    T &value() & { return *value_; }
    T &&value() && { return std::move(*value_); }
    const T &operator*() const { return *value_; }
    const T *operator->() const { return &*value_; }
    const std::string &error() const { return error_; }

  private:
    std::optional<T> value_;
    std::string error_;
};

template <> class [[nodiscard]] Result<void> {
  public:
    Result() = default;
    Result(Error error) : error_(std::move(error.message)), failed_(true) {}
    bool ok() const { return !failed_; }
    explicit operator bool() const { return ok(); }
    const std::string &error() const { return error_; }

  private:
    std::string error_;
    bool failed_ = false;
};

inline Error err(std::string message) { return Error{std::move(message)}; }

} // namespace pspxdp
