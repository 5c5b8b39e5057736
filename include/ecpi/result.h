// Result<T>: the fallible return type of every ecpi library call (STYLE.md rule 5).
// Libraries never throw; the CLI turns an Error into one line on stderr.
#pragma once

#include <cerrno>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace ecpi {

class Error {
public:
    Error() = default;
    explicit Error(std::string message, int errno_value = 0)
        : message_(std::move(message)), errno_(errno_value) {}

    // "context: strerror(err)"; err is a positive errno value.
    static Error from_errno(int err, std::string_view context) {
        std::string msg(context);
        msg += ": ";
        msg += std::strerror(err);
        return Error(std::move(msg), err);
    }

    const std::string& message() const { return message_; }
    int errno_value() const { return errno_; }

    // Prefix the message with more context ("reading x: " + inner).
    Error with_context(std::string_view context) const {
        return Error(std::string(context) + ": " + message_, errno_);
    }

private:
    std::string message_;
    int errno_ = 0;
};

template <typename T>
class [[nodiscard]] Result {
public:
    Result(T value) : v_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
    Result(Error error) : v_(std::move(error)) {}  // NOLINT(google-explicit-constructor)

    bool ok() const { return v_.index() == 0; }
    explicit operator bool() const { return ok(); }

    T& value() & { return std::get<0>(v_); }
    const T& value() const& { return std::get<0>(v_); }
    T&& value() && { return std::get<0>(std::move(v_)); }
    T& operator*() & { return value(); }
    const T& operator*() const& { return value(); }
    T* operator->() { return &value(); }
    const T* operator->() const { return &value(); }

    const Error& error() const { return std::get<1>(v_); }

private:
    std::variant<T, Error> v_;
};

template <>
class [[nodiscard]] Result<void> {
public:
    Result() = default;
    Result(Error error) : error_(std::move(error)), ok_(false) {}  // NOLINT(google-explicit-constructor)

    bool ok() const { return ok_; }
    explicit operator bool() const { return ok_; }
    const Error& error() const { return error_; }

private:
    Error error_;
    bool ok_ = true;
};

inline Result<void> ok() { return {}; }

}  // namespace ecpi

// Propagate an error from an expression returning Result<...>.
#define ECPI_CONCAT_INNER(a, b) a##b
#define ECPI_CONCAT(a, b) ECPI_CONCAT_INNER(a, b)
#define ECPI_RETURN_IF_ERROR(expr)                          \
    do {                                                    \
        auto ecpi_status_ = (expr);                         \
        if (!ecpi_status_.ok()) return ecpi_status_.error(); \
    } while (0)
// ECPI_ASSIGN_OR_RETURN(auto x, f()); declares x from a Result<T>.
#define ECPI_ASSIGN_OR_RETURN(decl, expr) \
    ECPI_ASSIGN_OR_RETURN_IMPL(ECPI_CONCAT(ecpi_result_, __LINE__), decl, expr)
#define ECPI_ASSIGN_OR_RETURN_IMPL(tmp, decl, expr) \
    auto tmp = (expr);                              \
    if (!tmp.ok()) return tmp.error();              \
    decl = std::move(tmp).value()
