// cluster_codec: the worker service's messages (proto/cluster.proto) <->
// somm's types (worker/worker.h, cluster/cluster_state.h), for both ends of
// the wire, and the deadline's crossing between the sender's and the
// receiver's clocks. Status codes map through transport/grpc/grpc_runtime.h,
// the one place somm codes meet gRPC codes.
//
// Decoders treat their input as hostile: a malformed message (unknown
// datatype or enum, bytes that do not match the shape) is InvalidArgument
// naming the field; nothing throws. Pure functions, safe from any thread.
//
// Internal to src/cluster_rpc (it includes generated code).
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "common/status.h"
#include "proto/cluster.grpc.pb.h"
#include "worker/worker_api.h"

namespace somm::cluster_codec {

// The generated messages live in somm::cluster next to ClusterState; `pb`
// keeps the two apart at a glance.
namespace pb = ::somm::cluster;

// Copies `in` (the router keeps its inputs, to retry elsewhere). The
// deadline is not part of the message: it is the call's (ToCallDeadline).
void EncodeExecuteRequest(const ExecuteRequest& in, pb::ExecuteRequest* out);
// The bytes EncodeExecuteRequest's message serializes to, in pieces, so
// that the input data go on the wire from where they lie instead of being
// copied twice (into the message, then into gRPC's buffers): an image is
// 600 KB. The wire is heads[0], data of input 0, heads[1], data of input 1,
// ..., heads[n] for n inputs (n + 1 heads; a head may be empty). The heads
// are owned; the data stay in `in`, which the caller keeps until the bytes
// are sent.
struct ExecuteRequestWire {
  std::vector<std::string> heads;
};
ExecuteRequestWire EncodeExecuteRequestWire(const ExecuteRequest& in);
// Copies the input bytes out of `in`. The deadline is left at max(); the
// caller sets it.
Status DecodeExecuteRequest(const pb::ExecuteRequest& in, ExecuteRequest* out);
// The same, moving the input bytes out of `in` (an image is megabytes).
Status DecodeExecuteRequest(pb::ExecuteRequest&& in, ExecuteRequest* out);

// Moves the output bytes.
void EncodeExecuteResult(ExecuteResult in, pb::ExecuteResponse* out);
StatusOr<ExecuteResult> DecodeExecuteResult(pb::ExecuteResponse* in);

// The action and its flags; the version record does not travel (the worker
// resolves it by model and version).
void EncodeAction(const WorkerAction& in, pb::ApplyRequest* out);
// Fills everything but `version`.
Status DecodeAction(const pb::ApplyRequest& in, WorkerAction* out);

// A steady-clock deadline as a gRPC call deadline (system clock), measured
// from now; false for max() (no deadline).
bool ToCallDeadline(SteadyClock::time_point deadline,
                    std::chrono::system_clock::time_point* call_deadline);
// A call's deadline (system clock; max() = none) on this process's steady
// clock.
SteadyClock::time_point FromCallDeadline(std::chrono::system_clock::time_point call_deadline);

}  // namespace somm::cluster_codec
