// Status and StatusOr: errors are values in somm.
//
// Every fallible call returns a Status (or StatusOr<T>). Library exceptions
// (c10::Error, YAML::Exception, nlohmann::json::exception) are caught at the
// adapter that calls the library and become a Status whose message names the
// model, the tensor or the file concerned. Frontends map codes onto HTTP
// statuses and gRPC codes in exactly one place each (see frontend/).
//
// Thread-safety: values; copy freely.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace somm {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,    // malformed request or config
  kNotFound,           // unknown model, version, tensor
  kAlreadyExists,
  kFailedPrecondition, // model exists but not ready
  kResourceExhausted,  // queue full, too large
  kUnavailable,        // shutting down, no instance
  kDeadlineExceeded,
  kUnimplemented,
  kInternal,           // backend threw, bug
  kUnauthenticated,    // no, a wrong or a revoked API key (auth/)
  kPermissionDenied,   // the caller's role may not do this (auth/)
};

const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  std::string ToString() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
inline Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status AlreadyExists(std::string m) { return {StatusCode::kAlreadyExists, std::move(m)}; }
inline Status FailedPrecondition(std::string m) {
  return {StatusCode::kFailedPrecondition, std::move(m)};
}
inline Status ResourceExhausted(std::string m) {
  return {StatusCode::kResourceExhausted, std::move(m)};
}
inline Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
inline Status DeadlineExceeded(std::string m) {
  return {StatusCode::kDeadlineExceeded, std::move(m)};
}
inline Status Unimplemented(std::string m) { return {StatusCode::kUnimplemented, std::move(m)}; }
inline Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
inline Status Unauthenticated(std::string m) {
  return {StatusCode::kUnauthenticated, std::move(m)};
}
inline Status PermissionDenied(std::string m) {
  return {StatusCode::kPermissionDenied, std::move(m)};
}

// Holds either a value or a non-OK Status.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(Status status) : status_(std::move(status)) {}  // NOLINT: implicit by design
  StatusOr(T value) : value_(std::move(value)) {}          // NOLINT: implicit by design

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() & { return *value_; }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace somm

#define SOMM_CONCAT_INNER(a, b) a##b
#define SOMM_CONCAT(a, b) SOMM_CONCAT_INNER(a, b)

#define SOMM_RETURN_IF_ERROR(expr)              \
  do {                                          \
    ::somm::Status somm_status_ = (expr);       \
    if (!somm_status_.ok()) return somm_status_; \
  } while (0)

#define SOMM_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                               \
  if (!tmp.ok()) return tmp.status();              \
  lhs = std::move(tmp).value()

#define SOMM_ASSIGN_OR_RETURN(lhs, expr) \
  SOMM_ASSIGN_OR_RETURN_IMPL(SOMM_CONCAT(somm_statusor_, __LINE__), lhs, expr)
