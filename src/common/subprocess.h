// RunProcess: runs a helper program (the int8 quantisation tool) to
// completion and collects what it printed.
//
// No shell is involved: argv[0] is the program's path and the arguments are
// passed as they are, so model paths need no quoting. stdout and stderr are
// merged; the last 64 KiB are kept. Safe to call from any thread of a
// multi-threaded process (posix_spawn, not fork + arbitrary code).
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace somm {

struct ProcessResult {
  int exit_code = -1;  // 128 + signal number when the process was killed
  std::string output;  // stdout and stderr together
};

// Fails only when the program cannot be started; a non-zero exit is a
// result, not an error.
StatusOr<ProcessResult> RunProcess(const std::vector<std::string>& argv);

}  // namespace somm
