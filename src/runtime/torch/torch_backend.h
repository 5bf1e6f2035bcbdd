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

#include "common/duty_cycle_pacer.h"
#include "runtime/backend.h"
#include "runtime/torch/torch_threads.h"

namespace somm {

struct TorchBackendOptions {
  // Runs this many executions of a batch-of-one at load, so that TorchScript's
  // profiling executor has specialised the graph before the first query.
  int warmup_runs = 2;
  // Load() and the destruction of a loaded model run on background threads
  // set up per this (torch_threads.h): the lowest CPU priority, one intra-op
  // thread.
  BackgroundThreadOptions background;
  // After a model is destroyed, give the heap's free memory back to the
  // system (common/host_probe.h, ReleaseFreeMemory). Over 1,000 load/unload
  // cycles of digits-cnn from a client that opens a connection per call, RSS
  // grew by 11% without it and by 7% with it (docs/isolation.md).
  bool release_memory_on_unload = true;
  // Every load and unload records the CPU time it used here
  // (common/duty_cycle_pacer.h). The backend never waits on it: whoever
  // starts a background load waits first, outside its own locks
  // (worker/worker.h, with the same pacer). Null: nothing recorded.
  std::shared_ptr<DutyCyclePacer> background_pacer;
};

std::unique_ptr<Backend> CreateTorchBackend(TorchBackendOptions options = {});

}  // namespace somm
