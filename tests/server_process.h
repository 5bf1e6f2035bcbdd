// ServerProcess: what an end-to-end test talks to, on loopback, with every
// port picked free. Two topologies, chosen by the environment so that the
// same test binary runs against both (tests/CMakeLists.txt registers each
// suite twice):
//   * embedded (the default): the real `somm serve` binary; its ports come
//     from its first stdout line ("somm: listening http=N grpc=N metrics=N");
//   * cluster (SOMM_E2E_TOPOLOGY=cluster): a redis-server, one `somm
//     controller`, two `somm worker`s and one `somm router` on the same
//     repository (ClusterProcesses, cluster_process.h); the ports are the
//     router's, so a test sees what a client of a cluster sees.
// The `somm serve` flags a test passes go to the cluster process that takes
// them (ClusterArgs in server_process.cc); a flag no cluster process knows
// makes ok() false, so a test never runs against a cluster that ignored it.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

namespace somm::testing {

class ClusterProcesses;

enum class Topology { kEmbedded, kCluster };
// SOMM_E2E_TOPOLOGY: unset or "embedded", or "cluster".
Topology TopologyFromEnvironment();
inline bool IsClusterTopology() { return TopologyFromEnvironment() == Topology::kCluster; }

class ServerProcess {
 public:
  // Starts `binary serve --model-repository repo <extra_args>` (or the
  // cluster) and waits until it listens (or exits, or 120 s pass: then ok()
  // is false).
  ServerProcess(const std::string& binary, const std::string& repo,
                const std::vector<std::string>& extra_args = {});
  ServerProcess(const std::string& binary, const std::string& repo,
                const std::vector<std::string>& extra_args, Topology topology);
  ~ServerProcess();  // SIGKILLs whatever still runs

  bool ok() const { return http_port_ > 0; }
  Topology topology() const { return topology_; }
  int http_port() const { return http_port_; }
  int grpc_port() const { return grpc_port_; }
  int metrics_port() const { return metrics_port_; }
  // The serving process (`somm serve`, or the router).
  pid_t pid() const;
  // Where the logs are: a file (embedded) or a folder of them (cluster).
  const std::string& log() const { return log_path_; }
  // What every process of it has logged so far (a cluster's concatenated).
  std::string Logs() const;

  // Sends SIGTERM (a cluster: router, workers, controller, then redis) and
  // returns the serving process's exit status (-1 on timeout / abnormal end).
  int Terminate(int timeout_s = 60);

 private:
  void StartServe(const std::string& binary, const std::string& repo,
                  const std::vector<std::string>& extra_args);
  void StartCluster(const std::string& binary, const std::string& repo,
                    const std::vector<std::string>& extra_args);

  Topology topology_;
  pid_t pid_ = -1;
  int http_port_ = -1, grpc_port_ = -1, metrics_port_ = -1;
  std::string log_path_;
  std::unique_ptr<ClusterProcesses> cluster_;
};

}  // namespace somm::testing
