#include "server_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "cluster_process.h"

namespace somm::testing {
namespace {

// Which cluster process takes each `somm serve` flag a test may pass.
struct Takers {
  bool router = false, controller = false, worker = false;
};
const std::map<std::string, Takers>& ServeFlags() {
  static const std::map<std::string, Takers> flags = {
      {"--max-body-bytes", {true, false, false}},
      {"--explain", {true, false, false}},
      {"--http-threads", {true, false, false}},
      // The router's selector and the controller must agree on static
      // provisioning (loaded variants only) or the managed runtime.
      {"--managed", {true, true, false}},
      {"--control-tick-ms", {false, true, false}},
      {"--idle-unload-s", {false, true, false}},
      {"--memory-budget-mb", {false, false, true}},
      {"--background-duty", {false, false, true}},
      {"--device", {true, true, true}},
      {"--log-level", {true, true, true}},
      {"--log-format", {true, true, true}},
      {"--exit-timeout-secs", {true, true, true}},
      // Keys are checked where calls come in: the router.
      {"--auth", {true, false, false}},
      // The leader controller watches the shared repository and loads the
      // --load-model ones; the router refuses load and unload but under
      // explicit.
      {"--model-control-mode", {true, true, false}},
      {"--load-model", {false, true, false}},
      {"--repository-poll-secs", {false, true, false}},
      // A router probes registrations; the leader runs their variant jobs.
      {"--registration-cpu-s", {true, false, false}},
      {"--registration-timeout-s", {true, false, false}},
      {"--registration-memory-mb", {true, true, false}},
      {"--variants-cpu-s", {false, true, false}},
      {"--variants-timeout-s", {false, true, false}},
  };
  return flags;
}

// Splits `somm serve` flags (each "--flag value") among the cluster's
// processes; false (with *error) for a flag none of them takes.
bool ClusterArgs(const std::vector<std::string>& serve_args, ClusterOptions* o,
                 std::string* error) {
  for (size_t i = 0; i < serve_args.size(); i += 2) {
    const std::string& flag = serve_args[i];
    if (i + 1 >= serve_args.size()) {
      *error = "serve flag " + flag + " has no value";
      return false;
    }
    const std::string& value = serve_args[i + 1];
    // A cluster generates variants only for registered models, as `serve
    // --auto-variants false` does.
    if (flag == "--auto-variants" && value == "false") continue;
    auto it = ServeFlags().find(flag);
    if (it == ServeFlags().end()) {
      *error = "no cluster process takes the serve flag " + flag + " " + value;
      return false;
    }
    if (it->second.router) o->router_args.insert(o->router_args.end(), {flag, value});
    if (it->second.controller) o->controller_args.insert(o->controller_args.end(), {flag, value});
    if (it->second.worker) o->worker_args.insert(o->worker_args.end(), {flag, value});
  }
  return true;
}

}  // namespace

Topology TopologyFromEnvironment() {
  const char* env = std::getenv("SOMM_E2E_TOPOLOGY");
  return env && std::string(env) == "cluster" ? Topology::kCluster : Topology::kEmbedded;
}

ServerProcess::ServerProcess(const std::string& binary, const std::string& repo,
                             const std::vector<std::string>& extra_args)
    : ServerProcess(binary, repo, extra_args, TopologyFromEnvironment()) {}

ServerProcess::ServerProcess(const std::string& binary, const std::string& repo,
                             const std::vector<std::string>& extra_args, Topology topology)
    : topology_(topology) {
  if (topology == Topology::kCluster) {
    StartCluster(binary, repo, extra_args);
  } else {
    StartServe(binary, repo, extra_args);
  }
}

void ServerProcess::StartCluster(const std::string& binary, const std::string& repo,
                                 const std::vector<std::string>& extra_args) {
  ClusterOptions o;
  o.workers = 2;
  // These suites test serving, not failure detection (cluster_e2e_test's
  // short leases do that): leases long enough that a loaded CI machine, or
  // the leader busy profiling a registration's variants, never lets one
  // lapse in the middle of a test.
  o.leader_lease_ms = 10000;
  o.lease_ms = 10000;
  // The repository may start empty (the model-less scenario registers
  // every model): then ready means the workers registered.
  std::error_code ec;
  o.wait_for_model = false;
  for (const auto& e : std::filesystem::directory_iterator(repo, ec)) {
    if (e.is_directory() && e.path().filename().string()[0] != '.') o.wait_for_model = true;
  }
  std::string error;
  if (!ClusterArgs(extra_args, &o, &error)) {
    std::fprintf(stderr, "ServerProcess: %s\n", error.c_str());
    return;
  }
  cluster_ = std::make_unique<ClusterProcesses>(binary, repo, o);
  log_path_ = cluster_->LogDir();
  if (!cluster_->ok()) {
    std::fprintf(stderr, "ServerProcess: the cluster did not start: %s\n%s\n",
                 cluster_->error().c_str(), cluster_->Logs().c_str());
    return;
  }
  const auto& router = cluster_->routers().front();
  http_port_ = router.http_port;
  grpc_port_ = router.grpc_port;
  metrics_port_ = router.metrics_port;
}

std::string ServerProcess::Logs() const {
  if (cluster_) return cluster_->Logs();
  std::ifstream in(log_path_);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

pid_t ServerProcess::pid() const {
  if (cluster_) return cluster_->routers().empty() ? -1 : cluster_->routers().front().pid;
  return pid_;
}

void ServerProcess::StartServe(const std::string& binary, const std::string& repo,
                               const std::vector<std::string>& extra_args) {
  // The system's temporary directory (TMPDIR or its default), not a fixed path.
  std::string tmpl = (std::filesystem::temp_directory_path() / "somm_e2e_log_XXXXXX").string();
  const int log_fd = mkstemp(tmpl.data());
  log_path_ = tmpl;
  int out[2];
  if (pipe(out) != 0) return;
  std::vector<std::string> args = {binary, "serve", "--model-repository", repo,
                                   "--http-port", "0", "--grpc-port", "0",
                                   "--metrics-port", "0", "--address", "127.0.0.1"};
  // Registered models still get variants; most tests need none for the
  // repository's own models, and one that does passes --auto-variants true.
  if (std::find(extra_args.begin(), extra_args.end(), "--auto-variants") == extra_args.end()) {
    args.insert(args.end(), {"--auto-variants", "false"});
  }
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  // The suites check the decision's facts one parameter each; the default
  // form (compact) has tests of its own (rest_e2e_test.cc).
  if (std::find(extra_args.begin(), extra_args.end(), "--explain") == extra_args.end()) {
    args.insert(args.end(), {"--explain", "full"});
  }
  // The suites load and unload through the repository API, which Triton's
  // default mode (none) refuses: explicit, with every model loaded at start,
  // unless a test names a mode (model_control_e2e_test.cc tests each).
  if (std::find(extra_args.begin(), extra_args.end(), "--model-control-mode") ==
      extra_args.end()) {
    args.insert(args.end(), {"--model-control-mode", "explicit", "--load-model", "*"});
  }
  pid_ = fork();
  if (pid_ == 0) {
    dup2(out[1], STDOUT_FILENO);
    dup2(log_fd, STDERR_FILENO);
    close(out[0]);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(binary.c_str(), argv.data());
    _exit(127);
  }
  close(out[1]);
  close(log_fd);
  // Read the first line, with a deadline.
  fcntl(out[0], F_SETFL, O_NONBLOCK);
  std::string line;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (std::chrono::steady_clock::now() < deadline && line.find('\n') == std::string::npos) {
    char buf[256];
    const ssize_t n = read(out[0], buf, sizeof(buf));
    if (n > 0) {
      line.append(buf, static_cast<size_t>(n));
    } else if (n == 0) {
      break;  // the server exited
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  // Keep draining stdout in the background so the server never blocks on it.
  std::thread([fd = out[0]] {
    fcntl(fd, F_SETFL, 0);
    char buf[4096];
    while (read(fd, buf, sizeof(buf)) > 0) {
    }
    close(fd);
  }).detach();
  std::sscanf(line.c_str(), "somm: listening http=%d grpc=%d metrics=%d", &http_port_,
              &grpc_port_, &metrics_port_);
}

int ServerProcess::Terminate(int timeout_s) {
  if (cluster_) return cluster_->Terminate(timeout_s);
  if (pid_ <= 0) return -1;
  kill(pid_, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return -1;
}

ServerProcess::~ServerProcess() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
}

}  // namespace somm::testing
