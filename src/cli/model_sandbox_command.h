// The child's side of the model sandbox (sandbox/): `somm model-sandbox`.
// The servers' side, MakeRegistrationSandbox, is in node/node_parts.h.
//
// `somm model-sandbox probe|variants REQUEST` is started by a server only
// (sandbox/process_sandbox.h starts it confined); it is left out of
// `somm --help` and README's table, and docs/hostile-input.md describes it.
#pragma once

namespace somm {

// `somm model-sandbox ...` (argv[1] is "model-sandbox"): runs the request
// with the libtorch backend and exits, skipping static destructors.
[[noreturn]] void RunModelSandboxCommand(int argc, char** argv);

}  // namespace somm
