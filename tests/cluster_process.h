// ClusterProcesses: a real somm cluster on loopback for end-to-end tests: a
// redis-server, a controller, K workers and a router, each its own process
// (the built `somm worker|router|controller`), every port picked free. Each
// child dies with the test process (PR_SET_PDEATHSIG), so a crashed test
// leaves nothing behind.
#pragma once

#include <sys/types.h>

#include <chrono>
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
  // Worker j's own flags, after worker_args (e.g. its --zone).
  std::vector<std::vector<std::string>> worker_args_each;
  std::vector<std::string> router_args;
  // Ready means the routers list a READY model (the repository's models
  // loaded); false for an empty repository: then ready means every worker
  // registered and every router answers ready.
  bool wait_for_model = true;
  // A folder made by scripts/make-certs: every process gets --tls-cert,
  // --tls-key (its server.pem) and --tls-client-ca (ca.pem), so they talk
  // mutual TLS to each other, and the readiness probes go through curl with
  // client.pem. "" = see secure.
  std::string tls_dir;
  // Without tls_dir: the cluster's own traffic as scripts/cluster runs it by
  // default (docs/cluster.md). A CA and server.pem are made in the log folder
  // (scripts/make-certs); controllers and workers serve mutual TLS and their
  // /metrics over TLS; routers dial them with --cluster-tls-* and keep their
  // own ports plaintext on loopback. Redis has a random password, which every
  // process reads from SOMM_REDIS_PASSWORD_FILE. false = all plaintext, no
  // password. With tls_dir, Redis has the password too.
  bool secure = true;
};

class ClusterProcesses {
 public:
  // Starts everything and waits (bounded) until the router answers ready
  // and the controller has loaded the repository; ok() says whether it did.
  ClusterProcesses(const std::string& binary, const std::string& repo, ClusterOptions options = {});
  // SIGKILLs whatever still runs and removes the logs (kept when
  // SOMM_E2E_KEEP_LOGS is set).
  ~ClusterProcesses();

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
    int metrics_port = -1;
  };
  const std::vector<Router>& routers() const { return routers_; }
  const std::vector<pid_t>& controllers() const { return controllers_; }
  // The body of GET /metrics on a port of this cluster (over TLS with the
  // cluster's CA where that port serves TLS), "" when none came.
  std::string Metrics(int port) const;
  // Controller c's /metrics port.
  int controller_metrics_port(size_t c) const {
    return c < controller_metrics_ports_.size() ? controller_metrics_ports_[c] : -1;
  }
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
  // The folder that holds every process's stdout and stderr.
  const std::string& LogDir() const { return dir_; }
  // Stops the cluster front to back, as an operator would: SIGTERM to the
  // routers (they finish the queries in flight), then the workers (they
  // drain), the controllers and redis-server, each waited for (bounded).
  // Returns router 0's exit status (-1 on timeout or an abnormal end).
  int Terminate(int timeout_s = 60);

 private:
  pid_t Spawn(const std::vector<std::string>& args, const std::string& name);
  // SIGTERMs `pid` and waits for it; its exit status, -1 on timeout.
  int Stop(pid_t pid, std::chrono::steady_clock::time_point deadline);
  bool StartRedis();
  std::string Redis(const std::string& command) const;
  std::string dir_;
  // Where the cluster's CA and certificates are; "" when plaintext.
  std::string certs_;
  // Ports that serve TLS (the secure cluster's controllers' and workers').
  std::vector<int> tls_ports_;
  // Redis's password ("" = none) and the file the processes read it from.
  std::string redis_password_;
  std::string redis_password_file_;
  pid_t redis_pid_ = -1;
  std::vector<Router> routers_;
  std::vector<pid_t> controllers_;
  std::vector<int> controller_metrics_ports_;
  std::vector<pid_t> pids_;
  std::vector<std::string> names_;
  std::vector<Worker> workers_;
  int redis_port_ = -1;
  bool ok_ = false;
  std::string error_;
};

}  // namespace somm::testing
