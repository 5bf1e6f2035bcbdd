// GroupsByModel: the groups of one cluster-state snapshot, looked up by
// model. The router's selector needs only the groups of the model (or the
// task's models) a query names; copying every group of the cluster per query
// made routing linear in the cluster's size (thousands of groups at 1,000
// workers). The index is built once per snapshot, on the first lookup after
// the store hands out a new one, and shared by the lookups that follow.
//
// Thread-safety: thread-safe; lookups copy the groups out under no lock
// beyond the moment of taking the index.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cluster/cluster_state.h"
#include "common/mutex.h"

namespace somm {

class GroupsByModel {
 public:
  // The groups of `snapshot` whose model is one of `models`, in the
  // snapshot's order (the order the whole list had).
  std::vector<cluster::GroupState> Of(const std::shared_ptr<const cluster::ClusterState>& snapshot,
                                      const std::vector<std::string>& models);

 private:
  // Every group's position chained into buckets by the hash of its model:
  // a few flat arrays per snapshot, built in one pass (a hash map of vectors
  // cost thousands of allocations at a new snapshot every few milliseconds
  // of a busy cluster; sorting (hash, position) pairs, a fifth of a lookup's
  // cost at 1,000 workers). A lookup walks its bucket and checks each
  // group's model.
  struct Index {
    std::vector<size_t> hashes;   // per group
    std::vector<uint32_t> next;   // per group: the next in its bucket, or kEnd
    std::vector<uint32_t> heads;  // per bucket: its first group, or kEnd
    size_t mask = 0;              // buckets - 1 (a power of two)
  };
  static constexpr uint32_t kEnd = UINT32_MAX;
  Mutex mu_;
  std::shared_ptr<const cluster::ClusterState> indexed_ SOMM_GUARDED_BY(mu_);
  std::shared_ptr<const Index> index_ SOMM_GUARDED_BY(mu_);
};

}  // namespace somm
