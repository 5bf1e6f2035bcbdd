// The worker as routers and controllers see it: the action, the decided
// query and its answer, and WorkerStub, how a router and a controller reach
// one worker. It does not include the worker (worker.h): a router, a
// controller and the cluster's RPC code compile against these types only,
// not against the batcher and the backend behind them.
//
// The embedded server uses LocalWorkerStub (local_worker_stub.h: direct
// calls into a Worker of this process); a cluster uses a gRPC stub
// (cluster_rpc/grpc_worker_stub.h) with the same contract, so the router and
// the controller are the same code in both.
//
// Contract: every callback runs exactly once, on any thread, possibly before
// the call returns; no call blocks its caller on a load or on a query.
// Thread-safe.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "batching/batch_types.h"
#include "cluster/cluster_state_store.h"
#include "common/status.h"
#include "common/tensor.h"
#include "registry/version_record.h"

namespace somm {

// An action as the worker receives it: the policy's typed Action, plus the
// model version's record (in a cluster the worker reads that from the shared
// registry by model and version).
struct WorkerAction {
  cluster::Action action;
  VersionPtr version;
  bool urgent = false;        // a query waits on it
  bool only_if_idle = false;  // kUnload/kEvict: refuse while queries are in flight
  bool pinned = false;        // kLoad: never unloaded or evicted (static provisioning)
  bool reload = false;        // kLoad of a loaded group: load afresh, then swap (make before break)
};

// A decided query.
struct ExecuteRequest {
  std::string group;          // GroupLabel: "digits-mlp:1:ts-fp32@cpu1"
  int64_t instance_id = -1;   // -1: the least loaded
  std::vector<Tensor> inputs; // checked (input_check.h), in model order
  // Set instead of `inputs` when the caller keeps its inputs (a router, to
  // retry a remote dispatch elsewhere). Nobody changes them any more: a stub
  // that sends them keeps a reference until its wire is done with the bytes,
  // and sends them from where they lie; a local worker copies them.
  std::shared_ptr<const std::vector<Tensor>> shared_inputs;
  SteadyClock::time_point deadline = SteadyClock::time_point::max();
  bool best_effort = false;
  const std::vector<Tensor>& Inputs() const {
    return shared_inputs != nullptr ? *shared_inputs : inputs;
  }
};

struct ExecuteResult {
  std::vector<Tensor> outputs;  // every output, in model order
  BatchStats stats;
  int64_t instance_id = -1;
  std::string device;
};
using ExecuteCallback = std::function<void(StatusOr<ExecuteResult>)>;

class WorkerStub {
 public:
  virtual ~WorkerStub() = default;
  virtual const std::string& id() const = 0;
  // Runs a decided query. A local stub returns NotFound, with `request` left
  // as it was, when its group is not loaded there (the router then asks for
  // a load and tries again); otherwise it takes the request, returns Ok, and
  // `done` runs once.
  // A remote stub (cluster_rpc/grpc_worker_stub.h) cannot know synchronously:
  // it copies the inputs onto the wire, leaves `request` in place (so that
  // the router may retry elsewhere), returns Ok, and reports everything,
  // NotFound for a group not loaded there included, through `done`. Callers
  // must therefore handle NotFound from either place.
  virtual Status Execute(ExecuteRequest& request, ExecuteCallback done) = 0;
  // Carries out one action; `done` when it is carried out or failed.
  virtual void Apply(WorkerAction action, std::function<void(Status)> done) = 0;
  // The worker's share of the cluster state, fresh.
  virtual cluster::WorkerReport Report() = 0;
  // A worker of this process: Execute takes the inputs without a copy and
  // Report() is a direct call, cheap enough per query.
  virtual bool local() const { return false; }
};

}  // namespace somm
