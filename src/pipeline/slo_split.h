// The SLO split: how a query's latency budget for a whole pipeline is
// shared among its steps. A pure policy (no clock, no state): the options
// each model or task step has now (a variant on a hardware, its predicted
// latency for the query's batch, queue included, and its charge) and the
// time each built-in step is expected to take go in; the choice per step
// and each step's share of the budget come out.
//
// PlanSplit picks the cheapest combination, one option per model step,
// whose predicted latencies and the built-in steps' times add up to at most
// the SLO (ties: the quicker), then shares the slack left among the model
// steps in proportion to their predicted latency. EqualSplit is the
// baseline a user would write by hand: what the built-in steps leave,
// cut in equal parts. When no combination fits, the plan is infeasible
// and names the quickest achievable.
#pragma once

#include <string>
#include <vector>

namespace somm::pipeline {

struct StepOption {
  std::string name;  // "digits-cnn:1:ts-fp32@cpu1"
  double latency_ms = 0;
  double cost_usd = 0;
};

struct SplitStep {
  bool model = false;               // a model or task step (else built in)
  std::vector<StepOption> options;  // a model step's; none = nothing can run it
  double fixed_ms = 0;              // a built-in step's expected time
};

struct SplitPlan {
  bool feasible = false;
  std::vector<int> choice;        // per step: an index into its options; -1 = built in
  std::vector<double> budget_ms;  // per step: its share of the SLO
  double predicted_ms = 0;        // of the choices, built-in steps included
  double cost_usd = 0;
  std::string reason;
};

SplitPlan PlanSplit(const std::vector<SplitStep>& steps, double slo_ms);

// Every model step gets (slo_ms - the built-in steps' times) / n and
// chooses, within it, its own cheapest option (as a query of that budget
// would); infeasible when one has none that fits.
SplitPlan EqualSplit(const std::vector<SplitStep>& steps, double slo_ms);

}  // namespace somm::pipeline
