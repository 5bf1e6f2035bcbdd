// ControllerNode: `somm controller` assembled from its parts (the leader elector, the catalog publisher, the controller, the control service, the worker scaler and its provisioner, the repository poller, its metrics port). It runs until
// the process tells it to stop (NodeProcess), then drains and returns the
// process's exit code; cli/ parses the flags and sets the process up.
#pragma once

#include "common/status.h"
#include "node/node_options.h"
#include "node/node_parts.h"

namespace somm::node {

// The checks a start makes of its flags before anything listens or loads
// (--check-args runs them alone: deploy/'s manifests are checked with them).
Status CheckControllerArgs(const ControllerProcessOptions& options);
int RunControllerNode(const ControllerProcessOptions& options, const NodeProcess& process);

}  // namespace somm::node
