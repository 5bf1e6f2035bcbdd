// InMemoryClusterStateStore: the cluster-state store of the embedded server:
// the latest report of each worker and the demand of each router, in memory.
// Each change rebuilds the snapshot that Read() hands out, so reads are one
// shared_ptr copy under a short lock.
#pragma once

#include <map>

#include "cluster/cluster_state_store.h"
#include "common/mutex.h"

namespace somm::cluster {

class InMemoryClusterStateStore : public ClusterStateStore {
 public:
  InMemoryClusterStateStore();
  void PutWorker(WorkerReport report) override;
  void RemoveWorker(const std::string& worker) override;
  void PutDemand(const std::string& router, std::vector<ModelDemand> demand) override;
  std::shared_ptr<const ClusterState> Read() const override;
  uint64_t generation() const override;

 private:
  void RebuildLocked() SOMM_REQUIRES(mu_);

  mutable Mutex mu_;
  std::map<std::string, WorkerReport> workers_ SOMM_GUARDED_BY(mu_);
  std::map<std::string, std::vector<ModelDemand>> demand_ SOMM_GUARDED_BY(mu_);
  std::shared_ptr<const ClusterState> snapshot_ SOMM_GUARDED_BY(mu_);
  uint64_t generation_ SOMM_GUARDED_BY(mu_) = 0;
};

}  // namespace somm::cluster
