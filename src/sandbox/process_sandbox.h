// ProcessModelSandbox: a ModelSandbox (model_sandbox.h) that runs each probe
// and each variant job in a child process of the somm binary
// (`somm model-sandbox ...`, sandbox_child.h), off the caller's process:
//
//   * the child is its own session and process group, gets /dev/null and two
//     pipes as its only descriptors, a fresh environment (PATH, HOME and
//     TMPDIR in a temporary folder of its own that is removed after it,
//     OMP_WAIT_POLICY, and the library paths and thread counts the server
//     was started with; the folders a killed server left are removed when
//     the next sandbox is made), and is confined as confinement.h says, with the
//     CPU-time and memory limits of its kind (probe or variant job);
//   * the caller's thread waits for it, reads its answer (at most
//     max_answer_bytes; stderr's last 16 KiB are kept for the log), and
//     kills its whole process group with SIGKILL at the wall-clock limit, on
//     cancellation or at Shutdown(). It also dies with the server
//     (PR_SET_PDEATHSIG).
//
// How a child that did not answer is reported, `what` being "the model's
// probe" or "variant generation" (the registry adds "registration of 'm'
// refused: "):
//   killed by SIGXCPU, or by the kernel past its CPU limit
//                      -> "<what> ran past its 30 s CPU limit"
//   our wall-clock kill -> "<what> did not finish within its 120 s time limit"
//   an allocation that failed (answered, or in its last words), or any end
//   without an answer with its memory (VmData, sampled as it runs, or peak
//   resident) past 3/4 of the limit: an allocator may retry for ever
//   (OpenBLAS does) or crash on the null it got
//                      -> "<what> used more than its 4096 MiB memory limit"
//   any other death    -> "<what> crashed (signal 11: Segmentation fault)"
// A probe's failures are the model's: every one is INVALID_ARGUMENT. The
// sandbox's own failures (no binary, no fork) and Shutdown() are
// UNAVAILABLE.
//
// Thread-safety: every method may be called from any thread, concurrently;
// each call runs its own child. Lock: mu_ guards the set of live children
// (held while forking, so that Shutdown() never misses one).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "sandbox/confinement.h"
#include "sandbox/model_sandbox.h"

namespace somm {

struct SandboxLimits {
  double cpu_seconds = 0;    // RLIMIT_CPU; 0 = none
  double wall_seconds = 0;   // killed past this; 0 = none
  int64_t memory_mb = 0;     // RLIMIT_DATA; 0 = none
};

struct ProcessSandboxOptions {
  // The somm binary; /proc/self/exe is the running server's (tests run
  // binaries that are not somm, and name it).
  std::string executable = "/proc/self/exe";
  // The registration's probe: a resnet18's load and run take 1-2 s of CPU
  // and 250 MiB above libtorch's own 150 MiB (docs/hostile-input.md).
  SandboxLimits probe{60, 120, 4096};
  // A variant job: builds, profiles on every hardware config, runs Python
  // for int8 (a resnet18 on two configs: about a minute).
  SandboxLimits variants{3600, 3600, 4096};
  bool namespaces = true;  // user and network namespaces where allowed
  bool seccomp = true;
  size_t max_answer_bytes = 1 << 20;
};

class ProcessModelSandbox : public ModelSandbox {
 public:
  explicit ProcessModelSandbox(ProcessSandboxOptions options);
  ~ProcessModelSandbox() override;  // Shutdown()

  std::string Describe() const override;
  StatusOr<ProbeReport> Probe(const ProbeRequest& request) override;
  StatusOr<VariantSet> GenerateVariants(
      const VariantJobRequest& request,
      std::function<void(const VariantProgress&)> progress) override;
  void Shutdown() override;

  // What the last child reported applied (DescribeConfinement()), for
  // tests and the log; "" before the first.
  std::string LastConfinement() const;

 private:
  struct Outcome;
  // Runs `<executable> model-sandbox <op> <request>` under `limits` to its
  // end; progress lines go to `progress`.
  Outcome Run(const std::string& op, const std::string& request, const SandboxLimits& limits,
              mode_t umask, const std::function<void(const VariantProgress&)>& progress,
              const std::function<bool()>& cancelled);
  Status Judge(const Outcome& outcome, const std::string& what, const SandboxLimits& limits) const;

  const ProcessSandboxOptions options_;
  mutable Mutex mu_;
  bool stopping_ SOMM_GUARDED_BY(mu_) = false;
  std::set<pid_t> live_ SOMM_GUARDED_BY(mu_);
  std::string last_confinement_ SOMM_GUARDED_BY(mu_);
};

}  // namespace somm
