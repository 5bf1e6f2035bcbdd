// The selector: which variant, on which hardware, on which instance serves a
// query. A pure function of the query's requirements, a snapshot of the
// cluster state and the time, so live serving and the simulator run the same
// code (docs/architecture.md, "The flow of one query").
//
// Rules, in order:
//   1. A candidate below `min_accuracy` is never chosen (unknown accuracy
//      counts as below any floor). Unusable variants are never chosen.
//   2. Predicted latency = time until the instance is free + the profiled
//      latency of the next batch, which carries the instance's queued samples
//      plus this query's (more batches if they exceed max batch). A candidate
//      with no loaded instance adds its profiled load time. A loaded
//      candidate none of whose groups is in the router's zone adds the
//      cross-zone round trip (Candidate::network_ms).
//   3. Cost = QueryChargeUsd() of the profiled compute time of a batch of
//      this query's samples alone (+ Candidate::batch_overhead_ms): the charge
//      the response will report, predicted at the largest share the query
//      can have of a batch. A candidate that needs loading also pays, for
//      ranking and for the cost ceiling, the hardware-seconds the load
//      takes, so loaded instances win ties; the query is not charged for it.
//   4. Among candidates that meet the latency SLO and the cost ceiling, the
//      cheapest wins; ties go to the lower predicted latency.
//   5. If none is feasible: best_effort picks the lowest predicted latency
//      among those meeting the accuracy floor; otherwise the answer is an
//      error naming the requirement that failed and the best value achievable.
//
// Thread-safety: stateless; SelectorState is read only.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "cluster/cluster_state.h"
#include "profiles/price_list.h"
#include "profiles/variant_profile.h"

namespace somm {

struct Requirements {
  std::string model;  // "" = any model registered for `task`
  std::string task;   // used when model is ""
  std::optional<double> latency_slo_ms;
  std::optional<double> min_accuracy;
  std::optional<double> max_cost_usd;  // per query
  bool best_effort = false;
  int64_t batch = 1;  // samples this query carries
};

// One loaded instance of a candidate: the cluster model's (stable ids).
using InstanceState = cluster::InstanceState;

// One (variant, hardware) pair that could serve a query.
struct Candidate {
  std::string variant_id;  // VariantProfile::Id()
  std::string model;
  std::string task;  // matched by a task query (CandidatesFrom fills it for those only)
  HardwareConfig hardware;
  std::optional<double> accuracy;
  bool usable = true;
  LatencyCurve latency;
  // When set, the curve to use instead of `latency`: CandidatesFrom points
  // at the option's own row rather than copying it per query (a heap copy
  // per candidate; the options must outlive the candidates).
  const LatencyCurve* latency_of_option = nullptr;
  const LatencyCurve& Latency() const { return latency_of_option ? *latency_of_option : latency; }
  double load_time_ms = 0;
  int64_t max_batch_size = 1;
  std::vector<InstanceState> instances;  // empty = not loaded
  // What reaching its instances adds to a query's latency: the cross-zone
  // round trip when none of them is in the router's zone, else 0.
  double network_ms = 0;
  // What a served batch on this hardware takes beyond its profile (the
  // router's CostCalibration); added to the cost prediction only, not to the
  // latency, once per batch.
  double batch_overhead_ms = 0;
};

struct SelectorState {
  std::vector<Candidate> candidates;
};

// Where the router that asks stands: its zone and what a query pays to
// reach a worker of another zone.
struct RouterZone {
  std::string zone;               // "" = zones not used: every group is near
  double cross_zone_rtt_ms = 0;
};

// The selector's view of the one cluster model: every option of `state` that
// serves `req.model` (or, when that is "", `req.task`) becomes a candidate,
// with the instances of its loaded groups (one per worker that holds it).
// Options without a loaded group are left out when `loaded_only` (static
// provisioning). origins[i] is the index in state.options of candidates[i].
// A loaded candidate with no group in `where.zone` gets network_ms =
// where.cross_zone_rtt_ms. The candidates' latency curves are the options'
// own (Candidate::latency_of_option): the options must outlive them.
SelectorState CandidatesFrom(const cluster::ClusterState& state, const Requirements& req,
                             bool loaded_only, std::vector<size_t>* origins = nullptr,
                             const RouterZone& where = {});
// The same over groups and options held apart (the router's options are
// shared rows it does not copy per query).
SelectorState CandidatesFrom(const std::vector<cluster::GroupState>& groups,
                             const std::vector<cluster::VariantOption>& options,
                             const Requirements& req, bool loaded_only,
                             std::vector<size_t>* origins = nullptr, const RouterZone& where = {});

enum class DecisionOutcome { kLoadedInstance, kNeedsLoad, kBestEffort };
const char* DecisionOutcomeName(DecisionOutcome outcome);

struct Decision {
  size_t candidate = 0;          // index into SelectorState::candidates
  int64_t instance_id = -1;      // -1: load the candidate first
  double predicted_latency_ms = 0;
  double cost_usd = 0;           // rule 3's cost: the charge, plus the load's if it needs one
  double charge_usd = 0;         // what the query is predicted to be charged (QueryChargeUsd)
  DecisionOutcome outcome = DecisionOutcome::kLoadedInstance;
  std::string reason;            // one line for the response and the decision log
};

// The charge rule (docs/selection.md, "What a query pays"): a query of
// `samples` samples that ran in a batch of `batch_samples` samples taking
// `batch_ms` on hardware priced `usd_per_s` pays its share of that time,
// usd_per_s x batch_ms x samples / batch_samples. The selector predicts with
// it (profiled batch time, the query alone in its batch) and the router
// reports with it (measured batch time, the real batch), so prediction and
// report differ only in the batch time they put in.
inline double QueryChargeUsd(double usd_per_s, double batch_ms, int64_t samples,
                             int64_t batch_samples) {
  if (batch_samples < 1) batch_samples = 1;
  return usd_per_s * (batch_ms / 1000.0) * static_cast<double>(samples) /
         static_cast<double>(batch_samples);
}

// Errors (best_effort off): NotFound when no candidate serves the model or
// task; FailedPrecondition when no usable variant reaches min_accuracy (a
// permanent answer); ResourceExhausted when the latency SLO or the cost
// ceiling cannot be met now (it may be met later, under less load). Each
// message names the requirement and the best value achievable, e.g.
// "cannot meet latency_slo_ms=0.05: best predicted 0.21 ms (digits-mlp:1:ts-opt on cpu1)".
StatusOr<Decision> SelectVariant(const Requirements& req, const SelectorState& state,
                                 const PriceList& prices, cluster::TimePoint now);

}  // namespace somm
