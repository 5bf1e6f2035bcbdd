// The dashboard on the REST port, as mounts for the REST frontend
// (frontend/http/rest_mount.h): the operator's views, GET /v2/somm/overview,
// /workers and /actions (operator_api.h), and the web dashboard's static
// files under /dashboard (static_files.h). Whoever assembles a process
// (node/, cli/) hands them to HttpFrontendOptions; the frontend includes
// nothing of the dashboard.
//
// Contract:
//   * OperatorViews answers the three views for the admitted caller: a
//     user's key (authenticated, not admin) sees only the models the guard
//     lets it see (CallGuard::MaySee), each model's owner looked up once per
//     view; an admin, or any caller without a guard, sees everything.
//     `server` and `guard` (null = no guard) must outlive the frontend.
//   * `metrics_text` is the process's Prometheus exposition (what /metrics
//     serves): the overview sums its counters, so that the dashboard shows
//     the very counters a scrape sees. Null = the overview has no counters.
//   * DashboardPages answers the static files on the I/O thread, without a
//     key (the pages hold no data; they call the views above).
//   * Thread-safe: the handlers may run on several threads at once.
#pragma once

#include <functional>
#include <string>

#include "frontend/http/rest_mount.h"
#include "serving/call_guard.h"
#include "api/operator_api.h"

namespace somm::dashboard {

RestMount OperatorViews(OperatorApi& server, CallGuard* guard,
                        std::function<std::string()> metrics_text);
PageMount DashboardPages();

}  // namespace somm::dashboard
