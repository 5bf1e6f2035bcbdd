// Input checks: a query's tensors against its model's signature. The router
// runs them before it routes (a malformed query never triggers a load and
// never counts as demand); a worker trusts what a router sends it.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "common/tensor.h"
#include "repository/model_config.h"
#include "api/inference.h"

namespace somm {

// Checks `given` against `config` and moves them, in config order, to
// *ordered. Every message names the model (`label`), the input and the problem.
Status PrepareInputs(const ModelConfig& config, const std::string& label,
                     std::vector<Tensor> given, std::vector<Tensor>* ordered);

// Which of the config's outputs a query asked for (all when it named none);
// InvalidArgument naming an unknown one.
StatusOr<std::vector<bool>> SelectOutputs(const ModelConfig& config, const std::string& label,
                                          const std::vector<RequestedOutput>& requested);

}  // namespace somm
