#include "cli/model_sandbox_command.h"

#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "runtime/torch/torch_backend.h"
#include "sandbox/sandbox_child.h"

namespace somm {

void RunModelSandboxCommand(int argc, char** argv) {
  std::vector<std::string> args(argv + 2, argv + argc);
  int code = 2;
  {
    auto backend = CreateTorchBackend();
    code = RunModelSandboxChild(args, *backend);
  }
  std::fflush(nullptr);
  _exit(code);
}

}  // namespace somm
