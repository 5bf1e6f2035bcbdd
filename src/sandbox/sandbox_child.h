// The child side of ProcessModelSandbox (process_sandbox.h):
// `somm model-sandbox probe|variants REQUEST` (sandbox_wire.h) runs one
// probe or one variant job through the backend of the model's platform
// (from `backends`) and answers with JSON lines.
// The server starts it already confined (confinement.h); it is not a user
// command (docs/hostile-input.md describes it).
//
// Its standard output is the answer: the first thing it does is keep a copy
// of it and point standard output at standard error, so whatever the model
// prints (TorchScript's print()) lands in the log, never in the answer. An
// allocation that fails anywhere (libtorch's, std::bad_alloc) is answered
// with out_of_memory set. Exit status 0 whenever an answer was written, 2
// for a malformed command line.
//
// Thread-safety: call once, from main().
#pragma once

#include <string>
#include <vector>

#include "runtime/backend_set.h"

namespace somm {

// args: what follows `model-sandbox` (the operation and its request).
int RunModelSandboxChild(const std::vector<std::string>& args, const BackendSet& backends);

}  // namespace somm
