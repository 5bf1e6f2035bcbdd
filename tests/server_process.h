// ServerProcess: runs the real `somm serve` binary on loopback for end-to-end
// tests, with every port 0, and reads the ports it chose from its first
// stdout line ("somm: listening http=N grpc=N metrics=N").
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace somm::testing {

class ServerProcess {
 public:
  // Starts `binary serve --model-repository repo <extra_args>` and waits until
  // it listens (or exits, or 120 s pass: then ok() is false).
  ServerProcess(const std::string& binary, const std::string& repo,
                const std::vector<std::string>& extra_args = {});
  ~ServerProcess();  // SIGKILLs if still running

  bool ok() const { return http_port_ > 0; }
  int http_port() const { return http_port_; }
  int grpc_port() const { return grpc_port_; }
  int metrics_port() const { return metrics_port_; }
  pid_t pid() const { return pid_; }
  const std::string& log() const { return log_path_; }

  // Sends SIGTERM and returns the exit status (-1 on timeout / abnormal end).
  int Terminate(int timeout_s = 60);

 private:
  pid_t pid_ = -1;
  int http_port_ = -1, grpc_port_ = -1, metrics_port_ = -1;
  std::string log_path_;
};

}  // namespace somm::testing
