// somm worker, somm router and somm controller: the processes of a cluster
// (docs/cluster.md). Each checks its flags, sets the process up (logging to
// stderr, the stop signals) and runs its node (src/node/).
#include <signal.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdio>

#include "cli/commands.h"
#include "node/controller_node.h"
#include "node/router_node.h"
#include "node/worker_node.h"

namespace somm {
namespace {

// Logs to stderr (stdout carries the banner), and the stop signals blocked
// in every thread so that only sigwait sees them.
sigset_t SetUpProcess(const std::string& log_level) {
  spdlog::set_default_logger(spdlog::stderr_color_mt("somm"));
  spdlog::set_level(spdlog::level::from_str(log_level));
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  signal(SIGPIPE, SIG_IGN);
  return stop;
}

const char* WaitForStop(sigset_t* stop) {
  int signal_number = 0;
  sigwait(stop, &signal_number);
  return signal_number == SIGTERM ? "SIGTERM" : "SIGINT";
}

// Prints the verdict of --check-args; true when the process should stop
// here (the check was asked for, or failed).
bool ReportArgs(const char* command, const Status& checked, bool check_only) {
  if (!checked.ok()) {
    std::fprintf(stderr, "somm %s: %s\n", command, checked.message().c_str());
    return true;
  }
  if (check_only) std::printf("ok\n");
  return check_only;
}

// The process as a node sees it: sigwait for the stop signals, and SIGTERM
// to itself to ask for a stop.
node::NodeProcess ThisProcess(sigset_t* stop) {
  node::NodeProcess p;
  p.wait_for_stop = [stop] { return WaitForStop(stop); };
  p.request_stop = [] { kill(getpid(), SIGTERM); };
  return p;
}

// Checks the flags (--check-args stops there), sets the process up and runs
// the node.
template <typename Options, typename Check, typename Run>
int RunNode(const char* command, const Options& o, Check check, Run run) {
  if (const Status checked = check(o); ReportArgs(command, checked, o.check_args)) {
    return checked.ok() ? 0 : 2;
  }
  sigset_t stop = SetUpProcess(o.log_level);
  return run(o, ThisProcess(&stop));
}

}  // namespace

int RunWorker(const WorkerProcessOptions& o) {
  return RunNode("worker", o, node::CheckWorkerArgs, node::RunWorkerNode);
}

int RunRouter(const RouterProcessOptions& o) {
  return RunNode("router", o, node::CheckRouterArgs, node::RunRouterNode);
}

int RunController(const ControllerProcessOptions& o) {
  return RunNode("controller", o, node::CheckControllerArgs, node::RunControllerNode);
}

}  // namespace somm
