// RouterNode: `somm router` assembled from its parts (keys and tenants, the catalog follower, the workers' pool and the leader's control client, the router, batch jobs, the REST and gRPC frontends, its metrics port). It runs until
// the process tells it to stop (NodeProcess), then drains and returns the
// process's exit code; cli/ parses the flags and sets the process up.
#pragma once

#include "common/status.h"
#include "node/node_options.h"
#include "node/node_parts.h"

namespace somm::node {

// The checks a start makes of its flags before anything listens or loads
// (--check-args runs them alone: deploy/'s manifests are checked with them).
Status CheckRouterArgs(const RouterProcessOptions& options);
int RunRouterNode(const RouterProcessOptions& options, const NodeProcess& process);

}  // namespace somm::node
