// The records a server answers with, apart from inference itself
// (inference.h): server and model metadata, a repository index row, a
// decision, and a registration with its progress. Plain data: what the
// frontends encode and the router, the registry and the clients fill in.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "api/caller.h"
#include "api/inference.h"
#include "common/status.h"
#include "profiles/variant_profile.h"
#include "repository/model_config.h"

namespace somm {

struct ServerMetadata {
  std::string name;
  std::string version;
  std::vector<std::string> extensions;
};

struct TensorMetadata {
  std::string name;
  std::string datatype;
  Shape shape;  // including -1 for the batch dim when the model batches
};

struct ModelMetadata {
  std::string name;
  std::vector<std::string> versions;  // loaded versions, ascending
  std::string platform;
  std::vector<TensorMetadata> inputs;
  std::vector<TensorMetadata> outputs;
  Parameters parameters;  // task, max_batch_size, accuracy, ...
};

// One row of the repository index.
struct RepositoryEntry {
  std::string name;
  std::string version;  // "" when no version is known (e.g. config error)
  std::string state;    // READY, UNAVAILABLE, LOADING, UNLOADING
  std::string reason;   // why it is not READY
};

// One selector decision, as the decision log and GET /v2/somm/decisions show it.
struct DecisionRecord {
  int64_t unix_ms = 0;
  std::string target;        // the model or "task:<task>" the query named
  std::string requirements;  // e.g. "min_accuracy=0.9 latency_slo_ms=5"
  std::string outcome;       // loaded, load, best_effort, explicit, default, rejected
  std::string variant;       // chosen variant id; "" when rejected
  std::string hardware;      // e.g. "cpu1"
  double predicted_latency_ms = 0;
  double cost_usd = 0;
  std::string reason;
  // The tenant of the query that caused it ("" = no tenant, or the
  // controller): a caller sees only its own tenant's decisions.
  std::string tenant;
  // Filled in once the query is answered (DecisionLog::Complete): the
  // latency the server measured (negative until then, and for a control
  // action), and the answer's status code name ("" until then).
  double actual_latency_ms = -1;
  std::string status;
};

// What `somm register` sends: a TorchScript model, its task and signature,
// optional validation data and preprocessing.
struct RegistrationRequest {
  std::string name;
  std::string task;  // "task/dataset"
  std::vector<TensorSpec> inputs;
  std::vector<TensorSpec> outputs;
  int64_t max_batch_size = 0;
  // model.yaml's platform: the runtime the model file is for. It must be
  // registered in the server's backend registry (runtime/backend_registry.h),
  // which also names the file in the version folder.
  std::string platform = kDefaultPlatform;
  std::string model_bytes;  // the model file (for torchscript, the TorchScript file)
  // Validation data: `validation_count` samples of the (single) input in its
  // datatype, row-major, and as many INT64 labels. Optional.
  std::string validation_inputs;
  std::string validation_labels;
  int64_t validation_count = 0;
  std::optional<ImagePreprocessing> preprocessing;
  std::string description;
  // A model private to one tenant (`somm register --private`): the frontend
  // sets owner_tenant to the caller's tenant; "" = public.
  bool private_model = false;
  std::string owner_tenant;
  // Who registers, as the frontend's guard admitted them: the task check
  // and a name that is taken are judged by the models this caller may see,
  // so a registration never tells another tenant's model apart from none.
  Caller caller;
  // Asked once the probe has measured the model: whether the owner's
  // memory quota has room for `bytes` more (the measured peak of one
  // instance times its instance_count; CallGuard::AdmitPrivateMemory). A
  // refusal refuses the registration. Null = no quota to ask (a public
  // model, no guard).
  std::function<Status(int64_t bytes)> admit_private_memory;
};

// Progress and outcome of variant generation for one registered model.
struct RegistrationStatus {
  std::string name;
  std::string state;  // GENERATING, READY, FAILED, or NONE (no variants yet)
  std::string phase;  // the step in progress
  int done = 0;
  int total = 0;
  std::string message;
  std::vector<VariantProfile> variants;
  std::vector<std::string> skipped;  // "ts-bf16: CPU lacks ..."
};

}  // namespace somm
