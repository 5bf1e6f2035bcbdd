#include "pipeline/slo_split.h"

#include <algorithm>
#include <cstdio>

namespace somm::pipeline {
namespace {

// A partial plan over the steps so far.
struct Partial {
  double latency_ms = 0;
  double cost_usd = 0;
  std::vector<int> choice;
};

// Keeps the plans no other beats on both latency and cost.
void Prune(std::vector<Partial>* plans) {
  std::sort(plans->begin(), plans->end(), [](const Partial& a, const Partial& b) {
    return a.latency_ms < b.latency_ms || (a.latency_ms == b.latency_ms && a.cost_usd < b.cost_usd);
  });
  std::vector<Partial> kept;
  for (Partial& p : *plans) {
    if (kept.empty() || p.cost_usd < kept.back().cost_usd) kept.push_back(std::move(p));
  }
  *plans = std::move(kept);
}

std::string Ms(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", ms);
  return buf;
}

double FixedMs(const std::vector<SplitStep>& steps) {
  double fixed = 0;
  for (const SplitStep& s : steps) fixed += s.model ? 0 : s.fixed_ms;
  return fixed;
}

}  // namespace

SplitPlan PlanSplit(const std::vector<SplitStep>& steps, double slo_ms) {
  SplitPlan plan;
  std::vector<Partial> plans = {Partial{FixedMs(steps), 0, {}}};
  Partial quickest = plans[0];
  for (const SplitStep& step : steps) {
    if (!step.model) {
      for (Partial& p : plans) p.choice.push_back(-1);
      quickest.choice.push_back(-1);
      continue;
    }
    if (step.options.empty()) {
      plan.reason = "a model step has no variant to run on";
      return plan;
    }
    std::vector<Partial> next;
    for (const Partial& p : plans) {
      for (size_t i = 0; i < step.options.size(); ++i) {
        Partial n = p;
        n.latency_ms += step.options[i].latency_ms;
        n.cost_usd += step.options[i].cost_usd;
        n.choice.push_back(static_cast<int>(i));
        if (n.latency_ms <= slo_ms) next.push_back(std::move(n));
      }
    }
    const auto fastest = std::min_element(
        step.options.begin(), step.options.end(),
        [](const StepOption& a, const StepOption& b) { return a.latency_ms < b.latency_ms; });
    quickest.latency_ms += fastest->latency_ms;
    quickest.cost_usd += fastest->cost_usd;
    quickest.choice.push_back(static_cast<int>(fastest - step.options.begin()));
    Prune(&next);
    plans = std::move(next);
  }
  if (plans.empty()) {
    plan.choice = quickest.choice;
    plan.predicted_ms = quickest.latency_ms;
    plan.cost_usd = quickest.cost_usd;
    plan.reason = "no plan meets latency_slo_ms=" + Ms(slo_ms) + ": the quickest takes " +
                  Ms(quickest.latency_ms) + " ms";
    return plan;
  }
  // Sorted by latency with falling cost: the last is the cheapest.
  const Partial& best = plans.back();
  plan.feasible = true;
  plan.choice = best.choice;
  plan.predicted_ms = best.latency_ms;
  plan.cost_usd = best.cost_usd;
  double model_ms = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    if (steps[i].model) model_ms += steps[i].options[static_cast<size_t>(best.choice[i])].latency_ms;
  }
  const double slack = slo_ms - best.latency_ms;
  size_t model_steps = 0;
  for (const SplitStep& s : steps) model_steps += s.model ? 1 : 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    if (!steps[i].model) {
      plan.budget_ms.push_back(steps[i].fixed_ms);
      continue;
    }
    const double own = steps[i].options[static_cast<size_t>(best.choice[i])].latency_ms;
    const double share = model_ms > 0 ? own / model_ms : 1.0 / static_cast<double>(model_steps);
    plan.budget_ms.push_back(own + slack * share);
  }
  plan.reason = "cheapest plan within latency_slo_ms=" + Ms(slo_ms) + ": predicted " +
                Ms(best.latency_ms) + " ms, slack shared by predicted latency";
  return plan;
}

SplitPlan EqualSplit(const std::vector<SplitStep>& steps, double slo_ms) {
  SplitPlan plan;
  size_t model_steps = 0;
  for (const SplitStep& s : steps) model_steps += s.model ? 1 : 0;
  const double fixed = FixedMs(steps);
  const double each = model_steps ? (slo_ms - fixed) / static_cast<double>(model_steps) : 0;
  plan.feasible = true;
  plan.predicted_ms = fixed;
  for (const SplitStep& step : steps) {
    if (!step.model) {
      plan.choice.push_back(-1);
      plan.budget_ms.push_back(step.fixed_ms);
      continue;
    }
    int pick = -1;
    for (size_t i = 0; i < step.options.size(); ++i) {
      const StepOption& o = step.options[i];
      if (o.latency_ms > each) continue;
      if (pick < 0 || o.cost_usd < step.options[static_cast<size_t>(pick)].cost_usd) {
        pick = static_cast<int>(i);
      }
    }
    plan.choice.push_back(pick);
    plan.budget_ms.push_back(each);
    if (pick < 0) {
      plan.feasible = false;
      plan.reason = "a model step has no option within its equal share of " + Ms(each) + " ms";
      continue;
    }
    plan.predicted_ms += step.options[static_cast<size_t>(pick)].latency_ms;
    plan.cost_usd += step.options[static_cast<size_t>(pick)].cost_usd;
  }
  if (plan.feasible) plan.reason = "equal shares of " + Ms(each) + " ms";
  return plan;
}

}  // namespace somm::pipeline
