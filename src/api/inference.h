// InferenceRequest / InferenceResponse: one query as the serving core sees it,
// after a frontend has decoded REST or gRPC and before it encodes the answer.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "common/status.h"
#include "common/tensor.h"
#include "api/caller.h"

namespace somm {

// OIP parameter values: bool, int64, double or string.
using Parameter = std::variant<bool, int64_t, double, std::string>;
using Parameters = std::map<std::string, Parameter>;

struct RequestedOutput {
  std::string name;
  Parameters parameters;  // e.g. binary_data (REST), classification
};

struct InferenceRequest {
  // Model-less form: when task is set (REST /v2/tasks/{task}/infer, or the
  // gRPC parameter "task"), somm picks the model as well as the variant and
  // model_name may be empty.
  std::string task;
  // A model ("digits-mlp": somm picks the variant when SLOs are given) or an
  // exact variant ("digits-mlp:1:ts-int8", optionally "@cpu1").
  std::string model_name;
  std::string model_version;  // "" = the server picks (latest ready)
  std::string id;
  Parameters parameters;
  std::vector<Tensor> inputs;
  std::vector<RequestedOutput> outputs;  // empty = every output
  // Who asked (set by the frontend's CallGuard): a task query only
  // considers models the caller may use.
  Caller caller;
};

struct InferenceResponse {
  std::string model_name;
  std::string model_version;
  std::string id;
  // Timing and placement the server reports back: somm_queue_us,
  // somm_compute_us, somm_batch_size, somm_device, ...
  Parameters parameters;
  std::vector<Tensor> outputs;
};

// Called exactly once per request, from any thread.
using InferCallback = std::function<void(StatusOr<InferenceResponse>)>;

}  // namespace somm
