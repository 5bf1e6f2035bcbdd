// InferenceServer: everything a protocol frontend (REST, gRPC) may ask of
// somm. Frontends hold a reference to one and never see models, instances or
// batchers. The router (router/router.h) implements it, in embedded mode
// in-process; a distributed frontend would implement it with RPCs.
//
// Thread-safety: every method may be called concurrently from any thread.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "repository/model_config.h"
#include "serving/inference.h"
#include "profiles/variant_profile.h"

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
};

// What `somm register` sends: a TorchScript model, its task and signature,
// optional validation data and preprocessing.
struct RegistrationRequest {
  std::string name;
  std::string task;  // "task/dataset"
  std::vector<TensorSpec> inputs;
  std::vector<TensorSpec> outputs;
  int64_t max_batch_size = 0;
  std::string model_bytes;  // the TorchScript file
  // Validation data: `validation_count` samples of the (single) input in its
  // datatype, row-major, and as many INT64 labels. Optional.
  std::string validation_inputs;
  std::string validation_labels;
  int64_t validation_count = 0;
  std::optional<ImagePreprocessing> preprocessing;
  std::string description;
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

class InferenceServer {
 public:
  virtual ~InferenceServer() = default;

  virtual bool IsLive() const = 0;
  virtual bool IsReady() const = 0;  // live and not shutting down
  virtual ServerMetadata GetServerMetadata() const = 0;
  // version "" = any ready version.
  virtual StatusOr<ModelMetadata> GetModelMetadata(const std::string& name,
                                                   const std::string& version) const = 0;
  virtual StatusOr<bool> IsModelReady(const std::string& name,
                                      const std::string& version) const = 0;

  // Asynchronous: `done` runs exactly once, possibly before Infer returns.
  virtual void Infer(InferenceRequest request, InferCallback done) = 0;

  virtual std::vector<RepositoryEntry> RepositoryIndex(bool ready_only) const = 0;
  virtual Status LoadModel(const std::string& name) = 0;
  virtual Status UnloadModel(const std::string& name) = 0;

  // Model-less extensions. Registration validates synchronously and returns;
  // variant generation and profiling then run in the background.
  virtual Status RegisterModel(RegistrationRequest request) {
    return Unimplemented("model registration is not supported by this server");
  }
  virtual StatusOr<RegistrationStatus> GetRegistrationStatus(const std::string& name) const {
    return Unimplemented("model registration is not supported by this server");
  }
  virtual std::vector<DecisionRecord> RecentDecisions(size_t limit) const { return {}; }
};

}  // namespace somm
