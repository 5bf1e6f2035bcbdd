// What every gRPC server and client of somm shares, whatever protocol it
// speaks (the OIP frontend, the cluster's worker and control services, the
// clients): the one mapping between somm's status codes and gRPC's, and the
// process-wide Abseil setting gRPC's locks need.
//
// Contract:
//   * ToGrpcStatus and FromGrpcStatus are the only place the codes are
//     mapped, in both directions; the message passes through.
//   * TurnOffAbslDeadlockDetection is idempotent; every gRPC server and
//     client calls it before its first call.
//   * Thread-safe; the status functions are pure.
#pragma once

#include <grpcpp/support/status.h>

#include "common/status.h"

namespace somm::grpc_transport {

// Debian builds Abseil with its Mutex deadlock detector on, and gRPC takes an
// absl::Mutex several times per call, so every lock pays for a lock-order
// graph (GraphCycles was 2-3% of the server's and the load generator's CPU
// under load). The detector only ever reports; somm turns it off once, when
// the first gRPC server or client starts. Idempotent and thread-safe.
void TurnOffAbslDeadlockDetection();

// The one mapping from somm codes to gRPC codes; the message passes through.
grpc::Status ToGrpcStatus(const Status& status);
// Its inverse, for clients. gRPC codes somm has no name for keep their gRPC
// name in the message ("gRPC CANCELLED: ...").
Status FromGrpcStatus(const grpc::Status& status);

}  // namespace somm::grpc_transport
