// How threads that run libtorch work are set up: the intra-op thread count
// of a serving thread, and background threads for loading and unloading.
//
// A model instance computes on its batcher thread with the model's
// intra_op_threads (BindIntraOpThreads). Loading a model (deserialising,
// optimising, warming up: ~0.25 s of CPU for resnet18) and tearing one down
// (10-30 ms) are background work: they run on a thread of their own
// (RunOnBackgroundThread) at the lowest CPU priority and with one intra-op
// thread, so that they take only the CPU the serving threads leave idle
// instead of competing with them on equal terms (docs/isolation.md). A load
// a query waits for (LoadOptions::urgent) runs at normal priority.
//
// This header is torch-free; torch_threads.cc includes ATen.
// Thread-safety: every function may be called from any thread, concurrently.
#pragma once

#include <chrono>
#include <functional>

namespace somm {

struct BackgroundThreadOptions {
  // SCHED_IDLE (Linux): the thread runs only when no normal thread wants the
  // core, and any normal thread that wakes up preempts it at once; a nice
  // value, even 19, only shrinks its share. Falls back to `nice` if refused.
  bool sched_idle = true;
  // Nice value when not SCHED_IDLE (0..19; 0 = the caller's priority).
  int nice = 19;
  // Intra-op threads of the background thread's own torch ops (OpenMP team
  // size, set for that thread alone).
  int intra_op_threads = 1;
};

// Runs `work` on a new thread named `name` (at most 15 characters), set up
// per `options`, and returns when it is done. The caller's thread only waits,
// so the work is as synchronous as a direct call (an exception it throws is
// rethrown here) but competes for the CPU at the background thread's
// priority. The OpenMP workers the thread starts inherit its priority and end
// with it. If no thread can be started, `work` runs on the caller's thread.
// Returns the CPU time `work` used on its thread (not the wall time, which
// on a busy machine is mostly a low-priority thread waiting for a core).
std::chrono::nanoseconds RunOnBackgroundThread(const BackgroundThreadOptions& options,
                                               const char* name,
                                               const std::function<void()>& work);

// Sets the number of intra-op threads the calling thread's torch ops use
// (at least 1). Calls after the first on a thread are cheap.
void BindIntraOpThreads(int n);

}  // namespace somm
