// Placement and eviction: which device a new instance's memory goes to, and,
// when nothing has room, which loaded groups to evict for it. Pure functions
// of a ClusterState snapshot and the time (see cluster_state.h).
//
// Placement is best fit: among the devices that match and have room, the one
// left with the least budget after placing, which keeps large holes free for
// large variants. When none has room, victims are chosen per device by a
// GreedyDual-Size-Frequency-like value, lowest first:
//
//   value = (rate_qps * H + H / (H + idle_s)) * reload_ms / MiB freed
//
// i.e. the expected reuses within the horizon H (frequency, plus a recency
// term that is 1 when just used and 1/2 after H idle seconds) times what each
// reuse would cost to reload, per MiB the eviction gives back. Cheap-to-reload,
// large, cold groups go first. Groups that are pinned, loading, or have queued
// or executing queries are never victims. Of the devices that could be freed,
// the one whose victims lose the least expected reload time wins.
//
// Thread-safety: stateless.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "cluster/cluster_state.h"

namespace somm::control {

// The policies speak the cluster model's vocabulary (cluster/cluster_state.h).
using cluster::Action;
using cluster::ActionKindName;
using cluster::CauseName;
using cluster::ClusterState;
using cluster::DeviceState;
using cluster::FormatBytes;
using cluster::GroupFor;
using cluster::GroupLabel;
using cluster::GroupState;
using cluster::ModelDemand;
using cluster::TimePoint;
using cluster::ToString;
using cluster::VariantOption;


struct PlacementOptions {
  // H in the eviction value: how far ahead reuse is counted. A minute is a
  // few idle_unload_s windows and far longer than any reload.
  double reuse_horizon_s = 60;
};

// "cpu" matches "cpu"; "cuda" matches every "cuda:N"; "cuda:1" only itself;
// "" matches any device.
bool DeviceMatches(const std::string& device, const std::string& wanted);

// May this group be evicted at all? Not when pinned, loading, or busy.
bool Evictable(const GroupState& group);

// The value above; lower is evicted first.
double EvictionValue(const GroupState& group, TimePoint now, const PlacementOptions& options = {});

struct EvictionVictim {
  size_t group = 0;   // index into ClusterState::groups
  int64_t bytes = 0;  // replicas * memory_bytes
  double value = 0;
  std::string reason;  // "evict: <group>: value 0.42 = (...)"
};

struct PlacementDecision {
  std::string worker;  // the chosen device's worker
  std::string device;
  int64_t free_after = 0;  // budget left on `device` after the evictions and the placement
  std::vector<EvictionVictim> victims;  // evict in this order, before loading
  std::string reason;
};

// Errors: NotFound when no device matches `wanted`; ResourceExhausted when no
// matching device can make room even after evicting every evictable group,
// with each device's budget, use and evictable bytes in the message.
StatusOr<PlacementDecision> Place(const ClusterState& state, int64_t bytes_needed,
                                  const std::string& wanted, TimePoint now,
                                  const PlacementOptions& options = {});

// Place() over a cluster of workers: each worker's devices are planned alone
// (its own groups are its only victims). A worker that needs no eviction
// beats one that does (prefer a worker that is not full); then the one whose
// victims lose the least expected reload time; then the one left with the
// most free memory (spreading load across workers, while placement inside a
// worker stays best fit); then rendezvous hashing of (`key`, worker), so that
// where a key goes stays stable as workers come and go. With one worker it
// decides as Place() does. Victims index `state.groups`.
StatusOr<PlacementDecision> PlaceAcrossWorkers(const ClusterState& state, int64_t bytes_needed,
                                               const std::string& wanted, const std::string& key,
                                               TimePoint now, const PlacementOptions& options = {});
// The part of `state` on `worker`: its devices and groups (options and
// demand kept whole).
ClusterState WorkerShare(const ClusterState& state, const std::string& worker);

// The kUnload actions for a decision's victims, in order.
std::vector<Action> EvictionActions(const ClusterState& state, const PlacementDecision& decision);

// ---- One group's replicas across workers ----------------------------------
//
// A group (one label) may hold replicas on several workers: the router's
// power of two choices then has a choice, and a dead worker takes only its
// share. The autoscaler sizes a group as a whole (a replica count); these
// two functions are the bridge.

// GroupLabel(g) == label, without building g's label for the groups of
// other models (the common case): the controller matches one label against
// every group of the cluster several times per load, and building thousands
// of labels per match was most of a load's cost at 1,000 workers.
bool HasLabel(const GroupState& g, const std::string& label);

// The cluster as the autoscaler sees it: the groups of one label on several
// workers folded into one (replicas, queues, uses and rates summed, the
// latest use, loading or pinned if any share is, instances of all; worker =
// the first holder's), and the devices of one name pooled (budgets, use and
// cores summed; worker "" when several workers have one). With one worker it
// returns `state` unchanged.
ClusterState PoolWorkers(const ClusterState& state);

// One worker's share of a group, before and after a spread.
struct ReplicaShare {
  std::string worker;
  int have = 0;  // replicas there now (a loading share counts)
  int want = 0;  // replicas there afterwards; 0 = the group leaves it
};

struct SpreadDecision {
  // Every worker that holds the group or gets some of it, holders first in
  // the order of `state.groups`.
  std::vector<ReplicaShare> shares;
  // Replicas no worker had free memory for: the caller places them where
  // evictions can make room (the largest holder's worker, or anywhere).
  int unplaced = 0;
  std::string reason;  // "x2 -> x3: +1 on w2 (fewest of it, 1.2 GiB free)"
};

// Spreads `target` replicas of the group `label` (`bytes_per_replica` each,
// on a device matching `wanted`) over the workers of `state`, changing as
// few replicas as it can. Growing adds one replica at a time to the worker
// with the fewest of the group whose free memory holds it, so replicas
// spread before they stack (a new worker's share is a new load, which the
// router cannot use until it is up, but a dead worker then takes only its
// share); ties go to a worker that already holds the group, then to the
// most free memory, then to rendezvous hashing of (label, worker). Shrinking
// takes one replica at a time from the worker with the most, ties to the one
// with the least free memory. Evicts nothing: placement with evictions is
// Place()'s.
SpreadDecision SpreadReplicas(const ClusterState& state, const std::string& label, int target,
                              int64_t bytes_per_replica, const std::string& wanted);

}  // namespace somm::control
