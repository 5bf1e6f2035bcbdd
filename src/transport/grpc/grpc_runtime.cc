#include "transport/grpc/grpc_runtime.h"

#include <absl/synchronization/mutex.h>

#include <mutex>
#include <string>

namespace somm::grpc_transport {

void TurnOffAbslDeadlockDetection() {
  static std::once_flag once;
  std::call_once(once, [] {
    absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  });
}

grpc::Status ToGrpcStatus(const Status& status) {
  grpc::StatusCode code = grpc::StatusCode::UNKNOWN;
  switch (status.code()) {
    case StatusCode::kOk:
      return grpc::Status::OK;
    case StatusCode::kInvalidArgument:
      code = grpc::StatusCode::INVALID_ARGUMENT;
      break;
    case StatusCode::kNotFound:
      code = grpc::StatusCode::NOT_FOUND;
      break;
    case StatusCode::kAlreadyExists:
      code = grpc::StatusCode::ALREADY_EXISTS;
      break;
    case StatusCode::kFailedPrecondition:
      code = grpc::StatusCode::FAILED_PRECONDITION;
      break;
    case StatusCode::kResourceExhausted:
      code = grpc::StatusCode::RESOURCE_EXHAUSTED;
      break;
    case StatusCode::kUnavailable:
      code = grpc::StatusCode::UNAVAILABLE;
      break;
    case StatusCode::kDeadlineExceeded:
      code = grpc::StatusCode::DEADLINE_EXCEEDED;
      break;
    case StatusCode::kUnimplemented:
      code = grpc::StatusCode::UNIMPLEMENTED;
      break;
    case StatusCode::kInternal:
      code = grpc::StatusCode::INTERNAL;
      break;
    case StatusCode::kUnauthenticated:
      code = grpc::StatusCode::UNAUTHENTICATED;
      break;
    case StatusCode::kPermissionDenied:
      code = grpc::StatusCode::PERMISSION_DENIED;
      break;
  }
  return grpc::Status(code, status.message());
}

Status FromGrpcStatus(const grpc::Status& status) {
  const std::string& m = status.error_message();
  switch (status.error_code()) {
    case grpc::StatusCode::OK:
      return Status::Ok();
    case grpc::StatusCode::INVALID_ARGUMENT:
      return InvalidArgument(m);
    case grpc::StatusCode::NOT_FOUND:
      return NotFound(m);
    case grpc::StatusCode::ALREADY_EXISTS:
      return AlreadyExists(m);
    case grpc::StatusCode::FAILED_PRECONDITION:
      return FailedPrecondition(m);
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return ResourceExhausted(m);
    case grpc::StatusCode::UNAVAILABLE:
      return Unavailable(m);
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return DeadlineExceeded(m);
    case grpc::StatusCode::UNIMPLEMENTED:
      return Unimplemented(m);
    case grpc::StatusCode::INTERNAL:
      return Internal(m);
    // Codes with no somm counterpart keep their gRPC name in the message.
    case grpc::StatusCode::CANCELLED:
      return Unavailable("gRPC CANCELLED: " + m);
    case grpc::StatusCode::ABORTED:
      return Unavailable("gRPC ABORTED: " + m);
    case grpc::StatusCode::OUT_OF_RANGE:
      return InvalidArgument("gRPC OUT_OF_RANGE: " + m);
    case grpc::StatusCode::PERMISSION_DENIED:
      return PermissionDenied(m);
    case grpc::StatusCode::UNAUTHENTICATED:
      return Unauthenticated(m);
    default:
      return Internal("gRPC code " + std::to_string(static_cast<int>(status.error_code())) + ": " +
                      m);
  }
}

}  // namespace somm::grpc_transport
