#include "cli/model_sandbox_command.h"

#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "runtime/backend_set.h"
#include "sandbox/sandbox_child.h"

namespace somm {

void RunModelSandboxCommand(int argc, char** argv) {
  std::vector<std::string> args(argv + 2, argv + argc);
  int code = 2;
  {
    // The backend of the model's platform, made when the request names it.
    const BackendSet backends;
    code = RunModelSandboxChild(args, backends);
  }
  std::fflush(nullptr);
  _exit(code);
}

}  // namespace somm
