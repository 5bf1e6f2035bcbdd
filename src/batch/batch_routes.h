// The offline batch jobs on the REST port, as a mount for the REST frontend
// (frontend/http/rest_mount.h): GET /v2/somm/batch lists the caller's jobs,
// POST submits one (the body is BatchJobSpecFromJson's), GET
// /v2/somm/batch/{id} reads one and POST .../cancel cancels it. Whoever
// assembles a process (node/, cli/) hands it to HttpFrontendOptions; the
// frontend includes nothing of batch/.
//
// Contract:
//   * The frontend has admitted the caller as an operator call; a
//     submission is admitted by `guard` once more, as a query of the model
//     or task it names (a tenant's job runs only what the tenant may
//     query), and given back at once (the items run at low priority,
//     outside the tenant's online quota). Null guard = no checks.
//   * `jobs` and `guard` must outlive the frontend. Thread-safe, as
//     BatchJobs is.
#pragma once

#include "batch/batch_jobs.h"
#include "frontend/http/rest_mount.h"
#include "serving/call_guard.h"

namespace somm {

RestMount BatchRoutes(BatchJobs& jobs, CallGuard* guard);

}  // namespace somm
