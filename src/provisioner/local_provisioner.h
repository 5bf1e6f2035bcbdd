// LocalProvisioner: starts and stops `somm worker` processes on this machine,
// as children of the controller that owns it (scripts/cluster --autoscale and
// the end-to-end tests use it). Each child gets PR_SET_PDEATHSIG(SIGTERM), so
// a controller that dies leaves its workers draining, not orphaned; the
// destructor drains every live child and waits for it (SIGKILL after
// stop_grace).
//
// PR_SET_PDEATHSIG follows the thread that forked, not the process: Start()
// must be called from a thread that lives as long as the workers should (the
// controller's scaler thread, which stops only at shutdown).
//
// Only workers this provisioner started are Removable(). A child's stdout and
// stderr go to <log_dir>/<id>.log, or to the controller's own when no
// log_dir is given; its exit is logged with its status.
//
// Thread-safety: none (the controller's loop is the only caller).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "provisioner/provisioner.h"

namespace somm {

struct LocalProvisionerOptions {
  // The somm binary; "" = this process's own executable (/proc/self/exe,
  // which still runs after a rebuild replaced the file).
  std::string binary;
  // Arguments after `somm worker` (repository, Redis, budget, leases...);
  // the provisioner adds --worker-id, --port and --metrics-port.
  std::vector<std::string> worker_args;
  // Worker k (from 0) is named id_prefix + k.
  std::string id_prefix = "local-worker-";
  // Worker k listens on base_port + 10k (service) and + 1 (metrics);
  // 0 = ports picked by the worker.
  int base_port = 0;
  // Where the children's output goes; "" = the controller's stdout and
  // stderr (each worker's lines name it).
  std::string log_dir;
  // How long the destructor lets a draining child finish before SIGKILL.
  std::chrono::milliseconds stop_grace{std::chrono::seconds(30)};
  // After a child exits before it registered, Start() refuses for this
  // long (Unavailable) instead of forking a failing worker every tick.
  std::chrono::milliseconds failed_start_backoff{std::chrono::seconds(10)};
};

class LocalProvisioner : public Provisioner {
 public:
  explicit LocalProvisioner(LocalProvisionerOptions options);
  ~LocalProvisioner() override;  // drains every live child
  LocalProvisioner(const LocalProvisioner&) = delete;
  LocalProvisioner& operator=(const LocalProvisioner&) = delete;

  std::string name() const override { return "local"; }
  Status Start(int count) override;
  Status Stop(const std::string& id) override;
  StatusOr<int> Pending(const std::set<std::string>& registered) override;
  std::set<std::string> Removable(const std::set<std::string>& registered) override;

  // The pid of a live child; -1 when none has that id.
  pid_t PidOf(const std::string& id) const;

 private:
  struct Child {
    pid_t pid = -1;
    bool registered_once = false;
    bool stopping = false;
  };
  // Collects the children that exited, logging each one's status.
  void Reap();

  const LocalProvisionerOptions options_;
  std::string binary_;  // what is executed
  std::string argv0_;   // what the child is called
  int next_ = 0;
  std::map<std::string, Child> children_;
  std::chrono::steady_clock::time_point retry_after_{};
  std::string last_failure_;
};

}  // namespace somm
