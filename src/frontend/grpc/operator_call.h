// somm.SommControl/OperatorCall: the REST port's mounted endpoints (the
// operator's views and the offline batch jobs, frontend/http/rest_mount.h)
// served over gRPC, so that `somm status` and `somm batch` speak both
// wires with one implementation of each view.
//
// Contract:
//   * A call names a method and a path as REST would ("GET",
//     "/v2/somm/actions?limit=20"). The path must be one a mount answers;
//     any other is NOT_FOUND (the rest of the API has RPCs of its own), a
//     method the endpoint does not take is INVALID_ARGUMENT.
//   * The caller is checked before the message is read (key_first.h), and
//     admitted as REST admits a mounted endpoint (Operation::kOperator);
//     the key travels to the mount as REST's Authorization header, so that
//     a batch submission is admitted again as a query of what it names.
//   * The mount's answer comes back as the response body when its HTTP
//     status is 2xx; otherwise as the gRPC code that status stands for,
//     with the message of REST's {"error": ...} body.
//   * Handlers run on the frontend's queue threads: the mounts answer
//     from memory and small files, as the metadata calls do.
#pragma once

#include <vector>

#include "frontend/grpc/key_first.h"
#include "frontend/http/rest_mount.h"
#include "serving/call_guard.h"
#include "transport/grpc/async_unary.h"

namespace somm::grpc_async {

class OperatorCallService {
 public:
  // `guard` null = no checks. Both must outlive the queue's Close.
  OperatorCallService(std::vector<RestMount> mounts, CallGuard* guard);
  // Registers OperatorCall in `table`; before the server is built.
  void Declare(CallQueue* queue, KeyFirstService* service, KeyFirstTable& table);

 private:
  const std::vector<RestMount> mounts_;
  CallGuard* const guard_;
};

}  // namespace somm::grpc_async
