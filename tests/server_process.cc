#include "server_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <thread>

namespace somm::testing {

ServerProcess::ServerProcess(const std::string& binary, const std::string& repo,
                             const std::vector<std::string>& extra_args) {
  // The system's temporary directory (TMPDIR or its default), not a fixed path.
  std::string tmpl = (std::filesystem::temp_directory_path() / "somm_e2e_log_XXXXXX").string();
  const int log_fd = mkstemp(tmpl.data());
  log_path_ = tmpl;
  int out[2];
  if (pipe(out) != 0) return;
  std::vector<std::string> args = {binary, "serve", "--model-repository", repo,
                                   "--http-port", "0", "--grpc-port", "0",
                                   "--metrics-port", "0", "--address", "127.0.0.1",
                                   // Registered models still get variants; these tests
                                   // do not need any for the repository's own models.
                                   "--auto-variants", "false"};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
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
