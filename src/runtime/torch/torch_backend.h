// The libtorch backend: loads TorchScript files and runs batches.
//
// This header is torch-free on purpose; only torch_backend.cc includes
// <torch/...> (about 10 s of compile per translation unit on 2 cores).
//
// CUDA: when the libtorch that the build found has CUDA, SOMM_WITH_CUDA is
// defined and CUDA devices are detected at run time; otherwise the backend
// offers the CPU alone. Exceptions from libtorch never leave this component:
// they become Status values naming the model and the problem.
#pragma once

#include <memory>

#include "runtime/backend.h"

namespace somm {

struct TorchBackendOptions {
  // Runs this many executions of a batch-of-one at load, so that TorchScript's
  // profiling executor has specialised the graph before the first query.
  int warmup_runs = 2;
};

std::unique_ptr<Backend> CreateTorchBackend(TorchBackendOptions options = {});

}  // namespace somm
