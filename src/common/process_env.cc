#include "common/process_env.h"

#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace somm {
namespace {

constexpr char kGuard[] = "SOMM_ENV_REEXEC";

}  // namespace

std::vector<EnvSetting> MissingProcessEnvDefaults(
    const std::function<const char*(const char*)>& getenv) {
  static const EnvSetting kDefaults[] = {{"OMP_WAIT_POLICY", "PASSIVE"}};
  std::vector<EnvSetting> missing;
  for (const EnvSetting& d : kDefaults) {
    if (getenv(d.name.c_str()) == nullptr) missing.push_back(d);
  }
  return missing;
}

void ReexecWithProcessEnvDefaults(char** argv) {
  if (std::getenv(kGuard) != nullptr) {
    unsetenv(kGuard);
    // Executing /proc/self/exe named the process "exe" (ps, top, pgrep).
    // Threads take the name of the thread that starts them, so it is enough
    // to rename this one before any other exists.
    const char* slash = std::strrchr(argv[0], '/');
    prctl(PR_SET_NAME, slash ? slash + 1 : argv[0], 0, 0, 0);
    return;
  }
  const std::vector<EnvSetting> missing =
      MissingProcessEnvDefaults([](const char* name) { return std::getenv(name); });
  if (missing.empty()) return;
  for (const EnvSetting& s : missing) setenv(s.name.c_str(), s.value.c_str(), /*overwrite=*/1);
  setenv(kGuard, "1", 1);
  execv("/proc/self/exe", argv);
  // Still here: the exec failed. Go on as we are; the defaults set above are
  // too late for libraries already initialised, so say which.
  const int err = errno;
  unsetenv(kGuard);
  std::string names;
  for (const EnvSetting& s : missing) names += (names.empty() ? "" : ", ") + s.name;
  std::fprintf(stderr,
               "somm: warning: cannot re-exec /proc/self/exe (%s) to apply %s; "
               "set it in the environment instead\n",
               std::strerror(err), names.c_str());
}

}  // namespace somm
