// GrpcWorkerPool: one GrpcWorkerStub per worker of the cluster, for a router
// or a controller. Where each worker listens comes from `provider` (worker
// id -> "host:port"; the cluster-state store supplies it from the workers'
// reports).
//
// Contract:
//   * Find() returns the same stub for a worker as long as its address stays
//     the same, so its channel (and connection) is reused by every call. A
//     new address (the worker restarted elsewhere) gets a new stub; calls in
//     flight on the old one finish there.
//   * The provider is read outside the lock, when Find() meets an id it
//     does not hold and otherwise at most once per `refresh` (so that a
//     query's Find() rarely reads it); a worker the provider no longer knows
//     is dropped at that read, and Find() gives nullptr for it.
//   * Thread-safe. mu_ guards the table and is never held across the
//     provider or a call.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cluster_rpc/grpc_worker_stub.h"
#include "common/mutex.h"
#include "worker/worker_directory.h"

namespace somm {

struct GrpcWorkerPoolOptions {
  // How long the provider's answer is trusted for workers already held.
  std::chrono::milliseconds refresh{1000};
  GrpcWorkerStubOptions stub;
};

class GrpcWorkerPool : public WorkerDirectory {
 public:
  using Provider = std::function<std::map<std::string, std::string>()>;

  explicit GrpcWorkerPool(Provider provider, GrpcWorkerPoolOptions options = {});

  // The stub for `worker`, or nullptr when the provider does not know it.
  std::shared_ptr<WorkerStub> Find(const std::string& worker) override;
  // The workers the provider knows now (with an address), sorted.
  std::vector<std::string> Ids() override;

  // Stubs made from now on start their calls on `queue`
  // (GrpcWorkerStubOptions::queue); those held are dropped, to be made again
  // (their calls in flight finish as they would). A router calls it once its
  // gRPC frontend has started, before queries come.
  void UseQueue(std::shared_ptr<grpc_async::CallQueue> queue);

 private:
  // Reads the provider and brings the table in line with it.
  void Refresh();

  const Provider provider_;
  Mutex mu_;
  GrpcWorkerPoolOptions options_ SOMM_GUARDED_BY(mu_);
  std::map<std::string, std::shared_ptr<GrpcWorkerStub>> stubs_ SOMM_GUARDED_BY(mu_);
  std::chrono::steady_clock::time_point read_at_ SOMM_GUARDED_BY(mu_){};
};

}  // namespace somm
