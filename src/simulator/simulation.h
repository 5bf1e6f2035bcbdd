// Simulation: one trace replayed through somm's own router and controller,
// with simulated workers (simulated_worker.h) and a virtual clock
// (event_loop.h), under one provisioning policy.
//
// What runs is the live code: the Router (selector, requirements, SLO
// admission, power of two choices, load on demand) takes every query of the
// trace through Router::Infer, and the Controller (autoscaler, placement,
// eviction, replica spreading) runs Tick() every control_tick_ms of virtual
// time; both read the EventLoop's clock. The model zoo is what the
// repository's registry reads: model.yaml and the persisted variant
// profiles (<repo>/.somm/variants/...). Only the workers and the clock are
// simulated.
//
// Policies:
//   somm         router and controller managed; every model starts with its
//                configured instances (model.yaml instance_count) of the
//                as-registered variant, as `somm serve --managed true` does.
//   static-peak  router and controller unmanaged; per model, pinned replicas
//   static-avg   of the as-registered variant on its intra_op_threads, as
//                many as the trace's busiest second (peak) or its mean rate
//                (avg) needs at that variant's profiled capacity (the best
//                batch/latency(batch) over the profiled batches up to
//                max_batch_size), at least 1: bench/managed_plan.py's rule
//                with --capacity profile. A task is served through the model
//                an operator would configure for it (StaticTaskModel): its
//                rows count as that model's load.
//   infaas       INFaaS's released master, ported (infaas_policy.h): its
//                query scheduling, its workers' blacklist and autoscaler and
//                its VM daemon drive the simulated workers directly (no somm
//                router or controller); policy_replay.cc. A task row is its
//                model-less query, over every variant of the task's models.
//   clairvoyant  a heuristic that knows the whole trace: per interval the
//                cheapest placement it finds that covers the coming load at
//                its SLOs, loads paid ahead (oracle_policy.h, the file of its
//                old name "oracle", still accepted). Not an optimum: the
//                lower bound on cost is cost_bound.h's.
//
// Trace rows (zoo.h, RowTarget): a model row is that model's query; a row
// with a task is a task query, as live: somm and the static policies send it
// through the router's task path (the selector over the task's models, the
// loaded ones only when static), INFaaS and the clairvoyant choose among all the
// task's models' variants. Every policy honours min_accuracy and max_cost:
// one that cannot for a query refuses it, and the refusal counts as a miss
// of an otherwise feasible query ("refused_constraint").
//
// Measured per policy, over [start of the replay, last arrival]:
// attainment (share of the feasible queries with a latency SLO answered
// successfully within it, latency from the query's arrival; a query is
// feasible when its SLO is at least the best profiled batch-1 latency of any
// usable variant of its model, bench/managed_plan.py's rule, and, when it
// carries min_accuracy or max_cost, some variant meets them too (zoo.h,
// Feasible); queries without an SLO count as met when answered), instance-seconds (replicas, loading
// ones included, integrated over virtual time), cold starts and control
// actions (as the controller counts them for somm_cold_starts_total and
// somm_control_actions_total), rejections (RESOURCE_EXHAUSTED and
// UNAVAILABLE answers), p50/p99 latency of the answered queries, and
// worker-seconds, dollars (every replica at its hardware's PriceList
// price, integrated as instance-seconds are), and attainment per SLO value
// of each model (a trace generator's SLO classes map onto those).
//
// The fleet (workers, or the zones of a cluster description) is every
// policy's. Failures and replacements (fail_at_s, lease_s,
// provision_delay_s) and the view's lag (view_lag_ms, SimulatedStore) are
// simulated for somm (and the lag for static); INFaaS sees an instance
// run view_lag_ms after its load and decides on the last second's rates;
// the clairvoyant still decides on the workers' exact, current state.
// So is the leader controller's death (kill_leader_at_s), and several
// routers (`routers`, router_fleet.h: round-robin, each with its own view).
// Not simulated yet: the network and RPC
// time between router and worker (a query costs only its queueing and its
// batch), and CPU contention (between replicas, and from whatever else runs
// on the machine): batches take their profiled time times the noise, so
// the controller's slowdown calibration sees the noise and nothing else.
//
// Thread-safety: RunPolicy is a pure function of its arguments (each call
// builds its own loop, store, registry, workers, router and controller).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "controller/autoscaler.h"
#include "loadgen/trace.h"
#include "profiles/price_list.h"
#include "registry/model_catalog.h"
#include "simulator/cost_bound.h"
#include "simulator/infaas_policy.h"
#include "simulator/oracle_policy.h"

namespace somm::sim {

enum class Policy { kSomm, kStaticPeak, kStaticAvg, kInfaas, kClairvoyant };
const char* PolicyName(Policy policy);
// "somm", "static-peak", "static-avg", "infaas", "clairvoyant" ("oracle", its
// old name, too); "all" gives all five.
StatusOr<std::vector<Policy>> ParsePolicies(const std::string& name);

// One zone of the cluster description.
struct ZoneSpec {
  std::string name;
  int workers = 0;
  int cores = 2;
  int64_t memory_bytes = int64_t{16} << 30;
};

// Reads a cluster description: JSON {"zones": [{"name": "a", "workers": 500,
// "cores": 4, "memory_mb": 8192}, ...]}. Errors name the file and the field.
StatusOr<std::vector<ZoneSpec>> ReadClusterFile(const std::string& path);

struct SimulationOptions {
  std::string repository;  // a model repository with persisted profiles
  int workers = 1;
  // Each worker's cores and CPU memory budget (simulate_command.h derives
  // the command's defaults from this machine).
  int worker_cores = 2;
  int64_t worker_memory_bytes = int64_t{16} << 30;
  // The cluster description (--cluster FILE, ReadClusterFile): zones of
  // workers. Empty: `workers` workers of worker_cores and
  // worker_memory_bytes, in no zone.
  std::vector<ZoneSpec> zones;
  // Failures (the somm policy): at fail_at_s of the replay (< 0: never)
  // fail_fraction of the workers (of zone fail_zone only, when named; at
  // least one) die at once, drawn with the seed. The store keeps a dead
  // worker's last report until its lease lapses (lease_s after its last
  // heartbeat; the live default, docs/cluster-state.md: --lease-ms 3000): until
  // then routers still send it queries, which fail (UNAVAILABLE) and are
  // retried elsewhere. When the lease lapses a replacement is asked for; it
  // joins empty provision_delay_s later (about a Kubernetes pod start), and
  // its worker-seconds count from the request.
  double fail_at_s = -1;
  double fail_fraction = 0.05;
  std::string fail_zone;
  double lease_s = 3;
  double provision_delay_s = 30;
  // The leader controller (the somm policy). Two controllers elect a leader
  // through the cluster's own elector (node/leader_elector.h) over an
  // in-memory lease on virtual time, each renewing every third of
  // leader_lease_s; only the leader runs control ticks, and the router
  // reaches whoever holds the lease. At kill_leader_at_s of the replay (< 0:
  // never) the leader dies: it renews and acts no more, and calls to it fail
  // (UNAVAILABLE) while the lease still names it. Once the lease lapses the
  // standby takes it and controls with a controller of its own (the dead
  // one's forecasts and pending actions died with it), as a standby
  // controller process does (docs/cluster.md; the live --leader-lease-ms).
  double kill_leader_at_s = -1;
  // The routers in front of the workers (somm and static): queries go to
  // them round-robin, each reads the store through its own lagged view, and
  // the controllers see their demand merged (router_fleet.h).
  int routers = 1;
  // The router's routing policy (router/routing_policy.h): p2c or least-wait.
  std::string routing_policy = "p2c";
  double leader_lease_s = 3;
  // How long a worker's report takes to reach the router's and the
  // controller's views (SimulatedStore): about a millisecond, the live
  // median of docs/cluster-state.md ("Steady-state cost of the cluster state":
  // 0.6-0.9 ms from a worker's write to a router's view). What the views
  // know of queues is as old as the last report, which the controller
  // refreshes every control tick, as heartbeats do every second live.
  double view_lag_ms = 1.0;
  // See SimulatedWorkerOptions::latency_noise_sigma.
  double latency_noise_sigma = 0.1;
  uint64_t seed = 1;
  // Each replica's price per second (the dollars of the report).
  PriceList prices;
  // Trace seconds per simulated second, as `somm bench --time-scale`.
  double time_scale = 1.0;
  // The controller's settings (ControllerOptions' defaults).
  int control_tick_ms = 1000;
  double idle_unload_s = 0;  // 0 = the autoscaler's default
  control::AutoscalerConfig autoscaler;
  // The INFaaS policy's and the clairvoyant heuristic's settings (their defaults).
  infaas::InfaasOptions infaas;
  oracle::OracleOptions oracle;
  // Replicas per model for static-peak / static-avg instead of the plan
  // sized from the profiles (e.g. the plan a live run calibrated); models
  // not named keep the profile-sized count.
  std::map<std::string, int> static_peak_replicas;
  std::map<std::string, int> static_avg_replicas;
};

// The queries of one SLO value of one model.
struct SloResult {
  int64_t queries = 0;
  int64_t feasible = 0;
  int64_t met = 0;
};

// One model's share of a policy's queries.
struct ModelResult {
  int64_t queries = 0;
  int64_t feasible = 0;
  int64_t met = 0;
  double attainment = 0;  // met / feasible (1 when nothing is feasible)
  int64_t rejections = 0;
  int64_t expired = 0;
  int64_t late = 0;
  int64_t refused_constraint = 0;
  std::map<std::string, SloResult> slos;  // by the SLO in ms as the trace writes it ("20")
};

struct PolicyResult {
  std::string policy;
  int64_t queries = 0;
  int64_t feasible = 0;       // queries whose SLO some variant can meet
  int64_t met = 0;            // feasible queries answered within their SLO
  double attainment = 0;      // met / feasible (1 when nothing is feasible)
  double attainment_all = 0;  // the same over every query
  int64_t answered = 0;
  int64_t rejections = 0;  // RESOURCE_EXHAUSTED or UNAVAILABLE
  int64_t expired = 0;     // DEADLINE_EXCEEDED
  int64_t failed = 0;      // any other error
  // Refused because the policy could not honour min_accuracy or max_cost
  // (not counted in rejections or failed).
  int64_t refused_constraint = 0;
  // Whether the trace has task rows or constraints: the JSON then carries
  // refused_constraint (per policy and per row) and served_by.
  bool constraints = false;
  // Per task row ("task:<task>"): the answered queries by the model that
  // served them.
  std::map<std::string, std::map<std::string, int64_t>> served_by;
  // Static policies: the model each task of the trace is served through.
  std::map<std::string, std::string> static_task_models;
  int64_t late = 0;        // answered after their SLO
  double p50_ms = 0;
  double p99_ms = 0;
  double duration_s = 0;  // first arrival (0) to last, in simulated seconds
  double instance_seconds = 0;
  double mean_replicas = 0;  // instance_seconds / duration_s
  double worker_seconds = 0;
  double usd = 0;  // replicas at their hardware's price, over the replay
  int64_t cold_starts = 0;
  int64_t control_actions = 0;
  std::map<std::string, int64_t> control_actions_by_kind;
  // Static policies: replicas per model.
  std::map<std::string, int> static_replicas;
  std::map<std::string, ModelResult> models;
  int64_t events = 0;  // simulation events processed
  // somm only: per simulated second of the replay (by arrival), the
  // queries, the feasible ones, those met, and at the second's end the
  // replicas and the live workers; the failures, with when they were
  // detected and replaced.
  struct Second {
    int64_t arrivals = 0;
    int64_t feasible = 0;
    int64_t met = 0;
    int64_t replicas = 0;
    int workers = 0;
  };
  std::vector<Second> timeline;
  int workers_killed = 0;
  int workers_replaced = 0;
  // The leader's death (kill_leader_at_s): seconds from the kill until the
  // standby held the lease (-1: no kill, or no takeover before the end).
  double leader_takeover_s = -1;
  int64_t view_rebuilds = 0;
  // The routers that ran (0: the policy routes by itself, INFaaS and the
  // clairvoyant), and the arrivals their demand rows, merged as the
  // controllers read them, counted at the end of the replay.
  int routers = 0;
  int64_t demand_arrivals = 0;
  // The lower bound on cost at this policy's attainment (cost_bound.h; < 0:
  // not computed) and usd over it (0 when the bound is 0).
  double cost_bound_usd = -1;
  double cost_over_bound = 0;
  // The policies that route through somm's router (somm, static-*): what
  // each answered query's explanation reported as its cost (somm_cost_usd,
  // the charge rule on the batch as it ran) over what the selector
  // predicted when it chose (somm_predicted_cost_usd), over the queries
  // that carry both (docs/selection.md, "What a query pays").
  struct CostAgreement {
    int64_t queries = 0;
    double median = 0;  // reported / predicted
    double p10 = 0;
    double p90 = 0;
    double p99 = 0;
    double max = 0;
    int64_t capped = 0;  // reported at the query's max_cost (somm_cost_capped)
  };
  CostAgreement cost;
};

// One query's fate, as every policy's replay records it.
struct QueryOutcome {
  const std::string* model = nullptr;  // the row's RowTarget::label
  std::optional<double> slo_ms;
  bool feasible = true;  // see above
  bool done = false;
  StatusCode code = StatusCode::kOk;
  double latency_ms = 0;  // from arrival to answer
  bool refused_constraint = false;  // see PolicyResult
  std::string served_by;            // task rows: the model that answered
};

// Fills `result`'s query counts, attainment (overall, per model, per SLO),
// rejections and percentiles from the outcomes; the other fields are left.
void SummarizeOutcomes(const std::vector<QueryOutcome>& outcomes, PolicyResult* result);

StatusOr<PolicyResult> RunPolicy(const SimulationOptions& options, const loadgen::Trace& trace,
                                 Policy policy);

// The static policies' replicas per model (see above; the options' static_*
// replicas override it model by model), for the models the trace's rows
// name and the model each task is served through (written to *task_models
// when given). Errors name a model of the trace that the repository lacks
// or that has no usable profile of its as-registered variant.
StatusOr<std::map<std::string, int>> StaticReplicas(
    const SimulationOptions& options, const loadgen::Trace& trace, Policy policy,
    std::map<std::string, std::string>* task_models = nullptr);

// The model a static deployment serves `task` through, as an operator would
// configure it: the cheapest (its as-registered variant's price per query
// at profiled capacity) of the task's models whose as-registered variant's
// accuracy meets the strictest min_accuracy the trace asks of the task; the
// most accurate when none does (the rows it cannot honour are refused); the
// cheapest when no row asks. Models without a profile of the as-registered
// variant on their intra_op_threads are not candidates.
StatusOr<std::string> StaticTaskModel(const std::vector<VersionPtr>& models,
                                      std::optional<double> strictest_accuracy,
                                      const PriceList& prices);

// The lower bound on cost of `trace` (cost_bound.h) over the simulation's
// zoo, prices, fleet (its largest worker's cores) and time scale.
StatusOr<bound::CostCurve> CostBound(const SimulationOptions& options,
                                     const loadgen::Trace& trace);

// Sets the result's cost_bound_usd (the curve at its attainment) and
// cost_over_bound.
void ApplyCostBound(const bound::CostCurve& curve, PolicyResult* result);

// {"policies": {"<policy>": {...}}}: every PolicyResult field by name; with
// a curve, also {"cost_bound": {"feasible", "usd_at_full_attainment",
// "curve": [[attainment, usd], ...]}}.
std::string ResultsToJson(const std::vector<PolicyResult>& results,
                          const bound::CostCurve* curve = nullptr);

}  // namespace somm::sim
