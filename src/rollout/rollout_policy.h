// The rollout policy: whether a canary advances to its next share, is
// promoted, is rolled back, or holds, from what each version did during the
// current step. A pure function of the record, the two windows and the
// step's age, shared by the controller and its tests (and by whatever
// replays the same numbers). The controller carries the decision out
// (controller.h), logs it and counts it on /metrics.
//
// The rules, in order (the first that applies decides):
//   1. Only a canary (state kCanary) is judged.
//   2. Accuracy: when both versions' held-out top-1 is known and the
//      canary's is more than max_accuracy_drop below, roll back.
//   3. Shadow: once min_queries_to_judge answers were compared, a share of
//      differing answers above max_disagreement rolls back.
//   4. Errors: once the canary has min_queries_to_judge outcomes, a failure
//      rate more than max_error_rate_increase above the stable version's
//      rolls back.
//   5. Latency: once both have min_queries_to_judge answers, a canary mean
//      above max_latency_ratio times the stable one's, by more than
//      latency_floor_ms, rolls back.
//   6. A manual rollout (automatic false) holds; so does one whose versions
//      are not both profiled yet (their held-out accuracy may be coming),
//      one whose canary accuracy is unknown while the stable one's is known, and a
//      step younger than min_step_s or with fewer than min_queries_per_step
//      canary outcomes (shadow: comparisons).
//   7. Otherwise it advances: shadow goes live at the first step, split to
//      the next step, and the last step (100) is the promotion.
#pragma once

#include <string>

#include "rollout/rollout.h"

namespace somm {

struct RolloutDecision {
  enum class Kind { kHold, kAdvance, kPromote, kRollBack };
  Kind kind = Kind::kHold;
  int percent = 0;               // the canary's share after it
  Rollout::Mode mode = Rollout::Mode::kSplit;  // after it
  std::string reason;            // with the numbers
};
const char* RolloutDecisionName(RolloutDecision::Kind kind);

RolloutDecision DecideRollout(const Rollout& rollout, const VersionWindow& stable,
                              const VersionWindow& canary, double step_age_s);

}  // namespace somm
