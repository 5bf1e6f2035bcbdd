// SimulatedStore: the cluster-state store of a simulation, with the view
// staleness of the live cluster.
//
// It keeps what InMemoryClusterStateStore keeps (the latest report of each
// worker, the demand of each router; the same sequence rule, the same merge
// as MergeClusterState, done incrementally) and differs in when the snapshot that Read() hands out
// is rebuilt: not on every change, but on the first Read() at least
// `view_lag` of virtual time after the last rebuild, when something changed
// since. With a lag of 0 every Read() sees every change, as the in-memory
// store's readers do.
//
// Why: in a live cluster a router's view is a copy that it re-reads after a
// change notice (docs/cluster-state.md, "Steady-state cost of the cluster
// state"): a report reaches it about a millisecond after the worker wrote
// it, and what it knows of queues is as old as the worker's last heartbeat
// (the controller's fresh reports each tick play the heartbeat here). The
// lazy rebuild is also what keeps a 1,000-worker simulation linear: the
// controller's fresh reports put 1,000 reports per tick, and rebuilding
// the merged snapshot after each was quadratic in the workers.
//
// Thread-safety: none needed, everything runs on the EventLoop's thread;
// the lock is there because the interface promises it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "cluster/cluster_state_store.h"
#include "common/mutex.h"
#include "simulator/event_loop.h"

namespace somm::sim {

struct SimulatedStoreOptions {
  // How long a change takes to reach readers' views (0 = at once). The
  // simulation's default is the live median (simulation.h).
  EventLoop::Duration view_lag{0};
};

class SimulatedStore : public cluster::ClusterStateStore {
 public:
  SimulatedStore(const EventLoop& loop, SimulatedStoreOptions options);

  void PutWorker(cluster::WorkerReport report) override;
  void RemoveWorker(const std::string& worker) override;
  void PutDemand(const std::string& router, std::vector<cluster::ModelDemand> demand) override;
  std::shared_ptr<const cluster::ClusterState> Read() const override;
  uint64_t generation() const override;

  // The snapshot of everything put so far, rebuilt now if anything changed
  // since the last one, whatever the lag: what a router's own view
  // (RouterView, router_fleet.h) takes when its own lag has passed.
  std::shared_ptr<const cluster::ClusterState> ReadFresh() const;

  // Snapshots built so far (for the report).
  int64_t rebuilds() const;

 private:
  const EventLoop& loop_;
  const SimulatedStoreOptions options_;
  mutable Mutex mu_;
  struct Held {
    cluster::WorkerReport report;
    uint64_t put_at = 0;  // generation_ just after it was put
  };
  std::map<std::string, Held> workers_ SOMM_GUARDED_BY(mu_);
  // Changes whenever a worker joins or leaves workers_.
  uint64_t membership_ SOMM_GUARDED_BY(mu_) = 0;
  std::map<std::string, std::vector<cluster::ModelDemand>> demand_ SOMM_GUARDED_BY(mu_);
  mutable std::shared_ptr<const cluster::ClusterState> snapshot_ SOMM_GUARDED_BY(mu_);
  mutable bool dirty_ SOMM_GUARDED_BY(mu_) = false;
  // The routers' demand merged, as MergeClusterState merges it: redone only
  // after a PutDemand (once per control tick), not on every rebuild after a
  // worker's report (thousands of models' rows each time).
  mutable std::vector<cluster::ModelDemand> merged_demand_ SOMM_GUARDED_BY(mu_);
  mutable bool demand_dirty_ SOMM_GUARDED_BY(mu_) = false;
  // A snapshot, and what a later rebuild over it needs to copy only the
  // workers whose reports changed since.
  struct Built {
    cluster::ClusterState state;
    uint64_t generation = 0;           // generation_ when built
    uint64_t membership = UINT64_MAX;  // membership_ then (none yet: never equal)
    // Devices and groups of each worker, in workers_'s order.
    std::vector<std::pair<size_t, size_t>> counts;
  };
  // Snapshots that no reader holds any more, kept for the next rebuild to
  // assign over. Why: each rebuild copied every group of the cluster into
  // fresh memory, and freeing the snapshot it replaced (in whichever reader
  // let go last) cost about as much; both were a fifth of a 1,000-worker
  // simulation. Over a spare, a rebuild skips each worker whose report is
  // the one the spare was built from (most of them: a change is a few
  // workers' reports) as long as the workers before it kept their sizes.
  // The snapshots' deleter hands them back here, so it holds the pool,
  // which may outlive the store.
  struct Spares {
    Mutex mu;
    std::vector<std::unique_ptr<Built>> built SOMM_GUARDED_BY(mu);
  };
  struct Recycle {
    std::shared_ptr<Spares> spares;
    void operator()(Built* built) const;
  };
  const std::shared_ptr<Spares> spares_ = std::make_shared<Spares>();
  // Replaces snapshot_ by the merge of what is held now.
  void Rebuild() const SOMM_REQUIRES(mu_);
  // Makes built->state the merge of workers_ and merged_demand_.
  void Merge(Built* built) const SOMM_REQUIRES(mu_);
  mutable EventLoop::TimePoint built_at_ SOMM_GUARDED_BY(mu_){};
  mutable int64_t rebuilds_ SOMM_GUARDED_BY(mu_) = 0;
  uint64_t generation_ SOMM_GUARDED_BY(mu_) = 0;
};

}  // namespace somm::sim
