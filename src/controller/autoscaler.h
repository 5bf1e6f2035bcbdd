// The autoscaler: every tick, for every model version with demand or loaded
// groups, how many replicas of which variant on which hardware should serve
// it. A pure function of the cluster state, its own memory from the previous
// tick (forecasts, hysteresis counters; an explicit value, passed in and
// returned) and the time, so the live controller and the simulator run the
// same code.
//
// Rules, per model version, busiest first:
//   1. Idle: no arrivals and no use for idle_unload_s -> unload its groups,
//      except pinned ones, loading ones and ones with queries in flight.
//      Redundant: with arrivals, a group unused for idle_unload_s while
//      another group of the model was used within it -> unload it too (the
//      queries already go elsewhere; rule 5 sizes the groups that serve).
//   2. Eligible options: accuracy >= min_accuracy (unknown fails a floor) and
//      latency(1) <= the SLO. If none meets the SLO, those meeting the floor
//      serve best effort. One replica of an option carries
//      b / latency(b) q/s, b the largest batch <= max_batch with
//      latency(b) <= slo * slo_queueing_fraction (max_batch with no SLO;
//      1 if even latency(1) is above that).
//   3. Demand D = max(observed rate, forecast at the horizon h), h = the
//      slowest eligible option's load time (at most max_forecast_horizon_s)
//      plus a tick: whatever runs now must carry the load until any
//      alternative could be ready. Rises are anticipated, falls are not.
//      The observed rate is the arrivals of the last rate_window_s, or the
//      last tick's own rate when it rises past that by rise_deviations
//      Poisson deviations (RateForTick).
//   4. Target = the cheapest (option, replicas) that carries D at
//      target_utilization and keeps the share of queries that would wait
//      past the SLO's slack within queueing_miss_target (WaitTail), within
//      the device's cores x max_oversubscription (minus other groups'
//      threads) and memory budget (free, plus what evicting other models'
//      idle groups would give back: cores and memory alike). Cost = replicas x
//      the option's hardware price (PriceList, as the selector's: a CPU option
//      costs its threads); ties go to higher accuracy, then less memory. If
//      nothing carries D, the most capacity that fits.
//   5. No group and arrivals -> load the target now (load on demand).
//      Utilisation of the current groups D / capacity > high_watermark, or
//      their WaitTail above 4 x queueing_miss_target ->
//      move to the target now (scale up, upgrade, vertical; "preload" when
//      only the forecast crosses). Below low_watermark for scale_down_ticks
//      consecutive ticks and scale_down_cooldown_s since this model's last
//      change -> move to the target if it is cheaper (or as cheap and more
//      accurate), sized for the peak demand of the last
//      scale_down_window_s. Each of the three is capped by the hold: the
//      current groups' load time x scale_down_hold_per_load_s, at least
//      scale_down_min_hold_s. Anything else holds.
// Each Action's reason carries the numbers behind it; `notes` says why a
// model that needed a change was left alone (nothing larger fits, no option
// meets the accuracy floor, an idle group still busy). Holding between the
// watermarks is silent.
//
// Thread-safety: stateless.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <absl/container/node_hash_map.h>

#include "cluster/cluster_state.h"
#include "controller/forecast.h"
#include "controller/placement.h"
#include "profiles/price_list.h"

namespace somm::control {

struct AutoscalerConfig {
  // How often the controller calls Decide (the first tick's dt, and the part
  // of the forecast horizon that covers "until we look again").
  double tick_s = 1.0;
  // Caps the load-time part of the forecast horizon: a trend extrapolated
  // much further than this is mostly noise.
  double max_forecast_horizon_s = 30;
  // Move up as soon as the current groups would run above 80% busy: queueing
  // delay grows steeply past that (M/M/1 waiting ~ rho/(1-rho) doubles from
  // 0.67 to 0.8 and again by 0.89).
  double high_watermark = 0.8;
  // Consider moving down below 50%; the gap to high_watermark is the
  // hysteresis band: a target sized at 70% can absorb +14% before going up
  // and -29% before going down.
  double low_watermark = 0.5;
  // Size every new configuration to run 70% busy: between the watermarks.
  double target_utilization = 0.7;
  // A batch may use at most half the latency SLO; the other half is for
  // waiting in the queue and for the batch being formed.
  double slo_queueing_fraction = 0.5;
  // ... and at most this share of its queries may wait past the SLO's slack
  // (WaitTail): a model whose batch takes a good part of its SLO needs
  // replicas well below target_utilization, else its queue refuses queries
  // at any utilisation the throughput rule allows (0 turns the rule off).
  double queueing_miss_target = 0.005;
  // Down only after 10 consecutive low ticks and 30 s after this model's last
  // change: a burst ending does not shed capacity that a load time (seconds)
  // would have to rebuild.
  int scale_down_ticks = 10;
  double scale_down_cooldown_s = 30;
  // A smaller configuration must carry the highest rate observed in the last
  // minute (as Kubernetes' HPA stabilisation window does, there 5 min): load
  // that swings faster than this keeps the capacity its peaks need instead of
  // reloading it every swing.
  double scale_down_window_s = 60;
  // ... but none of the three holds above (ticks, cooldown, window) lasts
  // longer than rebuilding the capacity would take, times this (and at
  // least scale_down_min_hold_s): they shrink for a model whose groups load
  // fast. Idle
  // capacity is kept as long as its cost stays below what shedding it and
  // loading it again would cost (the ski-rental rule), and a reload costs
  // more than its load time: the queries that wait for it. A 0.3-s load
  // holds 10 s after a spike, a 3-s load the whole minute.
  double scale_down_hold_per_load_s = 20;
  double scale_down_min_hold_s = 10;
  // The rate the rules plan with is the arrivals of the last rate_window_s
  // (at least the last tick), whatever the tick: a tick shorter than a second
  // counts few queries, and their Poisson noise alone would trigger scale-ups
  // and keep the scale-down window's peak high.
  double rate_window_s = 1.0;
  // ... except a rise: a tick whose own count exceeds what that rate predicts
  // for it by more than rise_deviations Poisson deviations is planned for at
  // once, at its own rate. Short ticks then see a burst within a tick, not
  // only once it fills the window (0 turns the rule off).
  double rise_deviations = 3;
  // No arrivals and no use for this long -> unload (frees memory for others).
  double idle_unload_s = 30;
  // Threads of all groups on a device <= cores x this. 1.0: intra-op threads
  // spin, so oversubscribed cores slow every instance down.
  double max_oversubscription = 1.0;
  HoltParams holt;
  PriceList prices;  // the selector's defaults: $/vCPU-hour and $/GPU-hour
  PlacementOptions placement;
};

// What the autoscaler remembers about one model version between ticks.
struct RateSample {
  TimePoint at;
  double qps = 0;
};

// Arrivals counted over one tick that ended `at`.
struct TickCount {
  TimePoint at;
  double arrivals = 0;
  double dt_s = 0;
};

struct ModelMemory {
  HoltState holt;
  // The ticks of the last rate_window_s, oldest first (rule 3's rate).
  std::vector<TickCount> recent;
  int low_ticks = 0;  // consecutive ticks below low_watermark
  std::optional<TimePoint> last_change;
  // Observed rates of the last scale_down_window_s, kept only while they can
  // still be the window's maximum (so decreasing): front() is the peak.
  std::vector<RateSample> window;
};

struct AutoscalerMemory {
  // key "model:version"; hashed (looked up several times per model per
  // tick), by node: the tick's steps keep a reference to their model's row,
  // which no insert elsewhere may move.
  absl::node_hash_map<std::string, ModelMemory> models;
  std::optional<TimePoint> last_tick;
};

struct AutoscalerDecision {
  std::vector<Action> actions;     // in the order they must be carried out
  AutoscalerMemory memory;         // pass to the next Decide
  std::vector<std::string> notes;  // models left alone, and why
};

// `memory` by value: a caller done with its own moves it in (it holds every
// model's window, thousands at scale).
AutoscalerDecision Decide(const ClusterState& state, AutoscalerMemory memory, TimePoint now,
                          const AutoscalerConfig& config = {});

// Rule 3's observed rate after a tick that counted `arrivals` over `dt_s`
// ending `now`: appends the tick to `recent` (dropping ticks older than the
// window) and returns the window's rate, or the tick's own when it is a
// rise past the rate of the ticks before it.
double RateForTick(std::vector<TickCount>& recent, double arrivals, double dt_s, TimePoint now,
                   const AutoscalerConfig& config);

// One replica's sustainable throughput under a latency SLO (rule 2).
struct ReplicaCapacity {
  int64_t batch = 1;
  double batch_latency_ms = 0;
  double qps = 0;
};
// nullopt when the profile predicts no positive latency at batch 1.
std::optional<ReplicaCapacity> CapacityOf(const VariantOption& option, double latency_slo_ms,
                                          double slo_queueing_fraction);

// The probability that a query arriving at `rate_qps`, spread over
// `replicas` replicas like `replica`, waits longer than its slack (the SLO
// less its own batch's latency), which the worker's admission refuses: the
// M/D/c tail, Erlang C times exp(-2 (c mu - lambda) slack) (the
// heavy-traffic form for Poisson arrivals and fixed batch times). 0 without
// an SLO or without slack (best effort), 1 at or past saturation.
double WaitTail(double rate_qps, const ReplicaCapacity& replica, double latency_slo_ms,
                int replicas);
// The fewest replicas, at least `at_least`, whose WaitTail is at most
// `miss_target` (rule 4's second bound).
int ReplicasForWaitTail(double rate_qps, const ReplicaCapacity& replica, double latency_slo_ms,
                        double miss_target, int at_least);

}  // namespace somm::control
