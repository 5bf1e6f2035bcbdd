// task_codec: task discovery (api/task_description.h) <-> the generated
// somm.TasksResponse (proto/somm.proto), for the gRPC frontend and client.
// Decoding treats its input as hostile: an unknown datatype is an
// InvalidArgument naming the task and the tensor. Pure functions.
//
// Only gRPC adapter code may include this header (it pulls in generated code).
#pragma once

#include <vector>

#include "common/status.h"
#include "proto/somm.grpc.pb.h"
#include "api/task_description.h"

namespace somm::grpc_codec {

void EncodeTasks(const std::vector<TaskDescription>& in, somm::TasksResponse* out);
StatusOr<std::vector<TaskDescription>> DecodeTasks(const somm::TasksResponse& in);

}  // namespace somm::grpc_codec
