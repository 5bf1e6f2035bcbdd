// The libtorch this build was compiled against ("1.13.0"), for `somm
// --version`: runtime/torch is the one folder that includes <torch/...>.
#pragma once

#include <string>

namespace somm {

std::string LibtorchVersion();

}  // namespace somm
