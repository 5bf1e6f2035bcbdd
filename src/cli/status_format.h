// `somm status`: the dashboard's overview as a terminal table (models,
// instances per worker, load, attainment, recent actions), formatted from
// the operator's JSON views (dashboard/operator_api.h). Pure: the command
// (status_command.cc) fetches, this formats, so the table is tested
// without a server.
#pragma once

#include <optional>
#include <string>

#include "common/status.h"

namespace somm {

struct StatusViews {
  std::string overview;  // GET /v2/somm/overview
  std::string workers;   // GET /v2/somm/workers
  std::string actions;   // GET /v2/somm/actions
};

struct StatusFormatOptions {
  std::string url;  // named in the heading
  // The overview of the previous refresh (--watch): the load line then
  // covers the time between the two; without it, the totals since start.
  std::optional<std::string> previous_overview;
  size_t actions = 8;  // newest actions listed
};

StatusOr<std::string> FormatStatus(const StatusViews& views, const StatusFormatOptions& options);

}  // namespace somm
