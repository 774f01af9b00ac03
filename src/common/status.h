// Status and Result<T>: the error type for bad input and I/O across Arbiter.
//
// A Status carries a code, a human-readable message and, for validation errors, the dotted path of
// the offending field ("jobs[3].resources.gpus"). "Does not fit" is never a Status: the scheduling
// core answers that with a verdict (see core/cycle/verdict.h).
//
// Thread safety: plain values; safe to copy between threads.
#pragma once

#include <string>
#include <string_view>
#include <utility>

namespace arbiter {

enum class StatusCode {
  kOk,
  kInvalidArgument,
  kNotFound,
  kAlreadyExists,
  kFailedPrecondition,
  kConflict,
  kUnprocessable,  // well-formed, but in conflict with an earlier request (HTTP 422)
  kPermissionDenied,
  kUnauthenticated,
  kResourceExhausted,
  kUnavailable,
  kInternal,
};

// Stable lower-case name of a code, as used in API error bodies ("invalid_argument").
std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message, std::string field = {})
      : code_(code), message_(std::move(message)), field_(std::move(field)) {}

  static Status Ok() { return {}; }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // Dotted path of the field the error is about; empty when it is not about one field.
  const std::string& field() const { return field_; }

  // "field: message" when a field is set, else the message.
  std::string ToString() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
  std::string field_;
};

inline Status InvalidArgument(std::string field, std::string message) {
  return {StatusCode::kInvalidArgument, std::move(message), std::move(field)};
}
inline Status NotFound(std::string message) { return {StatusCode::kNotFound, std::move(message)}; }
inline Status FailedPrecondition(std::string message) {
  return {StatusCode::kFailedPrecondition, std::move(message)};
}
inline Status Internal(std::string message) { return {StatusCode::kInternal, std::move(message)}; }

}  // namespace arbiter

// Returns the status from the enclosing function when `expr` is not OK.
#define ARBITER_RETURN_IF_ERROR(expr) \
  do {                                \
    ::arbiter::Status _st = (expr);   \
    if (!_st.ok()) return _st;        \
  } while (false)
