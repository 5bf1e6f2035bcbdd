#include "cli/version_command.h"

#include "runtime/torch/torch_version.h"

namespace somm {

std::string VersionText(const std::string& version, const std::string& commit) {
  return "somm " + version + "\ncommit " + (commit.empty() ? "unknown" : commit) +
         "\nlibtorch " + LibtorchVersion();
}

}  // namespace somm
