// For tests: a redis-server process of the test's own on a free loopback
// port (scripts/setup installs redis-server), soft state only, started with
// whatever extra arguments a test needs (--requirepass, --user, --tls-port).
#pragma once

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "redis/redis_connection.h"

namespace somm::redis::testing {

inline int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

class RedisServer {
 public:
  // `args` go after the port (or in its place: a TLS server passes
  // "--port 0 --tls-port N" and its files).
  explicit RedisServer(int port, std::vector<std::string> args = {}, bool tls = false)
      : port_(port) {
    if (!tls) args.insert(args.begin(), {"--port", std::to_string(port)});
    args_ = {"redis-server", "--bind", "127.0.0.1",  "--save", "",
             "--appendonly", "no",     "--loglevel", "warning"};
    args_.insert(args_.end(), args.begin(), args.end());
    // Everything exec needs is built before fork.
    std::vector<char*> argv;
    for (std::string& a : args_) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_ = fork();
    if (pid_ == 0) {
      // Dies with the test, whatever kills it, and never holds the test's
      // output open (CTest waits for that to close).
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      const int devnull = open("/dev/null", O_WRONLY);
      dup2(devnull, STDOUT_FILENO);
      dup2(devnull, STDERR_FILENO);
      execvp("redis-server", argv.data());
      _exit(127);
    }
  }
  ~RedisServer() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  int port() const { return port_; }
  // Waits (bounded) until PING over `endpoint` is answered PONG.
  static bool WaitReady(const RedisEndpoint& endpoint) {
    RedisConnection c(endpoint);
    for (int i = 0; i < 200; ++i) {
      auto r = c.Command({"PING"});
      if (r.ok() && r->str == "PONG") return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    return false;
  }

 private:
  int port_;
  std::vector<std::string> args_;
  pid_t pid_ = -1;
};

}  // namespace somm::redis::testing
