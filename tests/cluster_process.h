// ClusterProcesses: a real somm cluster on loopback for end-to-end tests: a
// redis-server, a controller, K workers and a router, each its own process
// (the built `somm worker|router|controller`), every port picked free. Each
// child dies with the test process (PR_SET_PDEATHSIG), so a crashed test
// leaves nothing behind.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace somm::testing {

struct ClusterOptions {
  int workers = 2;
  int routers = 1;
  int controllers = 1;       // the first takes the lease; the others stand by
  int leader_lease_ms = 1500;
  int lease_ms = 1500;      // workers' lease (heartbeat a third of it)
  std::vector<std::string> controller_args;
  std::vector<std::string> worker_args;
};

class ClusterProcesses {
 public:
  // Starts everything and waits (bounded) until the router answers ready
  // and the controller has loaded the repository; ok() says whether it did.
  ClusterProcesses(const std::string& binary, const std::string& repo, ClusterOptions options = {});
  ~ClusterProcesses();  // SIGKILLs whatever still runs

  bool ok() const { return ok_; }
  const std::string& error() const { return error_; }
  // Router 0's ports; routers() has every router's.
  int http_port() const { return routers_.empty() ? -1 : routers_[0].http_port; }
  int grpc_port() const { return routers_.empty() ? -1 : routers_[0].grpc_port; }
  int redis_port() const { return redis_port_; }
  struct Router {
    pid_t pid = -1;
    int http_port = -1;
    int grpc_port = -1;
  };
  const std::vector<Router>& routers() const { return routers_; }
  const std::vector<pid_t>& controllers() const { return controllers_; }
  // The lease holder's id ("controller-N"), "" when none holds it.
  std::string Leader() const;
  // SIGKILLs redis-server; RestartRedis() starts a new, empty one on the
  // same port and waits until it answers.
  void KillRedis();
  bool RestartRedis();
  struct Worker {
    pid_t pid = -1;
    std::string id;
    int port = -1;
  };
  const std::vector<Worker>& workers() const { return workers_; }
  // The ids in Redis's worker set now (what routing draws on).
  std::vector<std::string> RegisteredWorkers() const;
  // The logs of every process, concatenated (for failure messages).
  std::string Logs() const;

 private:
  pid_t Spawn(const std::vector<std::string>& args, const std::string& name);
  bool StartRedis();
  std::string Redis(const std::string& command) const;
  std::string dir_;
  pid_t redis_pid_ = -1;
  std::vector<Router> routers_;
  std::vector<pid_t> controllers_;
  std::vector<pid_t> pids_;
  std::vector<std::string> names_;
  std::vector<Worker> workers_;
  int redis_port_ = -1;
  bool ok_ = false;
  std::string error_;
};

}  // namespace somm::testing
