#include "cli/model_sandbox_command.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "runtime/torch/torch_backend.h"
#include "sandbox/process_sandbox.h"
#include "sandbox/sandbox_child.h"

namespace somm {

std::shared_ptr<ModelSandbox> MakeRegistrationSandbox(const RegistrationLimitFlags& limits) {
  ProcessSandboxOptions o;
  o.probe = {limits.cpu_s, limits.timeout_s, limits.memory_mb};
  o.variants = {limits.variants_cpu_s, limits.variants_timeout_s, limits.memory_mb};
  auto sandbox = std::make_shared<ProcessModelSandbox>(o);
  spdlog::info("registrations run the model's code in {}", sandbox->Describe());
  return sandbox;
}

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
