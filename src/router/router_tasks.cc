// Router: task discovery (api/task_description.h). Kept apart from
// router.cc, which is the query path; both read the same registry, so a
// router of a cluster describes what the leader's catalog publishes.
#include <algorithm>

#include "registry/task_catalog.h"
#include "router/router.h"

namespace somm {
namespace {

std::vector<VersionPtr> Visible(std::vector<VersionPtr> versions, const Caller& caller) {
  std::erase_if(versions,
                [&](const VersionPtr& v) { return !caller.MayUse(v->config.owner_tenant); });
  return versions;
}

}  // namespace

std::vector<TaskDescription> Router::ListTasks(const Caller& caller) const {
  return DescribeTasks(Visible(catalog_.All(), caller));
}

StatusOr<TaskDescription> Router::DescribeTask(const std::string& task,
                                               const Caller& caller) const {
  std::vector<VersionPtr> versions = Visible(catalog_.All(), caller);
  std::erase_if(versions, [&](const VersionPtr& v) { return v->config.task != task; });
  std::vector<TaskDescription> described = DescribeTasks(versions);
  if (described.empty()) return NotFound("no loaded model serves task '" + task + "'");
  return std::move(described.front());
}

}  // namespace somm
