// How `somm serve` and `somm router` set up offline batch jobs: where jobs
// keep their state and where they may read and write (batch/batch_paths.h),
// and the audit log they report to through the guard.
#pragma once

#include <memory>
#include <string>

#include "auth/guard.h"
#include "batch/batch_jobs.h"
#include "cli/commands.h"

namespace somm {

// `state_dir`: the process's own folder (<repo>/.somm, or a router's
// --state-dir); jobs' state goes to <state_dir>/batch[/<sub>], and the batch
// root defaults to <state_dir>/batch-files. `repository` "" = none mounted.
StatusOr<BatchJobs::Options> BatchSetup(const BatchRootFlags& flags, const std::string& state_dir,
                                        const std::string& sub, const std::string& repository,
                                        auth::Guard* guard);

}  // namespace somm
