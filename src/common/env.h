// Env: the machine as a process sees it, behind one seam (as LevelDB's Env
// is): the clock, memory, CPU features, and running a helper program.
// Env::Default() is the real machine (Clock::Real(), common/host_probe.h,
// common/subprocess.h); a component that takes an Env (WorkerOptions::env)
// can be tested on a machine of the test's making.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/host_probe.h"
#include "common/status.h"
#include "common/subprocess.h"

namespace somm {

class Env {
 public:
  virtual ~Env() = default;
  virtual const Clock& clock() const = 0;
  // What the kernel could give new allocations without swapping; 0 unknown.
  virtual int64_t AvailableMemoryBytes() const = 0;
  // This process's resident set; -1 unknown.
  virtual int64_t ResidentBytes() const = 0;
  virtual CpuFeatures DetectCpuFeatures() const = 0;
  virtual StatusOr<ProcessResult> RunProcess(const std::vector<std::string>& argv) const = 0;

  // The real machine; lives forever.
  static const Env& Default();
};

}  // namespace somm
