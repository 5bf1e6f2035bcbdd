// WorkerStub: how a router and a controller reach one worker. The embedded
// server uses LocalWorkerStub (direct calls into a Worker in this process); a
// cluster uses a gRPC stub with the same contract, so the router and the
// controller are the same code in both.
//
// Contract: every callback runs exactly once, on any thread, possibly before
// the call returns; no call blocks its caller on a load or on a query.
// Thread-safe.
#pragma once

#include <functional>
#include <string>

#include "cluster/cluster_state_store.h"
#include "worker/worker.h"

namespace somm {

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

// Direct calls into a Worker of this process. Every change the worker makes
// to its groups is reported to `store` at once (Worker's on_change is wired
// to Publish()).
class LocalWorkerStub : public WorkerStub {
 public:
  LocalWorkerStub(Worker& worker, cluster::ClusterStateStore& store)
      : worker_(worker), store_(store), id_(worker.options().id) {}
  const std::string& id() const override { return id_; }
  Status Execute(ExecuteRequest& request, ExecuteCallback done) override {
    return worker_.Execute(request, std::move(done));
  }
  void Apply(WorkerAction action, std::function<void(Status)> done) override {
    worker_.Apply(std::move(action), std::move(done));
  }
  cluster::WorkerReport Report() override { return worker_.Report(); }
  bool local() const override { return true; }
  // Puts the worker's report into the store.
  void Publish() { store_.PutWorker(worker_.Report()); }

 private:
  Worker& worker_;
  cluster::ClusterStateStore& store_;
  const std::string id_;
};

}  // namespace somm
