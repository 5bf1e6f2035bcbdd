// Rollout: a model's canary. A new version takes a share of the queries
// that name the model without a version (split), or runs beside the stable
// version on a share of them while clients get the stable answers (shadow);
// the controller compares the two and promotes the canary step by step, or
// rolls it back by itself (rollout_policy.h). This header holds the record,
// what the API asks of it, its JSON and where it is kept.
//
// The record is the model's serving label as TF Serving's "stable"/"canary"
// labels are: while a canary runs, both versions are served whatever the
// model's version_policy says (the registry pins them), and an unversioned
// query goes to the stable version unless it draws the canary. A rolled-back
// record keeps serving the stable version (a reload does not hand the
// traffic back to the version that failed); a promoted one serves the
// canary. A query that names a version gets that version, as without a
// rollout.
//
// Kept by the controller in <repo>/.somm/rollouts/<model>.json (so a restart
// resumes the rollout where it stood) and, in a cluster, published with the
// model's catalog entry so every router splits alike.
//
// Plain values, JSON and file I/O; no threads.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace somm {

// What makes a canary worse than its stable version. Defaults suit a small
// model at tens of queries per second; every field travels in the record.
struct RolloutBounds {
  // Canary answers per step before it may advance; and before its error
  // rate or latency is judged at all (judging needs fewer: a clear failure
  // shows early).
  int64_t min_queries_per_step = 50;
  int64_t min_queries_to_judge = 20;
  double min_step_s = 5;  // seconds per step at least
  // Failures (server-side: not the caller's bad input) may exceed the
  // stable version's rate by this much.
  double max_error_rate_increase = 0.01;
  // Mean server latency may be this many times the stable version's, and
  // differences below latency_floor_ms never count (noise on a fast model).
  double max_latency_ratio = 1.5;
  double latency_floor_ms = 1.0;
  // Top-1 on the version's held-out data (its profile) may be this much
  // below the stable version's; unknown accuracy is waited for when the
  // stable version's is known.
  double max_accuracy_drop = 0.01;
  // Shadow: the share of mirrored queries whose answers differ (top class,
  // else values beyond a tolerance).
  double max_disagreement = 0.02;
};

struct RolloutEvent {
  int64_t unix_ms = 0;
  std::string event;  // started, advanced, promoted, rolled_back, set, ...
  int percent = 0;
  std::string reason;
};

struct Rollout {
  enum class Mode { kSplit, kShadow };
  enum class State { kCanary, kPromoted, kRolledBack };
  std::string model;
  int64_t stable_version = 0;
  int64_t canary_version = 0;
  Mode mode = Mode::kSplit;
  State state = State::kCanary;
  // The canary's share of unversioned queries now (shadow: the share
  // mirrored to it), 0..100.
  int percent = 0;
  // The shares it advances through; the last is 100 (promotion).
  std::vector<int> steps = {10, 25, 50, 100};
  bool automatic = true;  // false: held at `percent` until told
  RolloutBounds bounds;
  int64_t started_unix_ms = 0;
  int64_t step_started_unix_ms = 0;
  std::string reason;  // why it stands where it does (the latest event's)
  std::vector<RolloutEvent> history;  // oldest first, at most kMaxHistory
  static constexpr size_t kMaxHistory = 64;

  bool Active() const { return state == State::kCanary; }
  // The version an unversioned query goes to unless it draws the canary.
  int64_t DefaultVersion() const {
    return state == State::kPromoted ? canary_version : stable_version;
  }
  // Whether a query whose uniform draw in [0, 100) is `draw` takes (split)
  // or is mirrored to (shadow) the canary.
  bool DrawsCanary(double draw) const { return Active() && draw < percent; }
  // The versions the registry serves beside the version policy's.
  std::vector<int64_t> PinnedVersions() const;
  void Record(int64_t unix_ms, std::string event, std::string why);
};

const char* ModeName(Rollout::Mode mode);
const char* StateName(Rollout::State state);

// What POST /v2/models/{m}/rollout (and somm rollout, and gRPC) asks.
struct RolloutChange {
  enum class Kind { kStart, kSetPercent, kPromote, kRollBack };
  Kind kind = Kind::kStart;
  std::string model;
  std::optional<int64_t> version;  // kStart: the canary; also accepted to check the others
  std::optional<int> percent;      // kStart (default the first step), kSetPercent
  Rollout::Mode mode = Rollout::Mode::kSplit;
  std::optional<std::vector<int>> steps;
  std::optional<bool> automatic;
  RolloutBounds bounds;  // kStart
  std::string reason;    // an operator's words, kept in the history
};
// {"version": "2", "percent": 10, "mode": "split|shadow", "steps": [..],
//  "automatic": true, "bounds": {...}} starts one; {"action": "promote" |
// "rollback" | "set", "percent": N} changes one. INVALID_ARGUMENT names the
// field.
StatusOr<RolloutChange> RolloutChangeFromJson(const std::string& model, const std::string& text);
std::string RolloutChangeToJson(const RolloutChange& change);

// What the controller has seen of each version during the current step.
struct VersionWindow {
  int64_t answered = 0;
  int64_t failed = 0;
  double latency_ms_sum = 0;
  int64_t compared = 0;   // shadow answers compared (canary only)
  int64_t disagreed = 0;  // of which differed
  std::optional<double> accuracy;  // held-out top-1 of the as-registered variant
  // Its variants are profiled (and its accuracy measured where it has
  // held-out data); until then it is not judged good.
  bool profiled = true;
  int64_t Outcomes() const { return answered + failed; }
  double ErrorRate() const {
    return Outcomes() == 0 ? 0 : static_cast<double>(failed) / static_cast<double>(Outcomes());
  }
  double MeanLatencyMs() const {
    return answered == 0 ? 0 : latency_ms_sum / static_cast<double>(answered);
  }
};

// A rollout with the current step's windows: GET .../rollout.
struct RolloutView {
  Rollout rollout;
  VersionWindow stable;
  VersionWindow canary;
};

std::string RolloutToJson(const Rollout& rollout);
StatusOr<Rollout> RolloutFromJson(const std::string& text);
std::string RolloutViewToJson(const RolloutView& view);
StatusOr<RolloutView> RolloutViewFromJson(const std::string& text);

// <repo>/.somm/rollouts/<model>.json: written atomically (a rename).
Status SaveRollout(const std::string& repository, const Rollout& rollout);
// nullopt when the model has none; an unreadable file is an error naming it.
StatusOr<std::optional<Rollout>> LoadRollout(const std::string& repository,
                                             const std::string& model);

}  // namespace somm
