// LocalWorkerStub: the WorkerStub (worker_api.h) of a Worker in this
// process, as the embedded server wires it.
#pragma once

#include <string>

#include "cluster/cluster_state_store.h"
#include "worker/worker.h"
#include "worker/worker_api.h"

namespace somm {

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
