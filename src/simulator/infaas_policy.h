// INFaaS's policy, ported mechanism by mechanism from INFaaS's released
// master for the simulator: the master's query scheduling (which variant,
// which worker), the worker's variant blacklist and autoscaler, and the
// master's VM daemon. Each is a pure function of the state below, a clock
// and, where INFaaS draws at random, a draw passed in; policy_replay.cc
// keeps the state, draws with the simulation's seed and carries the
// decisions out on simulated workers.
//
// Every threshold the released code fixes is a field of InfaasOptions, with
// the released value as its default. docs/simulation.md ("INFaaS, ported")
// has the table of what was ported as released, what was adapted and why;
// in short: the simulated workers are CPU machines, so the released rules
// that only concern accelerators (exclusive GPUs, TensorRT batch upgrades,
// the scale-down of a parent model to CPU) have nothing to act on; a
// "variant" here is a usable, profiled (variant, CPU threads) option of a
// model (zoo.h, Candidate); a model row is INFaaS's parent-model query and a
// task row its grandparent (model-less) query; constraints, the fleet, zones
// and the view's lag are the simulation's.
//
// Thread-safety: pure functions and values.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "simulator/zoo.h"

namespace somm::sim::infaas {

struct InfaasOptions {
  // --- The master's query scheduling ---
  // A model query first tries the fastest variants within its SLO, this many.
  int fast_check_variants = 5;
  // Above this SLO the search looks only at variants at least this slow
  // (the released master keeps accelerators for tight SLOs this way).
  double loose_slo_ms = 100;
  // A model-less query first tries the variants chosen last, this many.
  int recent_variants = 5;
  // A model-less query's search looks at the least accurate variants that
  // meet its floor, as many as search_share of its SLO pays for at
  // metadata_lookup_ms each, at least min_search_variants.
  double search_share = 0.15;
  double metadata_lookup_ms = 0.6;
  int min_search_variants = 3;
  // What a variant not loaded costs the model-less search on top of its
  // load time and inference latency.
  double not_loaded_penalty_ms = 1000;
  // Share of the queries whose variant is blacklisted that still go to it.
  double blacklisted_share = 0.1;
  // A running variant's query goes to one of its least loaded workers.
  int least_loaded_workers = 3;
  // A worker sent this many queries within burst_window_ms of the first of
  // them is blacklisted for burst_blacklist_s (when the fleet has others).
  int burst_queries = 200;
  double burst_window_ms = 1000;
  double burst_blacklist_s = 2;

  // --- The worker's variant blacklist, every monitor_period_s ---
  double monitor_period_s = 1;
  // Blacklisted when its mean latency passes latency_factor x its profiled
  // latency while each replica serves more than rate_factor x its profiled
  // throughput, or when more than queue_factor x a second's profiled
  // throughput of its replicas waits; lifted when the queue is under that
  // and the latency under unblacklist_latency_factor x the profile.
  double blacklist_latency_factor = 2.5;
  double blacklist_rate_factor = 0.5;
  double blacklist_queue_factor = 0.8;
  double unblacklist_latency_factor = 1.5;
  // With one replica (a second may be loading) the thresholds are looser.
  double single_replica_latency_factor = 4;
  double single_replica_rate_factor = 1.0;
  double single_replica_queue_factor = 1.1;
  // Without a completion in a period, the latency it remembers decays by this.
  double idle_latency_decay = 15;

  // --- The worker's autoscaler, every monitor_period_s ---
  // Replicas of a variant one worker holds at most.
  int max_replicas = 2;
  // Scales up when the load passes (1 - headroom) of its replicas'
  // profiled throughput.
  double headroom = 0.05;
  // Scale-down requests that must pile up before one replica goes (the
  // last one too: that is how an idle variant is unloaded).
  int scale_down_requests = 10;
  // Upgrading wins over replicating when replicating costs more than this
  // times the upgrade, in load time; a replica past max_replicas costs
  // over_cap_factor times its load time.
  double upgrade_cost_ratio = 1.5;
  double over_cap_factor = 1000;
  // The fastest variant's count adds this many queries a second per
  // millisecond of its load time.
  double load_allowance = 0.0002;
  // The released autoscaler upgrades only to an accelerator variant; on
  // CPU variants it always replicates. true: upgrade to a faster CPU
  // variant by the same rule.
  bool upgrade_cpu = false;

  // --- The master's VM daemon, every vm_period_s ---
  double vm_period_s = 2;
  // A worker above this CPU utilisation is blacklisted for vm_blacklist_s.
  double vm_blacklist_util = 0.8;
  double vm_blacklist_s = 2;
  // A worker is added when the least utilised one passes this.
  double vm_scale_out_util = 0.8;
  // After adding or removing a worker, the daemon waits this many periods.
  int vm_backoff_periods = 15;
  // One is removed after this many periods in a row in which the least
  // utilised worker is under vm_idle_min_util or the mean under
  // vm_idle_mean_util.
  int vm_idle_periods = 15;
  double vm_idle_min_util = 0.05;
  double vm_idle_mean_util = 0.30;
  // The workers INFaaS starts with, and never goes below (0: the whole
  // fleet; more than the fleet: the fleet).
  int initial_workers = 0;
};

// Sets one option by its name (the fields above), for --infaas NAME=VALUE.
Status SetOption(InfaasOptions& o, const std::string& name, const std::string& value);
// Every option as NAME=VALUE, in field order.
std::vector<std::string> OptionNames();

// ---------------------------------------------------------------- variant

// What the master knows of one candidate when a query arrives.
struct VariantState {
  bool running = false;      // loaded and serving on some worker
  bool blacklisted = false;  // on the worker that serves it least
};

struct VariantChoice {
  bool ok = false;  // false: no variant meets the query (refused)
  size_t candidate = 0;
  // true: send it to a worker that serves the variant; false: to the least
  // utilised worker, which loads it if it must.
  bool running = false;
  std::string why;
};

// The fastest candidates within `slo_ms` (none: all), fastest first, at
// most fast_check_variants; above loose_slo_ms only those at least that slow.
std::vector<size_t> FastestWithin(const std::vector<Candidate>& cands, std::optional<double> slo_ms,
                                  const InfaasOptions& o);

// A model query (the released parent-model search). `draw` in [0, 1)
// decides whether a query of a blacklisted variant still goes to it.
VariantChoice ChooseForModel(const std::vector<Candidate>& cands,
                             const std::vector<VariantState>& states, std::optional<double> slo_ms,
                             double draw, const InfaasOptions& o);

// A model-less query (the released grandparent search): `cands` honour the
// query's floor and ceiling already; `recent` holds candidate indices, the
// last chosen first (RememberChoice keeps it).
VariantChoice ChooseForTask(const std::vector<Candidate>& cands,
                            const std::vector<VariantState>& states, std::optional<double> slo_ms,
                            const std::vector<size_t>& recent, const InfaasOptions& o);
void RememberChoice(std::deque<std::string>& recent, const std::string& id, const InfaasOptions& o);

// ----------------------------------------------------------------- worker

// A running variant's worker: the first of `least_loaded` (its workers by
// their rate of it, lowest first, at most least_loaded_workers, in the
// order drawn) that is not blacklisted (`blacklisted[k]`: least_loaded[k]
// is); -1: none.
int PickServingWorker(const std::vector<int>& least_loaded, const std::vector<bool>& blacklisted);

// Where a variant goes that is not running (or whose workers are all
// blacklisted): the least utilised worker that can hold it, not the one
// picked last when another can; -1: none. `util` and `can_hold` per worker.
int PickLoadingWorker(const std::vector<double>& util, const std::vector<bool>& can_hold,
                      int last_picked);

// The master's count of queries to one worker.
struct BurstState {
  double window_start_ms = -1;  // -1: none yet
  int queries = 0;
};
// Counts a query sent at `now_ms`; true when the worker is to be
// blacklisted (the count reached burst_queries; it starts again).
bool NoteQuery(BurstState& b, double now_ms, const InfaasOptions& o);

// --------------------------------------------------- variant blacklist

// One variant on one worker over a monitor period.
struct MonitorSample {
  int replicas = 1;
  double period_s = 1;
  int64_t arrived = 0;        // queries sent to it in the period
  int64_t completed = 0;      // answered in the period
  double latency_sum_ms = 0;  // of those, from arrival to answer
  int64_t outstanding = 0;    // sent and not answered yet
  double profiled_ms = 0;     // its batch-1 latency
};
struct BlacklistVerdict {
  bool blacklisted = false;
  double mean_latency_ms = 0;  // what the next period starts from
};
BlacklistVerdict JudgeVariant(const MonitorSample& s, bool was_blacklisted,
                              double last_mean_latency_ms, const InfaasOptions& o);

// ------------------------------------------------------------ autoscaler

// One variant on one worker, as the autoscaler sees it.
struct VariantLoad {
  size_t candidate = 0;
  int replicas = 0;     // 0: not here (or still loading)
  double rate_qps = 0;  // all its replicas' queries per second
};
// How many replicas to add (> 0), to take away (-1) or neither (0); `ok`
// false when the additions do not fit the worker (memory, cores).
struct ScaleCount {
  int count = 0;
  double extra_qps = 0;  // load beyond its replicas' throughput (when count > 0)
  bool ok = true;
};
ScaleCount CountReplicas(const Candidate& c, const VariantLoad& l, int64_t free_bytes,
                         int free_cores, const InfaasOptions& o);
// The fastest candidate's count, given the load the others could not carry.
ScaleCount CountFastest(const Candidate& c, const VariantLoad& l, double others_extra_qps,
                        int64_t free_bytes, int free_cores, const InfaasOptions& o);

// The model's fastest candidate by load plus batch-1 time: the one its
// autoscaler may upgrade to.
size_t FastestCandidate(const std::vector<Candidate>& cands);

struct ScaleRequest {
  size_t candidate = 0;
  int count = 0;
};
// One model's requests on one worker for this period: every variant's, or,
// when upgrading costs less load time than replicating, the fastest's in
// place of the others' additions.
std::vector<ScaleRequest> ScaleModel(const std::vector<Candidate>& cands,
                                     const std::vector<VariantLoad>& here, int64_t free_bytes,
                                     int free_cores, const InfaasOptions& o);

// The worker's scaling daemon: the replicas a request leaves, given those
// now; `backlog` counts the scale-down requests piled up for the variant.
int CarryOut(const ScaleRequest& r, int replicas, int& backlog, const InfaasOptions& o);

// -------------------------------------------------------------- VM daemon

struct VmState {
  int wait = 0;  // periods still to wait after a change (0: may act)
  int idle = 0;  // idle periods in a row
};
struct VmDecision {
  std::vector<int> blacklist;  // indices into `util`
  bool add = false;
  int remove = -1;  // index into `util`; -1: none
};
// One period: `util` holds the pool's workers' CPU utilisation (0-1);
// `pool` may grow to `fleet` and shrink to `floor`.
VmDecision VmStep(VmState& s, const std::vector<double>& util, int pool, int fleet, int floor,
                  const InfaasOptions& o);

}  // namespace somm::sim::infaas
