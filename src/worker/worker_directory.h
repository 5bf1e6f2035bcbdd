// WorkerDirectory: how a router and a controller find the workers they may
// send to. The embedded server has one local worker (SingleWorkerDirectory);
// a cluster keeps one gRPC stub per live worker (cluster_rpc/worker_pool.h),
// learned from the cluster-state store.
//
// Find() hands out shared ownership, so a stub stays valid for a call in
// flight even after its worker left the directory.
//
// Thread-safety: every method may be called concurrently.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "worker/worker_api.h"

namespace somm {

class WorkerDirectory {
 public:
  virtual ~WorkerDirectory() = default;
  // The stub of `worker`; null when it is not known (gone, or not yet seen).
  // "" names the only worker of a directory that has exactly one.
  virtual std::shared_ptr<WorkerStub> Find(const std::string& worker) = 0;
  // The workers known now.
  virtual std::vector<std::string> Ids() = 0;
};

// One worker, known for the directory's whole life.
class SingleWorkerDirectory : public WorkerDirectory {
 public:
  // `stub` must outlive the directory.
  explicit SingleWorkerDirectory(WorkerStub& stub)
      : stub_(std::shared_ptr<WorkerStub>(), &stub) {}
  std::shared_ptr<WorkerStub> Find(const std::string& worker) override {
    return worker.empty() || worker == stub_->id() ? stub_ : nullptr;
  }
  std::vector<std::string> Ids() override { return {stub_->id()}; }

 private:
  const std::shared_ptr<WorkerStub> stub_;  // non-owning (aliasing constructor)
};

}  // namespace somm
