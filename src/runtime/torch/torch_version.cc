#include "runtime/torch/torch_version.h"

#include <torch/version.h>

namespace somm {

std::string LibtorchVersion() { return TORCH_VERSION; }

}  // namespace somm
