#include "rollout/rollout_policy.h"

#include <cstdio>

namespace somm {

const char* RolloutDecisionName(RolloutDecision::Kind kind) {
  switch (kind) {
    case RolloutDecision::Kind::kHold:
      return "hold";
    case RolloutDecision::Kind::kAdvance:
      return "advance";
    case RolloutDecision::Kind::kPromote:
      return "promote";
    case RolloutDecision::Kind::kRollBack:
      return "rollback";
  }
  return "?";
}

namespace {

std::string Fmt(const char* format, double a, double b = 0, double c = 0, double d = 0) {
  char buf[256];
  std::snprintf(buf, sizeof buf, format, a, b, c, d);
  return buf;
}

}  // namespace

RolloutDecision DecideRollout(const Rollout& r, const VersionWindow& stable,
                              const VersionWindow& canary, double step_age_s) {
  RolloutDecision d;
  d.percent = r.percent;
  d.mode = r.mode;
  if (!r.Active()) {
    d.reason = std::string("rollout is ") + StateName(r.state);
    return d;
  }
  const RolloutBounds& b = r.bounds;
  const std::string v2 = "v" + std::to_string(r.canary_version);
  const std::string v1 = "v" + std::to_string(r.stable_version);
  auto roll_back = [&](std::string why) {
    d.kind = RolloutDecision::Kind::kRollBack;
    d.percent = 0;
    d.reason = std::move(why);
    return d;
  };
  if (stable.accuracy && canary.accuracy &&
      *canary.accuracy < *stable.accuracy - b.max_accuracy_drop) {
    return roll_back(v2 + Fmt(" held-out top-1 %.4f is %.4f below ", *canary.accuracy,
                              *stable.accuracy - *canary.accuracy) +
                     v1 + Fmt("'s %.4f (bound %.4f)", *stable.accuracy, b.max_accuracy_drop));
  }
  if (r.mode == Rollout::Mode::kShadow && canary.compared >= b.min_queries_to_judge) {
    const double share = static_cast<double>(canary.disagreed) / static_cast<double>(canary.compared);
    if (share > b.max_disagreement) {
      return roll_back(v2 + Fmt(" answered differently from ", 0) + v1 +
                       Fmt(" on %.0f of %.0f mirrored queries (%.1f%%, bound %.1f%%)",
                           static_cast<double>(canary.disagreed), static_cast<double>(canary.compared),
                           100 * share, 100 * b.max_disagreement));
    }
  }
  if (canary.Outcomes() >= b.min_queries_to_judge &&
      canary.ErrorRate() > stable.ErrorRate() + b.max_error_rate_increase) {
    return roll_back(v2 + Fmt(" failed %.0f of %.0f queries (%.1f%%) against ",
                              static_cast<double>(canary.failed),
                              static_cast<double>(canary.Outcomes()), 100 * canary.ErrorRate()) +
                     v1 + Fmt("'s %.1f%% (bound +%.1f%%)", 100 * stable.ErrorRate(),
                              100 * b.max_error_rate_increase));
  }
  if (canary.answered >= b.min_queries_to_judge && stable.answered >= b.min_queries_to_judge) {
    const double c = canary.MeanLatencyMs();
    const double s = stable.MeanLatencyMs();
    if (c > s * b.max_latency_ratio && c - s > b.latency_floor_ms) {
      return roll_back(v2 + Fmt(" mean latency %.2f ms is %.2fx ", c, s > 0 ? c / s : 0) + v1 +
                       Fmt("'s %.2f ms (bound %.2fx, floor %.2f ms)", s, b.max_latency_ratio,
                           b.latency_floor_ms));
    }
  }
  const int64_t seen = r.mode == Rollout::Mode::kShadow ? canary.compared : canary.Outcomes();
  const std::string summary =
      Fmt("%.0f queries in %.1f s", static_cast<double>(seen), step_age_s) +
      (canary.answered > 0 && stable.answered > 0
           ? Fmt(", mean %.2f ms against %.2f ms", canary.MeanLatencyMs(), stable.MeanLatencyMs())
           : std::string()) +
      Fmt(", errors %.1f%% against %.1f%%", 100 * canary.ErrorRate(), 100 * stable.ErrorRate()) +
      (r.mode == Rollout::Mode::kShadow && canary.compared > 0
           ? Fmt(", %.1f%% of answers differ", 100.0 * static_cast<double>(canary.disagreed) /
                                                   static_cast<double>(canary.compared))
           : std::string()) +
      (canary.accuracy ? Fmt(", held-out top-1 %.4f", *canary.accuracy) : std::string()) +
      (stable.accuracy ? Fmt(" against %.4f", *stable.accuracy) : std::string());
  if (!r.automatic) {
    d.reason = "manual rollout held at " + std::to_string(r.percent) + "%: " + summary;
    return d;
  }
  if (!canary.profiled || !stable.profiled) {
    d.reason = "waiting for " + (canary.profiled ? v1 : v2) +
               "'s variants to be profiled (and its held-out accuracy measured); " + summary;
    return d;
  }
  if (stable.accuracy && !canary.accuracy) {
    d.reason = "waiting for " + v2 + "'s accuracy on its held-out data (" + v1 + Fmt("'s %.4f); ", *stable.accuracy) + summary;
    return d;
  }
  if (step_age_s < b.min_step_s || seen < b.min_queries_per_step) {
    d.reason = "step at " + std::to_string(r.percent) + "%" + Fmt(" needs %.0f queries and %.0f s: ",
               static_cast<double>(b.min_queries_per_step), b.min_step_s) + summary;
    return d;
  }
  if (r.mode == Rollout::Mode::kShadow) {
    d.kind = RolloutDecision::Kind::kAdvance;
    d.mode = Rollout::Mode::kSplit;
    d.percent = r.steps.front();
    if (d.percent >= 100) d.kind = RolloutDecision::Kind::kPromote;
    d.reason = "shadow passed (" + summary + "): " + v2 + " now serves " + std::to_string(d.percent) + "%";
    return d;
  }
  int next = 100;
  for (int s : r.steps) {
    if (s > r.percent) {
      next = s;
      break;
    }
  }
  d.percent = next;
  d.kind = next >= 100 ? RolloutDecision::Kind::kPromote : RolloutDecision::Kind::kAdvance;
  d.reason = "step at " + std::to_string(r.percent) + "% passed (" + summary + "): " +
             (next >= 100 ? v2 + " promoted to 100%" : v2 + " now serves " + std::to_string(next) + "%");
  return d;
}

}  // namespace somm
