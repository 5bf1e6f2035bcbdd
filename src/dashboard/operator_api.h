// The operator's view: three read-only JSON documents that the dashboard
// (web/) and `somm status` read from the REST port, beside the existing
// repository, metadata, variants and decisions endpoints.
//
//   GET /v2/somm/overview  somm's own counters, summed per model version:
//       queries answered and failed (by status code), queries with a latency
//       SLO and those that met it, the request-duration histogram, decisions
//       by outcome, control actions by kind, cold starts, queries in flight.
//       Read from the Prometheus text the process serves on /metrics (the
//       same registry), so that the two cannot disagree; control actions
//       alone come from the controller (InferenceServer::
//       ControlActionTotals: a cluster router's are the leader's, which its
//       own registry lacks). Also the cluster's
//       replicas, memory and cost per hour at the price list, from the
//       cluster view. Counters are monotonic: a reader differences two
//       overviews for rates (queries/s, attainment and p50/p99 over a window).
//   GET /v2/somm/workers   per worker: zone, devices (memory used against
//       budget), instance groups (variant, hardware, replicas, queued and
//       executing queries, instances); and the demand per model version.
//       A worker is listed while its reports are live (cluster: its Redis
//       lease; embedded: the one local worker).
//   GET /v2/somm/actions?limit=N  control actions, newest first: loads,
//       unloads, evictions, replica changes, worker scaling, each with its
//       reason (the decision log's "control:" rows).
//
// Tenants: `visible` (null = everything, for an admin or without keys) says
// which models the caller may see. A user's views hold only those: their
// per-model counters, instance groups, demand, control actions and the
// replicas and cost they make up; counters that cannot be told apart by
// model (decisions by outcome, actions by kind, queries in flight) are left
// out. Devices and their memory are shown to all: they name no model.
//
// Thread-safety: pure functions of their arguments (the server's calls are
// thread-safe).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "api/operator_api.h"

namespace somm::dashboard {

// The histogram the overview's latency comes from, and the counters it sums
// (metric names in one place: docs/metrics.md lists them all).
inline constexpr char kRequestDurationFamily[] = "somm_inference_request_duration_seconds";

// `metrics_text`: the process's /metrics exposition ("" when it has none:
// then the counters are absent, not zero).
using ModelFilter = std::function<bool(const std::string& model)>;

StatusOr<std::string> EncodeOverview(const OperatorApi& server, std::string_view metrics_text,
                                     int64_t unix_ms, const ModelFilter& visible = nullptr);
std::string EncodeWorkers(const OperatorApi& server, const ModelFilter& visible = nullptr);
std::string EncodeActions(const std::vector<DecisionRecord>& actions,
                          const ModelFilter& visible = nullptr);

}  // namespace somm::dashboard
