// The router's per-query and per-version state (router.h's private
// types), shared by its files: router.cc (admission, selection, rollouts)
// and router_dispatch.cc (a worker and a replica, retries, the answer).
// Internal to router/.
#pragma once

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "router/answer_compare.h"
#include "router/inference_statistics.h"
#include "router/router.h"

namespace somm {

inline int64_t MicrosBetween(SteadyClock::time_point from, SteadyClock::time_point to) {
  return std::chrono::duration_cast<std::chrono::microseconds>(to - from).count();
}

inline int64_t NanosBetween(SteadyClock::time_point from, SteadyClock::time_point to) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(to - from).count();
}

inline int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// What the router keeps per model version: its metrics handle (found once,
// not per query) and its demand counters.
struct Router::VersionStats {
  std::string model;
  int64_t version = 0;
  ModelMetrics* metrics = nullptr;
  std::atomic<int64_t> arrivals{0};
  // Outcomes, for the rollout policy (cluster::ModelDemand).
  std::atomic<int64_t> answered{0};
  std::atomic<int64_t> failed{0};
  std::atomic<int64_t> latency_us_total{0};
  std::atomic<int64_t> compared{0};
  std::atomic<int64_t> disagreed{0};
  std::atomic<int64_t> tightest_slo_us{INT64_MAX};
  std::atomic<int64_t> strictest_accuracy_ppm{0};
  // Triton's statistics of this version (GET .../stats, gRPC ModelStatistics).
  std::unique_ptr<InferenceStatistics> inference;
};

struct Router::Query {
  SteadyClock::time_point start;
  InferCallback done;
  std::string id;
  VersionPtr version;
  VersionStats* stats = nullptr;  // of `version`; set with it
  std::string variant;
  HardwareConfig hardware;
  int64_t instance_id = -1;
  std::string worker;          // "" = not chosen yet (or the only worker)
  bool remote = false;         // dispatched to a worker of another process
  int attempts = 0;            // dispatches that failed on a remote worker
  std::vector<std::string> failed_workers;  // never tried again for this query
  // How PickWorker chose among zones, for somm_zone_reason.
  enum class ZoneChoice { kNone, kSameZone, kNoHolderInZone, kZoneBusier, kLoaded };
  ZoneChoice zone_choice = ZoneChoice::kNone;
  std::string zone;             // the chosen worker's ("" = none or unknown)
  double zone_queue_ms = 0;     // kZoneBusier: predicted queue in the router's zone
  double other_queue_ms = 0;    // kZoneBusier: and at the holder taken instead
  std::vector<Tensor> inputs;  // checked, in model order
  // The inputs, moved here when the query first goes to a remote worker:
  // its stub sends them from here, and a retry elsewhere sends them again.
  std::shared_ptr<const std::vector<Tensor>> sent_inputs;
  std::vector<bool> keep;      // outputs asked for
  int64_t samples = 1;
  DecisionRecord decision;
  uint64_t log_number = 0;  // its row in the decision log (0 = none)
  bool compact = false;     // explains itself in one parameter (RouterOptions)
  bool cache_checked = false;
  std::string cache_key;    // "" = not kept (its model keeps no cache, or a hit)
  double price_per_s = 0;
  // Chosen by the selector (RouteSelected): its cost ceiling, unless best
  // effort waived it, the profile of its option and its device for
  // CostCalibration ("" = not chosen by the selector).
  std::optional<double> max_cost_usd;
  double predicted_charge_usd = 0;
  LatencyCurve profiled;
  std::string calibration_device;
  // Its variant's instances had idled when it was chosen (CandidateIsCold):
  // its batch is learnt as a cold one.
  bool cold_batch = false;
  std::optional<double> latency_slo_ms;
  bool best_effort = false;
  bool prepared = false;
  // A task query's inputs and outputs until its model is chosen.
  std::vector<Tensor> raw_inputs;
  std::vector<RequestedOutput> requested_outputs;
  // Which side of the model's rollout took it, for somm_rollout ("" = the
  // model has no canary running, or the query named a version).
  std::string rollout_note;
};

// A stable answer and its shadow's, compared once both are in (shadow
// rollouts): counted on the shadow version's row.
struct Router::ShadowPair {
  std::mutex mu;
  int pending = 2;
  bool both_ok = true;
  std::vector<Tensor> stable;
  std::vector<Tensor> shadow;
  void Offer(const StatusOr<InferenceResponse>& r, bool is_shadow, VersionStats& shadow_stats) {
    std::lock_guard lock(mu);
    if (!r.ok()) {
      both_ok = false;
    } else {
      (is_shadow ? shadow : stable) = r->outputs;
    }
    if (--pending > 0 || !both_ok) return;
    shadow_stats.compared.fetch_add(1, std::memory_order_relaxed);
    if (AnswersDiffer(stable, shadow)) shadow_stats.disagreed.fetch_add(1, std::memory_order_relaxed);
  }
};

}  // namespace somm
