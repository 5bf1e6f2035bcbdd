// VersionOptions: AppendOptions() (model_catalog.h) for a version record,
// built once per record and copied out afterwards. The router asks for the
// options of a query's model on every query with SLOs, and the controller
// for every model's on every tick (20,000 options for a zoo of 10,000
// variants on two thread counts): building them anew each time, strings,
// devices and latency curves included, was a large part of both at scale.
//
// A VersionRecord never changes once published (VersionPtr points to const;
// new profiles or a reload publish a new record), so the rows of one record
// stay right for its life. A record is known by its address and checked
// through a weak pointer, so a new record at a freed one's address is built
// afresh; entries of records gone are dropped as the table grows.
//
// Thread-safety: thread-safe; Append copies outside the lock.
#pragma once

#include <memory>
#include <unordered_map>
#include <vector>

#include "cluster/cluster_state.h"
#include "common/mutex.h"
#include "registry/model_catalog.h"

namespace somm {

class VersionOptions {
 public:
  // What AppendOptions(*version, out) appends.
  void Append(const VersionPtr& version, std::vector<cluster::VariantOption>* out);
  // The same rows, shared (not copied).
  std::shared_ptr<const std::vector<cluster::VariantOption>> Of(const VersionPtr& version);

 private:
  struct Entry {
    std::weak_ptr<const VersionRecord> version;
    std::shared_ptr<const std::vector<cluster::VariantOption>> options;
  };
  Mutex mu_;
  std::unordered_map<const VersionRecord*, Entry> entries_ SOMM_GUARDED_BY(mu_);
  size_t prune_above_ SOMM_GUARDED_BY(mu_) = 64;
};

}  // namespace somm
