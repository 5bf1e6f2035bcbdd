#include "provisioner/local_provisioner.h"

#include <fcntl.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <thread>

namespace somm {
namespace {

// The running binary itself, even once its file has been replaced (a
// rebuild): exec of its path would then fail, or start another version.
constexpr char kSelf[] = "/proc/self/exe";

// What the children's argv[0] says (ps shows it): this binary's path.
std::string SelfName() {
  std::error_code ec;
  std::string p = std::filesystem::read_symlink(kSelf, ec).string();
  const std::string deleted = " (deleted)";
  if (p.size() > deleted.size() &&
      p.compare(p.size() - deleted.size(), deleted.size(), deleted) == 0) {
    p.resize(p.size() - deleted.size());
  }
  return ec || p.empty() ? "somm" : p;
}

std::string Describe(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "was killed by signal " + std::to_string(WTERMSIG(status));
  return "stopped (" + std::to_string(status) + ")";
}

}  // namespace

LocalProvisioner::LocalProvisioner(LocalProvisionerOptions options) : options_(std::move(options)) {
  binary_ = options_.binary.empty() ? kSelf : options_.binary;
  argv0_ = options_.binary.empty() ? SelfName() : options_.binary;
  if (!options_.log_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(options_.log_dir, ec);
  }
}

LocalProvisioner::~LocalProvisioner() {
  for (auto& [id, child] : children_) {
    if (!child.stopping) kill(child.pid, SIGTERM);
  }
  const auto give_up = std::chrono::steady_clock::now() + options_.stop_grace;
  while (!children_.empty() && std::chrono::steady_clock::now() < give_up) {
    Reap();
    if (!children_.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  for (auto& [id, child] : children_) {
    spdlog::warn("local provisioner: worker {} did not drain within {} ms; killing it", id,
                 options_.stop_grace.count());
    kill(child.pid, SIGKILL);
    waitpid(child.pid, nullptr, 0);
  }
}

Status LocalProvisioner::Start(int count) {
  Reap();
  if (std::chrono::steady_clock::now() < retry_after_) {
    return Unavailable("local provisioner: a worker exited before it registered (" + last_failure_ +
                       "); not starting another yet");
  }
  for (int i = 0; i < count; ++i) {
    const int k = next_++;
    const std::string id = options_.id_prefix + std::to_string(k);
    const int port = options_.base_port > 0 ? options_.base_port + 10 * k : 0;
    const int metrics_port = options_.base_port > 0 ? port + 1 : 0;
    std::vector<std::string> args = {argv0_, "worker"};
    args.insert(args.end(), options_.worker_args.begin(), options_.worker_args.end());
    for (const std::string& a :
         {std::string("--worker-id"), id, std::string("--port"), std::to_string(port),
          std::string("--metrics-port"), std::to_string(metrics_port)}) {
      args.push_back(a);
    }
    const std::string log = options_.log_dir.empty() ? "" : options_.log_dir + "/" + id + ".log";
    // Everything the child needs is built before fork: a multi-threaded
    // parent's child may only make async-signal-safe calls before exec.
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const pid_t parent = getpid();
    const pid_t pid = fork();
    if (pid < 0) return Internal("local provisioner: fork: " + std::string(std::strerror(errno)));
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (getppid() != parent) _exit(127);  // the controller died before prctl
      // The controller blocks SIGTERM and SIGINT in every thread (it sigwaits
      // for them); the worker does its own, from a clean mask.
      sigset_t none;
      sigemptyset(&none);
      sigprocmask(SIG_SETMASK, &none, nullptr);
      const int fd = log.empty() ? -1 : open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (fd >= 0) {
        dup2(fd, STDOUT_FILENO);
        dup2(fd, STDERR_FILENO);
        close(fd);
      }
      // The controller's own sockets (its listeners among them) must not
      // outlive it in a worker.
      for (int other = 3; other < 4096; ++other) close(other);
      execv(binary_.c_str(), argv.data());
      _exit(127);
    }
    children_[id] = Child{pid, false, false};
    spdlog::info("local provisioner: started worker {} (pid {}), output in {}", id, pid,
                 log.empty() ? "this process's log" : log);
  }
  return Status::Ok();
}

Status LocalProvisioner::Stop(const std::string& id) {
  Reap();
  auto it = children_.find(id);
  if (it == children_.end()) {
    return NotFound("local provisioner: worker '" + id + "' is not one of its children");
  }
  if (kill(it->second.pid, SIGTERM) != 0) {
    return Internal("local provisioner: SIGTERM to worker " + id + ": " + std::strerror(errno));
  }
  it->second.stopping = true;
  spdlog::info("local provisioner: worker {} (pid {}) asked to drain (SIGTERM)", id,
               it->second.pid);
  return Status::Ok();
}

void LocalProvisioner::Reap() {
  for (auto it = children_.begin(); it != children_.end();) {
    int status = 0;
    if (waitpid(it->second.pid, &status, WNOHANG) == it->second.pid) {
      const bool clean = WIFEXITED(status) && WEXITSTATUS(status) == 0;
      const std::string what = "local provisioner: worker " + it->first + " (pid " +
                               std::to_string(it->second.pid) + ") " + Describe(status);
      if (clean && it->second.stopping) {
        spdlog::info("{}", what);
      } else {
        spdlog::warn("{}", what);
      }
      if (!it->second.registered_once && !it->second.stopping) {
        // It never served: starting the same again at once would fail the
        // same way, every tick.
        last_failure_ = what;
        retry_after_ = std::chrono::steady_clock::now() + options_.failed_start_backoff;
      }
      it = children_.erase(it);
    } else {
      ++it;
    }
  }
}

StatusOr<int> LocalProvisioner::Pending(const std::set<std::string>& registered) {
  Reap();
  int pending = 0;
  for (auto& [id, child] : children_) {
    if (registered.count(id)) child.registered_once = true;
    if (!child.registered_once && !child.stopping) ++pending;
  }
  return pending;
}

std::set<std::string> LocalProvisioner::Removable(const std::set<std::string>& registered) {
  Reap();
  std::set<std::string> out;
  for (const auto& [id, child] : children_) {
    if (!child.stopping && registered.count(id)) out.insert(id);
  }
  return out;
}

pid_t LocalProvisioner::PidOf(const std::string& id) const {
  auto it = children_.find(id);
  return it == children_.end() ? -1 : it->second.pid;
}

}  // namespace somm
