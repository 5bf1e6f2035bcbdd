// ClusterStateStore: where the cluster's live state is kept, between the
// workers that report it and the routers and controllers that read it.
//
// Each worker reports its share (WorkerReport: its devices and its instance
// groups, with their instances' queues) after every change and every control
// tick; each router publishes the demand it saw as monotonic counters. A
// reader gets one immutable ClusterState (cluster_state.h) holding every
// worker's groups and devices and the demand summed over routers; the model
// options (profiles) come from the model registry, not from here.
//
// The embedded server keeps it in memory (InMemoryClusterStateStore); a
// cluster keeps it in Redis behind this same interface.
//
// Thread-safety: every method may be called from any thread. Read() is cheap
// (a shared snapshot) and never blocks on a writer for long.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cluster/cluster_state.h"

namespace somm::cluster {

// A worker's share of the cluster state.
struct WorkerReport {
  std::string worker;       // stable name, e.g. "local" or a pod name
  std::string incarnation;  // new for every process start of that worker
  std::string zone;
  std::string address;      // where its worker service listens ("host:port"; "" = in process)
  int64_t sequence = 0;     // increases with every report of one incarnation
  std::vector<DeviceState> devices;
  std::vector<GroupState> groups;  // worker and device fields filled in
};

class ClusterStateStore {
 public:
  virtual ~ClusterStateStore() = default;

  // Replaces the worker's share. A report older (by sequence) than the one
  // held for the same incarnation is ignored, so reports may race.
  virtual void PutWorker(WorkerReport report) = 0;
  virtual void RemoveWorker(const std::string& worker) = 0;
  // Replaces one router's demand counters (ModelDemand::arrivals_total etc.).
  virtual void PutDemand(const std::string& router, std::vector<ModelDemand> demand) = 0;

  // Everything held now, in one snapshot: devices and groups of every worker
  // (ordered by worker), and per model version the demand summed over routers.
  virtual std::shared_ptr<const ClusterState> Read() const = 0;
  // Increases with every change; readers use it to notice one.
  virtual uint64_t generation() const = 0;
};

// The snapshot a store hands out: devices and groups of every worker (in the
// map's order; each group carries its worker's zone), and per model version the demand summed over routers
// (counters and rates add up; the tightest SLO and the strictest accuracy
// floor win). Shared by every store, so that they all merge alike.
ClusterState MergeClusterState(const std::map<std::string, WorkerReport>& workers,
                               const std::map<std::string, std::vector<ModelDemand>>& demand);

}  // namespace somm::cluster
