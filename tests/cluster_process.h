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
  int http_port() const { return http_port_; }
  int grpc_port() const { return grpc_port_; }
  int redis_port() const { return redis_port_; }
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
  std::string dir_;
  std::vector<pid_t> pids_;
  std::vector<std::string> names_;
  std::vector<Worker> workers_;
  int http_port_ = -1, grpc_port_ = -1, redis_port_ = -1;
  bool ok_ = false;
  std::string error_;
};

}  // namespace somm::testing
