// Requirements: the model-less part of a query, read from its parameters
// (latency_slo_ms, min_accuracy, max_cost, best_effort), with a message that
// names the parameter when one is malformed.
#pragma once

#include "selector/selector.h"
#include "api/inference.h"

namespace somm {

// *any: whether an SLO (latency, accuracy or cost) was given.
StatusOr<Requirements> ParseRequirements(const Parameters& p, bool* any);
// "min_accuracy=0.9 latency_slo_ms=5", or "none".
std::string DescribeRequirements(const Requirements& r);
// The samples a query carries (its first input's batch dim; at least 1).
int64_t QuerySamples(const std::vector<Tensor>& inputs);

}  // namespace somm
