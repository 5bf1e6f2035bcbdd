#include "cluster_process.h"

#include <fcntl.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

namespace somm::testing {
namespace {

using namespace std::chrono_literals;

int FreePort() {
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

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Waits (bounded) for `pattern` in the file; `*match` points into `*text`.
bool WaitFor(const std::string& path, const std::regex& pattern, std::string* text,
             std::smatch* match, pid_t pid) {
  for (int i = 0; i < 1200; ++i) {
    *text = ReadFile(path);
    if (std::regex_search(*text, *match, pattern)) return true;
    if (waitpid(pid, nullptr, WNOHANG) == pid) return false;
    std::this_thread::sleep_for(100ms);
  }
  return false;
}

}  // namespace

pid_t ClusterProcesses::Spawn(const std::vector<std::string>& args, const std::string& name) {
  const std::string out = dir_ + "/" + name + ".stdout";
  const std::string err = dir_ + "/" + name + ".stderr";
  const pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    const int o = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int e = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(o, STDOUT_FILENO);
    dup2(e, STDERR_FILENO);
    std::vector<char*> argv;
    std::vector<std::string> copy = args;
    for (auto& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    execvp(argv[0], argv.data());
    _exit(127);
  }
  pids_.push_back(pid);
  names_.push_back(name);
  return pid;
}

ClusterProcesses::ClusterProcesses(const std::string& binary, const std::string& repo,
                                   ClusterOptions options) {
  std::string tmpl = (std::filesystem::temp_directory_path() / "somm_cluster_XXXXXX").string();
  dir_ = mkdtemp(tmpl.data()) ? tmpl : std::filesystem::temp_directory_path().string();
  redis_port_ = FreePort();
  const pid_t redis = Spawn({"redis-server", "--port", std::to_string(redis_port_), "--bind",
                             "127.0.0.1", "--save", "", "--appendonly", "no", "--loglevel",
                             "warning"},
                            "redis");
  {
    bool up = false;
    for (int i = 0; i < 100 && !up; ++i) {
      up = system(("redis-cli -p " + std::to_string(redis_port_) +
                                       " ping >/dev/null 2>&1").c_str()) == 0;
      if (!up) std::this_thread::sleep_for(50ms);
    }
    if (!up) {
      error_ = "redis-server did not start (is it installed? scripts/setup)";
      (void)redis;
      return;
    }
  }
  const std::string redis_address = "127.0.0.1:" + std::to_string(redis_port_);
  std::vector<std::string> controller = {binary, "controller", "--model-repository", repo,
                                         "--redis", redis_address, "--port", "0",
                                         "--metrics-port", "0", "--controller-id", "controller-0",
                                         "--wait-for-workers-s", "60"};
  controller.insert(controller.end(), options.controller_args.begin(),
                    options.controller_args.end());
  const pid_t cpid = Spawn(controller, "controller-0");
  for (int j = 0; j < options.workers; ++j) {
    const std::string id = "worker-" + std::to_string(j);
    std::vector<std::string> args = {binary, "worker", "--model-repository", repo, "--redis",
                                     redis_address, "--port", "0", "--metrics-port", "0",
                                     "--worker-id", id, "--lease-ms",
                                     std::to_string(options.lease_ms), "--heartbeat-ms",
                                     std::to_string(std::max(100, options.lease_ms / 3))};
    args.insert(args.end(), options.worker_args.begin(), options.worker_args.end());
    Worker w;
    w.id = id;
    w.pid = Spawn(args, id);
    workers_.push_back(w);
  }
  const pid_t rpid = Spawn({binary, "router", "--model-repository", repo, "--redis",
                            redis_address, "--http-port", "0", "--grpc-port", "0",
                            "--metrics-port", "0", "--router-id", "router-0"},
                           "router-0");
  std::string text;
  std::smatch m;
  for (Worker& w : workers_) {
    if (!WaitFor(dir_ + "/" + w.id + ".stdout", std::regex("listening grpc=(\\d+)"), &text, &m, w.pid)) {
      error_ = w.id + " did not start";
      return;
    }
    w.port = std::stoi(m[1]);
  }
  if (!WaitFor(dir_ + "/controller-0.stdout", std::regex("listening control=(\\d+)"), &text, &m, cpid)) {
    error_ = "the controller did not start";
    return;
  }
  if (!WaitFor(dir_ + "/router-0.stdout", std::regex("http=(\\d+) grpc=(\\d+)"), &text, &m, rpid)) {
    error_ = "the router did not start";
    return;
  }
  http_port_ = std::stoi(m[1]);
  grpc_port_ = std::stoi(m[2]);
  // Ready once the controller has loaded the repository and the router's
  // catalog lists a ready model.
  httplib::Client c("127.0.0.1", http_port_);
  for (int i = 0; i < 1200; ++i) {
    auto r = c.Post("/v2/repository/index", R"({"ready": true})", "application/json");
    if (r && r->status == 200 && r->body.find("READY") != std::string::npos &&
        ReadFile(dir_ + "/controller-0.stderr").find("took the leader lease") != std::string::npos) {
      ok_ = true;
      break;
    }
    std::this_thread::sleep_for(100ms);
  }
  if (!ok_) error_ = "the router never listed a ready model";
}

ClusterProcesses::~ClusterProcesses() {
  for (pid_t pid : pids_) kill(pid, SIGKILL);
  for (pid_t pid : pids_) waitpid(pid, nullptr, 0);
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

std::vector<std::string> ClusterProcesses::RegisteredWorkers() const {
  std::vector<std::string> ids;
  FILE* p = popen(("redis-cli -p " + std::to_string(redis_port_) + " SMEMBERS somm:workers").c_str(), "r");
  if (!p) return ids;
  char line[256];
  while (fgets(line, sizeof line, p)) {
    std::string s(line);
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
    if (!s.empty()) ids.push_back(s);
  }
  pclose(p);
  return ids;
}

std::string ClusterProcesses::Logs() const {
  std::string out;
  for (const std::string& name : names_) {
    out += "==== " + name + "\n" + ReadFile(dir_ + "/" + name + ".stderr");
  }
  return out;
}

}  // namespace somm::testing
