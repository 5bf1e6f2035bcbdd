// somm serve, worker, router and controller: each runs a node (src/node/)
// with the options apps/somm_main.cc parsed its flags into.
#include "cli/commands.h"
#include "node/controller_node.h"
#include "node/node_parts.h"
#include "node/router_node.h"
#include "node/serve_node.h"
#include "node/worker_node.h"

namespace somm {
namespace {

// A cluster node checks its flags before it starts (--check-args stops
// there), then runs in this process.
template <typename Options, typename Check, typename Run>
int RunClusterNode(const char* command, const Options& o, Check check, Run run) {
  if (const Status checked = check(o); !checked.ok() || o.check_args) {
    return node::ReportArgs(command, checked);
  }
  return run(o, node::SetUpProcess(o.log_level, o.log_format));
}

}  // namespace

int RunServe(const ServeOptions& o) {
  // A start makes these checks itself as it goes, its guard's warnings in
  // its log: --check-args runs them alone.
  if (o.check_args) return node::ReportArgs("serve", node::CheckServeArgs(o));
  return node::RunServeNode(o, node::SetUpProcess(o.log_level, o.log_format));
}

int RunWorker(const WorkerProcessOptions& o) {
  return RunClusterNode("worker", o, node::CheckWorkerArgs, node::RunWorkerNode);
}

int RunRouter(const RouterProcessOptions& o) {
  return RunClusterNode("router", o, node::CheckRouterArgs, node::RunRouterNode);
}

int RunController(const ControllerProcessOptions& o) {
  return RunClusterNode("controller", o, node::CheckControllerArgs, node::RunControllerNode);
}

}  // namespace somm
