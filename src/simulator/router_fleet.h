// RouterFleet: the routers of one simulation, as a cluster's routers stand
// behind a load balancer. Each is a real Router with its own id (its demand
// is its own row in the store, merged for the controllers as
// MergeClusterState merges live routers' rows) and, when there are several,
// its own lagged view of the store (RouterView), as each live router reads
// Redis on its own: a worker's report reaches one router's view before
// another's. Queries are spread round-robin by arrival (query i of the trace
// to router i mod N), the plain rule of an L4 load balancer's round-robin
// pool; with one router it reads the store's shared snapshot as before.
//
// Thread-safety: none, like the event loop everything here runs on.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "router/router.h"
#include "simulator/event_loop.h"
#include "simulator/simulated_store.h"

namespace somm::sim {

// A router's own view of the store: writes go to the store; Read() hands out
// the snapshot this view last took, and takes a fresh one (ReadFresh) on the
// first read at least `lag` after the last take, when the store changed
// since: each view is less than `lag` old, and the views of several routers
// age apart.
class RouterView : public cluster::ClusterStateStore {
 public:
  RouterView(const EventLoop& loop, SimulatedStore& store, EventLoop::Duration lag)
      : loop_(loop), store_(store), lag_(lag) {}

  void PutWorker(cluster::WorkerReport report) override { store_.PutWorker(std::move(report)); }
  void RemoveWorker(const std::string& worker) override { store_.RemoveWorker(worker); }
  void PutDemand(const std::string& router, std::vector<cluster::ModelDemand> demand) override {
    store_.PutDemand(router, std::move(demand));
  }
  std::shared_ptr<const cluster::ClusterState> Read() const override;
  uint64_t generation() const override { return taken_generation_; }

 private:
  const EventLoop& loop_;
  SimulatedStore& store_;
  const EventLoop::Duration lag_;
  // Single-threaded (the event loop's): no lock.
  mutable std::shared_ptr<const cluster::ClusterState> snapshot_;
  mutable EventLoop::TimePoint taken_at_{};
  mutable uint64_t taken_generation_ = 0;
};

class RouterFleet {
 public:
  // `count` routers (at least 1) built from `options`: the first keeps its
  // id and seed, router k > 0 is "<id>-<k>" with its own seed. Everything
  // passed by reference must outlive the fleet.
  RouterFleet(int count, const RouterOptions& options, const EventLoop& loop,
              EventLoop::Duration view_lag, ModelCatalog& registry, SimulatedStore& store,
              WorkerDirectory& workers, ControlClient& controller, ServingMetrics& metrics,
              DecisionLog& log);

  int size() const { return static_cast<int>(routers_.size()); }
  Router& front() { return *routers_.front(); }
  // Trace query `i` goes to router i mod size().
  void Infer(size_t i, InferenceRequest request, InferCallback done);
  // Every router publishes its own demand, as each live router does.
  void PublishDemand();
  void Shutdown();

 private:
  std::vector<std::unique_ptr<RouterView>> views_;
  std::vector<std::unique_ptr<Router>> routers_;
};

}  // namespace somm::sim
