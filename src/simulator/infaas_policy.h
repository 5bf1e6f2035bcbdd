// INFaaS's policy (Romero et al., "INFaaS: Automated Model-less Inference
// Serving", USENIX ATC'21), re-implemented from the paper for the
// simulator, as pure functions of the state below and a clock: variant
// selection with a fast path over the top few candidates and a penalty for
// variants that are not loaded, blacklisting of overloaded workers, and the
// per-worker scaling rules (replicate, upgrade, scale down, downgrade,
// unload). policy_replay.cc carries the decisions out on simulated workers.
//
// Where the paper had to be interpreted (also in docs/simulation.md,
// "INFaaS as we read it"):
//  1. Candidates. The paper selects among variants meeting the query's
//     accuracy and latency; here a candidate is a usable, profiled
//     (variant, CPU threads) option of the query's model (zoo.h), and
//     "meets the latency" means its profiled batch-1 latency is within the
//     SLO. min_accuracy is not applied (the simulator's traces carry none).
//  2. Cost order. INFaaS minimises cost among the feasible variants; the
//     cost of a candidate here is its price per query at full capacity
//     (Candidate::UsdPerQuery: $/s of its hardware over its best
//     throughput), the same figure for every query.
//  3. Fast path. "The top few candidates" are the fast_path_candidates
//     cheapest feasible candidates; the fast path takes the first of them
//     (in cost order) with a ready instance on a worker that is not
//     blacklisted and not saturated (load below its capacity), and sends
//     the query to the least utilised such instance. No load is started.
//  4. Slow path and penalty. Otherwise every candidate is scored by an
//     effective latency: batch-1 latency, plus, for an instance still
//     loading, the rest of its load; for a saturated instance, its batch-1
//     latency once more per unit of overload (a queueing guess the paper
//     does not give); and for a candidate with no instance, its profiled
//     load time (the penalty for a variant that is not loaded). The cheapest
//     candidate whose effective latency meets the SLO wins; if none does,
//     the one with the lowest effective latency (best effort).
//  5. Blacklisting. A worker whose utilisation (the share of its cores its
//     instances' load keeps busy, from their rate and profiled capacity)
//     reaches overload_utilization is blacklisted for blacklist_s: no query
//     and no new instance goes there, unless nothing else can take it.
//  6. Per-worker scaling. Each monitoring period (monitor_interval_s), every
//     instance's load (queries sent to it over the period) is compared with
//     its capacity: above scale_up_utilization of it, the worker either adds
//     replicas (as many as the load needs at that utilisation) or upgrades
//     to a faster candidate that needs fewer dollars for the same load,
//     whichever is cheaper, within its free cores. Below
//     scale_down_utilization of one replica fewer (or, with one replica,
//     when a cheaper candidate meeting the tightest recent SLO could carry
//     the load) for scale_down_delay_s, it removes one replica, or
//     downgrades. An instance without queries for idle_unload_s is
//     unloaded. The paper's numbers for these thresholds are not all given;
//     the defaults below are ours.
//  7. No VM-level autoscaling: the simulator's worker count is fixed, so the
//     master's add/remove-worker rule is not modelled.
//  8. Dispatch. The query goes to the chosen instance's worker, whose queue
//     and batching are the simulated worker's (the live batcher's policy
//     code), not INFaaS's own.
//
// Thread-safety: pure functions and values.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "simulator/zoo.h"

namespace somm::sim::infaas {

struct InfaasOptions {
  // Cheapest feasible candidates the fast path looks at.
  int fast_path_candidates = 3;
  // Worker utilisation at which it is blacklisted, and for how long.
  double overload_utilization = 0.9;
  double blacklist_s = 5;
  // An instance scales up when its load passes this share of its capacity;
  // and is sized to it.
  double scale_up_utilization = 0.8;
  // ...and scales down when its load would stay below this share of one
  // replica fewer, for scale_down_delay_s.
  double scale_down_utilization = 0.5;
  double scale_down_delay_s = 10;
  double idle_unload_s = 60;
  double monitor_interval_s = 1;
};

// One candidate loaded on one worker.
struct InstanceView {
  size_t candidate = 0;  // index into the model's candidates
  int worker = 0;
  int replicas = 1;
  double ready_in_ms = 0;  // 0 = serving
  double rate_qps = 0;     // load over the last monitoring period
};

struct WorkerView {
  int cores = 1;
  int free_cores = 0;
  int64_t free_bytes = 0;
  double utilization = 0;  // share of the cores kept busy
  bool blacklisted = false;
};

// An instance's load over its capacity (replicas x capacity).
double InstanceUtilization(const std::vector<Candidate>& cands, const InstanceView& inst);

// Share of a worker's cores its instances keep busy.
double WorkerUtilization(const std::vector<Candidate>& cands,
                         const std::vector<InstanceView>& on_worker, int cores);

// When a worker stops being blacklisted: now + blacklist_s if its
// utilisation reached the threshold, else the old time.
double BlacklistedUntil(double utilization, double now_s, double until_s, const InfaasOptions& o);

struct Selection {
  size_t candidate = 0;
  int instance = -1;  // index into the instances passed in; -1 = load one
  int worker = -1;    // where to load it when instance == -1
  bool fast_path = false;
  bool meets_slo = true;  // false: best effort
  bool ok = false;        // false: no candidate, or no worker can hold one
};

// Chooses for one query of a model with `slo_ms` (none: any candidate).
// `instances` are the model's instances, `workers` every worker.
Selection SelectVariant(const std::vector<Candidate>& cands,
                        const std::vector<InstanceView>& instances,
                        const std::vector<WorkerView>& workers, std::optional<double> slo_ms,
                        const InfaasOptions& o);

// Whether an instance counts as underloaded now (see 6 above).
bool Underloaded(const std::vector<Candidate>& cands, const InstanceView& inst,
                 double tightest_slo_ms, const InfaasOptions& o);

struct ScaleDecision {
  enum Kind { kNone, kSetReplicas, kUpgrade, kDowngrade, kUnload };
  Kind kind = kNone;
  size_t to_candidate = 0;  // kUpgrade, kDowngrade
  int replicas = 0;         // kSetReplicas, kUpgrade, kDowngrade
  std::string reason;
};

// One instance's scaling step. `underloaded_for_s`: how long Underloaded
// has held (0 = not now); `idle_for_s`: since its last query;
// `tightest_slo_ms`: the tightest SLO it served in the period (0 = none).
ScaleDecision ScaleInstance(const std::vector<Candidate>& cands, const InstanceView& inst,
                            const WorkerView& worker, double underloaded_for_s, double idle_for_s,
                            double tightest_slo_ms, const InfaasOptions& o);

}  // namespace somm::sim::infaas
