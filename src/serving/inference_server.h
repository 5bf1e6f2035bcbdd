// InferenceServer: everything a protocol frontend (REST, gRPC) may ask of
// somm. Frontends hold a reference to one and never see models, instances or
// batchers. The router (router/router.h) implements it, in embedded mode
// in-process; a distributed frontend would implement it with RPCs.
//
// Thread-safety: every method may be called concurrently from any thread.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cluster/cluster_state.h"
#include "common/status.h"
#include "profiles/price_list.h"
#include "profiles/variant_profile.h"
#include "repository/model_config.h"
#include "rollout/rollout.h"
#include "serving/inference.h"
#include "serving/task_description.h"

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
  std::string model_bytes;  // the TorchScript file
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
  // Task discovery (serving/task_description.h): every task with a model
  // the caller may use, by name; one task, NotFound when it has none.
  virtual std::vector<TaskDescription> ListTasks(const Caller& caller) const { return {}; }
  virtual StatusOr<TaskDescription> DescribeTask(const std::string& task,
                                                 const Caller& caller) const {
    return Unimplemented("task discovery is not supported by this server");
  }

  // The operator's view (GET /v2/somm/workers, /v2/somm/overview,
  // /v2/somm/actions; src/dashboard/). The cluster as this server sees it:
  // every worker's devices and instance groups; null when it has none.
  virtual std::shared_ptr<const cluster::ClusterState> ClusterView() const { return nullptr; }
  // The prices that cost figures are computed at.
  virtual PriceList Prices() const { return {}; }
  // The control actions (loads, evictions, replica changes, worker scaling),
  // newest first, each with its reason: the decision log's "control:" rows,
  // kept apart so that per-query decisions never push them out.
  virtual std::vector<DecisionRecord> RecentActions(size_t limit) const { return {}; }
  // Every control action since the controller started, by kind (its
  // somm_control_actions_total, wherever it runs).
  virtual std::map<std::string, int64_t> ControlActionTotals() const { return {}; }

  // A model's rollout (rollout/rollout.h; REST .../models/{m}/rollout, gRPC
  // somm.SommControl/Rollout): changes it, or reads it with the current
  // step's figures. A model the caller may not see is NOT_FOUND as unknown.
  virtual StatusOr<RolloutView> ChangeRollout(const RolloutChange& change, const Caller& caller) {
    return Unimplemented("rollouts are not supported by this server");
  }
  virtual StatusOr<RolloutView> GetRollout(const std::string& model, const Caller& caller) const {
    return Unimplemented("rollouts are not supported by this server");
  }
};

}  // namespace somm
