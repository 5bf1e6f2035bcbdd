// The model sandbox as the server processes use it (sandbox/): the limits
// their flags set, and the child's side, `somm model-sandbox`.
//
// `somm model-sandbox probe|variants REQUEST` is started by a server only
// (sandbox/process_sandbox.h starts it confined); it is left out of
// `somm --help` and README's table, and docs/security.md describes it.
#pragma once

#include <memory>

#include "cli/commands.h"
#include "sandbox/model_sandbox.h"

namespace somm {

// The sandbox a server's registry runs registrations in: a confined child
// of this binary under `limits`. Logs what confinement applies here.
std::shared_ptr<ModelSandbox> MakeRegistrationSandbox(const RegistrationLimitFlags& limits);

// `somm model-sandbox ...` (argv[1] is "model-sandbox"): runs the request
// with the libtorch backend and exits, skipping static destructors.
[[noreturn]] void RunModelSandboxCommand(int argc, char** argv);

}  // namespace somm
