// The JSON form of a worker's report and a router's demand: what workers and
// routers put into a shared cluster-state store (redis/) and what the cluster
// view reads back.
//
// Time points are process-local (steady_clock), so they travel as ages
// relative to the moment of encoding ("last_used_age_ms", "busy_for_ms") and
// are turned back into time points at decoding, against the reader's clock.
// A report that sat in the store for a while so reads a little younger than
// it is: by at most the store's staleness, which the lease bounds.
//
// Pure functions; decoding errors name the field.
#pragma once

#include <string>
#include <vector>

#include "cluster/cluster_state_store.h"
#include "common/status.h"

namespace somm::cluster {

std::string WorkerReportToJson(const WorkerReport& report, TimePoint now);
StatusOr<WorkerReport> WorkerReportFromJson(const std::string& json, TimePoint now);

std::string DemandToJson(const std::vector<ModelDemand>& demand);
StatusOr<std::vector<ModelDemand>> DemandFromJson(const std::string& json);

}  // namespace somm::cluster
