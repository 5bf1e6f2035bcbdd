// WorkerNode: `somm worker` assembled from its parts (the libtorch backend, its instances, its worker service for routers and the controller, its heartbeats into Redis, its metrics port). It runs until
// the process tells it to stop (NodeProcess), then drains and returns the
// process's exit code; cli/ parses the flags and sets the process up.
#pragma once

#include "common/status.h"
#include "node/node_options.h"
#include "node/node_parts.h"

namespace somm::node {

// The checks a start makes of its flags before anything listens or loads
// (--check-args runs them alone: deploy/'s manifests are checked with them).
Status CheckWorkerArgs(const WorkerProcessOptions& options);
int RunWorkerNode(const WorkerProcessOptions& options, const NodeProcess& process);

}  // namespace somm::node
