// Process environment defaults that must be in place before main().
//
// Some libraries read their settings from the environment while the dynamic
// loader initialises them, before main() runs. libgomp (the OpenMP runtime
// under Debian's libtorch) is one: it reads OMP_WAIT_POLICY in a library
// constructor, so a setenv() in main() comes too late. The only way for a
// program to choose such a setting itself is to put it in its environment and
// exec itself again, which is what ReexecWithProcessEnvDefaults() does.
//
// The default somm sets:
//   OMP_WAIT_POLICY=PASSIVE  idle OpenMP workers sleep instead of spinning.
//     libgomp's default lets every worker of every intra-op team spin for a
//     while (300,000 polls) after each parallel region. A server runs one team
//     per model instance, each driven by its own batcher thread, so spinning
//     workers of one model steal the cores another model computes on; on a
//     2-core machine resnet18 was seen more than 10x slower with other models
//     loaded (docs/isolation.md has the figures).
// A value the user set is always kept (OMP_WAIT_POLICY=ACTIVE restores
// spinning).
//
// Loops: the re-executed process carries SOMM_ENV_REEXEC=1; seeing it, it
// removes it (so that children of somm never inherit it) and never execs
// again, even if the defaults are somehow still missing. It also renames
// itself after argv[0], since executing /proc/self/exe names a process "exe".
//
// Thread-safety: call from main() before any other thread exists (setenv and
// exec are not thread-safe).
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace somm {

struct EnvSetting {
  std::string name;
  std::string value;
  bool operator==(const EnvSetting&) const = default;
};

// The defaults above that `getenv` does not have. Pure; tests pass a fake.
std::vector<EnvSetting> MissingProcessEnvDefaults(
    const std::function<const char*(const char*)>& getenv);

// Sets the missing defaults and execs /proc/self/exe with `argv` (the same
// program and arguments; it does not return then). Returns when nothing is
// missing, when this process is itself the re-executed one, or when the exec
// fails (a warning on stderr; the process goes on without the defaults).
void ReexecWithProcessEnvDefaults(char** argv);

}  // namespace somm
