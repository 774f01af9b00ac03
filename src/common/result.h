// Result<T>: a value or a non-OK Status. GCC 12 has no std::expected; this is the small subset we
// use.
#pragma once

#include <optional>
#include <utility>

#include "common/check.h"
#include "common/status.h"

namespace arbiter {

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}         // NOLINT(google-explicit-constructor)
  Result(Status status) : status_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    ARBITER_CHECK(!status_.ok(), "Result constructed from an OK status without a value");
  }

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }

  T& value() & {
    ARBITER_CHECK(ok(), "Result::value() on error: " + status_.ToString());
    return *value_;
  }
  const T& value() const& {
    ARBITER_CHECK(ok(), "Result::value() on error: " + status_.ToString());
    return *value_;
  }
  T&& value() && {
    ARBITER_CHECK(ok(), "Result::value() on error: " + status_.ToString());
    return std::move(*value_);
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace arbiter
