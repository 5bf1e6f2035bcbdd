#include "cluster_process.h"

#include <fcntl.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <regex>
#include <string_view>
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

// Runs `command` with sh, its standard output into *out; pclose's status,
// -1 when it could not be started.
int Shell(const std::string& command, std::string* out) {
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return -1;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) out->append(buffer, n);
  return pclose(pipe);
}

// The status of a request to a router's REST port (POST for the
// repository index, GET otherwise), -1 when none came; over mutual TLS with
// curl when `tls_dir` is given (httplib here speaks plaintext only). A router
// started with --auth keys answers the index only with a key: SOMM_API_KEY's.
int Probe(int port, const std::string& path, const std::string& tls_dir, std::string* body) {
  const bool post = path == "/v2/repository/index";
  const char* key = std::getenv("SOMM_API_KEY");
  if (tls_dir.empty()) {
    httplib::Client c("127.0.0.1", port);
    if (key != nullptr) c.set_bearer_token_auth(key);
    auto res = post ? c.Post(path, "", "application/json") : c.Get(path);
    if (!res) return -1;
    *body = res->body;
    return res->status;
  }
  std::string command = "curl -s --max-time 5 -w '\\n%{http_code}' --cacert " + tls_dir +
                        "/ca.pem --cert " + tls_dir + "/client.pem --key " + tls_dir +
                        "/client.key " + (post ? "-d '' " : "");
  if (key != nullptr) command += "-H 'Authorization: Bearer " + std::string(key) + "' ";
  command += "https://127.0.0.1:" + std::to_string(port) + path + " 2>/dev/null";
  std::string out;
  if (Shell(command, &out) < 0) return -1;
  const size_t newline = out.rfind('\n');
  if (newline == std::string::npos) return -1;
  *body = out.substr(0, newline);
  return std::atoi(out.c_str() + newline + 1);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Waits (bounded) for `pattern` in the file; `*match` points into `*text`.
// False with *why: how the process ended, or that it never printed it.
bool WaitFor(const std::string& path, const std::regex& pattern, std::string* text,
             std::smatch* match, pid_t pid, std::string* why) {
  for (int i = 0; i < 1200; ++i) {
    *text = ReadFile(path);
    if (std::regex_search(*text, *match, pattern)) return true;
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      // 127: the binary could not be run (missing, or being relinked).
      *why = WIFEXITED(status) ? "exited with status " + std::to_string(WEXITSTATUS(status))
                               : "died of signal " + std::to_string(WTERMSIG(status));
      return false;
    }
    std::this_thread::sleep_for(100ms);
  }
  *why = "printed no banner in 120 s";
  return false;
}

}  // namespace

pid_t ClusterProcesses::Spawn(const std::vector<std::string>& args, const std::string& name) {
  const std::string out = dir_ + "/" + name + ".stdout";
  const std::string err = dir_ + "/" + name + ".stderr";
  // The environment is made before fork (the child may only make
  // async-signal-safe calls): this process's, with Redis's password file.
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    if (!std::string_view(*e).starts_with("SOMM_REDIS_PASSWORD")) env.emplace_back(*e);
  }
  if (!redis_password_file_.empty()) env.push_back("SOMM_REDIS_PASSWORD_FILE=" + redis_password_file_);
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> copy = args;
  std::vector<char*> argv;
  for (auto& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    const int o = open(out.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    const int e = open(err.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    dup2(o, STDOUT_FILENO);
    dup2(e, STDERR_FILENO);
    execvpe(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  pids_.push_back(pid);
  names_.push_back(name);
  return pid;
}

std::string ClusterProcesses::Redis(const std::string& command) const {
  // REDISCLI_AUTH, not -a: redis-cli warns of a password on its command line.
  const std::string auth =
      redis_password_.empty() ? "" : "REDISCLI_AUTH=" + redis_password_ + " ";
  std::string out;
  Shell(auth + "redis-cli -p " + std::to_string(redis_port_) + " " + command + " 2>/dev/null", &out);
  return out;
}

bool ClusterProcesses::StartRedis() {
  // The password goes in a config file, not on redis-server's command line.
  const std::string config = dir_ + "/redis.conf";
  {
    std::ofstream out(config);
    if (!redis_password_.empty()) out << "requirepass " << redis_password_ << "\n";
  }
  redis_pid_ = Spawn({"redis-server", config, "--port", std::to_string(redis_port_), "--bind",
                      "127.0.0.1", "--save", "", "--appendonly", "no", "--loglevel", "warning"},
                     "redis");
  for (int i = 0; i < 200; ++i) {
    if (Redis("ping").find("PONG") != std::string::npos) return true;
    std::this_thread::sleep_for(25ms);
  }
  return false;
}

void ClusterProcesses::KillRedis() {
  if (redis_pid_ <= 0) return;
  kill(redis_pid_, SIGKILL);
  waitpid(redis_pid_, nullptr, 0);
  for (pid_t& p : pids_) {
    if (p == redis_pid_) p = -1;  // reaped: never signal its number again
  }
  redis_pid_ = -1;
}

bool ClusterProcesses::RestartRedis() {
  KillRedis();
  return StartRedis();
}

ClusterProcesses::ClusterProcesses(const std::string& binary, const std::string& repo,
                                   ClusterOptions options) {
  std::string tmpl = (std::filesystem::temp_directory_path() / "somm_cluster_XXXXXX").string();
  dir_ = mkdtemp(tmpl.data()) ? tmpl : std::filesystem::temp_directory_path().string();
  const bool secure = options.secure || !options.tls_dir.empty();
  certs_ = options.tls_dir;
  if (certs_.empty() && secure) {
    certs_ = dir_ + "/certs";
    if (std::system((std::string(SOMM_SOURCE_DIR) + "/scripts/make-certs " + certs_ +
                     " >/dev/null 2>&1").c_str()) != 0) {
      error_ = "scripts/make-certs did not make the cluster's certificates";
      return;
    }
  }
  if (!certs_.empty()) {
    const std::vector<std::string> tls = {"--tls-cert", certs_ + "/server.pem", "--tls-key",
                                          certs_ + "/server.key", "--tls-client-ca",
                                          certs_ + "/ca.pem"};
    for (auto* args : {&options.controller_args, &options.worker_args}) {
      args->insert(args->end(), tls.begin(), tls.end());
    }
    if (!options.tls_dir.empty()) {
      options.router_args.insert(options.router_args.end(), tls.begin(), tls.end());
    } else {
      options.router_args.insert(options.router_args.end(),
                                 {"--cluster-tls-cert", certs_ + "/server.pem", "--cluster-tls-key",
                                  certs_ + "/server.key", "--cluster-tls-ca", certs_ + "/ca.pem"});
    }
  }
  if (secure) {
    std::random_device random;
    char hex[33];
    std::snprintf(hex, sizeof hex, "%08x%08x%08x%08x", random(), random(), random(), random());
    redis_password_ = hex;
    redis_password_file_ = dir_ + "/redis-password";
    std::ofstream(redis_password_file_) << redis_password_;
    std::filesystem::permissions(redis_password_file_, std::filesystem::perms::owner_read |
                                                           std::filesystem::perms::owner_write);
  }
  redis_port_ = FreePort();
  if (!StartRedis()) {
    error_ = "redis-server did not start (is it installed? scripts/setup)";
    return;
  }
  const std::string redis_address = "127.0.0.1:" + std::to_string(redis_port_);
  for (int c = 0; c < options.controllers; ++c) {
    std::vector<std::string> args = {binary, "controller", "--model-repository", repo, "--redis",
                                     redis_address, "--port", "0", "--metrics-port", "0",
                                     "--controller-id", "controller-" + std::to_string(c),
                                     "--leader-lease-ms", std::to_string(options.leader_lease_ms),
                                     "--wait-for-workers-s", "60"};
    // Profiling every model of the test's repository would load the machine
    // under every test; one that wants it passes --auto-variants true.
    const auto& extra = options.controller_args;
    if (std::find(extra.begin(), extra.end(), "--auto-variants") == extra.end()) {
      args.insert(args.end(), {"--auto-variants", "false"});
    }
    // The suites load and unload through the repository API, which Triton's
    // default mode (none) refuses: explicit, with every model loaded at
    // start, unless a test names a mode (model_control_e2e_test.cc tests
    // each).
    if (std::find(extra.begin(), extra.end(), "--model-control-mode") == extra.end()) {
      args.insert(args.end(), {"--model-control-mode", "explicit", "--load-model", "*"});
    }
    args.insert(args.end(), options.controller_args.begin(), options.controller_args.end());
    controllers_.push_back(Spawn(args, "controller-" + std::to_string(c)));
    if (c == 0) {
      // The first one takes the lease: wait for it before starting the rest.
      for (int i = 0; i < 200 && Leader().empty(); ++i) std::this_thread::sleep_for(25ms);
    }
  }
  for (int j = 0; j < options.workers; ++j) {
    const std::string id = "worker-" + std::to_string(j);
    std::vector<std::string> args = {binary, "worker", "--model-repository", repo, "--redis",
                                     redis_address, "--port", "0", "--metrics-port", "0",
                                     "--worker-id", id, "--lease-ms",
                                     std::to_string(options.lease_ms), "--heartbeat-ms",
                                     std::to_string(std::max(100, options.lease_ms / 3))};
    args.insert(args.end(), options.worker_args.begin(), options.worker_args.end());
    if (static_cast<size_t>(j) < options.worker_args_each.size()) {
      const auto& own = options.worker_args_each[static_cast<size_t>(j)];
      args.insert(args.end(), own.begin(), own.end());
    }
    Worker w;
    w.id = id;
    w.pid = Spawn(args, id);
    workers_.push_back(w);
  }
  for (int i = 0; i < options.routers; ++i) {
    Router r;
    std::vector<std::string> args = {binary, "router", "--model-repository", repo, "--redis",
                                     redis_address, "--http-port", "0", "--grpc-port", "0",
                                     "--metrics-port", "0", "--router-id",
                                     "router-" + std::to_string(i)};
    args.insert(args.end(), options.router_args.begin(), options.router_args.end());
    // As the controllers': explicit unless the test names a mode.
    if (std::find(options.router_args.begin(), options.router_args.end(),
                  "--model-control-mode") == options.router_args.end()) {
      args.insert(args.end(), {"--model-control-mode", "explicit"});
    }
    // As ServerProcess: the suites read one parameter per fact.
    if (std::find(options.router_args.begin(), options.router_args.end(), "--explain") ==
        options.router_args.end()) {
      args.insert(args.end(), {"--explain", "full"});
    }
    r.pid = Spawn(args, "router-" + std::to_string(i));
    routers_.push_back(r);
  }
  std::string text, why;
  std::smatch m;
  for (Worker& w : workers_) {
    if (!WaitFor(dir_ + "/" + w.id + ".stdout", std::regex("listening grpc=(\\d+)"), &text, &m,
                 w.pid, &why)) {
      error_ = w.id + " did not start: " + why;
      return;
    }
    w.port = std::stoi(m[1]);
  }
  for (size_t c = 0; c < controllers_.size(); ++c) {
    if (!WaitFor(dir_ + "/controller-" + std::to_string(c) + ".stdout",
                 std::regex("listening control=(\\d+) metrics=(\\d+)"), &text, &m,
                 controllers_[c], &why)) {
      error_ = "controller " + std::to_string(c) + " did not start: " + why;
      return;
    }
    controller_metrics_ports_.push_back(std::stoi(m[2]));
    if (!certs_.empty()) tls_ports_.push_back(std::stoi(m[2]));
  }
  for (size_t i = 0; i < routers_.size(); ++i) {
    if (!WaitFor(dir_ + "/router-" + std::to_string(i) + ".stdout",
                 std::regex("http=(\\d+) grpc=(\\d+) metrics=(\\d+)"), &text, &m,
                 routers_[i].pid, &why)) {
      error_ = "router " + std::to_string(i) + " did not start: " + why;
      return;
    }
    routers_[i].http_port = std::stoi(m[1]);
    routers_[i].grpc_port = std::stoi(m[2]);
    routers_[i].metrics_port = std::stoi(m[3]);
    if (!options.tls_dir.empty()) tls_ports_.push_back(routers_[i].metrics_port);
  }
  // Ready once the leader has loaded the repository and every router's
  // catalog lists a ready model. With nothing to load: once every worker
  // registered and the leader leads with a worker in view (so a first
  // registration finds somewhere to load).
  // Explicit model control with named --load-model models (not *): the
  // folders not named stay unloaded.
  const auto& ctl = options.controller_args;
  const auto mode = std::find(ctl.begin(), ctl.end(), "--model-control-mode");
  const bool some_unloaded = mode != ctl.end() && std::next(mode) != ctl.end() &&
                             *std::next(mode) == "explicit" &&
                             std::find(ctl.begin(), ctl.end(), "*") == ctl.end();
  for (int i = 0; i < 1200 && !ok_; ++i) {
    const std::string leader_log = ReadFile(dir_ + "/controller-0.stderr");
    bool all = leader_log.find("took the leader lease") != std::string::npos;
    if (!options.wait_for_model) {
      all = all && RegisteredWorkers().size() == workers_.size() &&
            leader_log.find("leading, with") != std::string::npos;
    }
    for (const Router& r : routers_) {
      std::string body;
      if (options.wait_for_model) {
        // Every model folder known (the leader publishes its whole start-up
        // load, failures included, one catalog entry at a time): no row is
        // a bare folder the catalog has not named yet. Under explicit model
        // control some folders stay unloaded: then the leader's start-up
        // is over once it says it leads.
        all = all && Probe(r.http_port, "/v2/repository/index", options.tls_dir, &body) == 200 &&
              body.find("READY") != std::string::npos &&
              (some_unloaded ? leader_log.find("leading, with") != std::string::npos
                             : body.find(R"("reason":"unloaded")") == std::string::npos);
      } else {
        all = all && Probe(r.http_port, "/v2/health/ready", options.tls_dir, &body) == 200;
      }
    }
    ok_ = all;
    if (!ok_) std::this_thread::sleep_for(100ms);
  }
  if (!ok_) {
    error_ = options.wait_for_model ? "the routers never listed a ready model"
                                    : "the workers never registered or the routers never got ready";
  }
}

int ClusterProcesses::Stop(pid_t pid, std::chrono::steady_clock::time_point deadline) {
  if (pid <= 0) return -1;
  kill(pid, SIGTERM);
  int status = 0;
  pid_t reaped = 0;
  while ((reaped = waitpid(pid, &status, WNOHANG)) == 0 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(20ms);
  }
  if (reaped != pid) return -1;  // the destructor SIGKILLs it
  for (pid_t& p : pids_) {
    if (p == pid) p = -1;  // reaped: never signal its number again
  }
  if (pid == redis_pid_) redis_pid_ = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int ClusterProcesses::Terminate(int timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  int first_router = -1;
  for (size_t i = 0; i < routers_.size(); ++i) {
    const int status = Stop(routers_[i].pid, deadline);
    if (i == 0) first_router = status;
  }
  for (const Worker& w : workers_) Stop(w.pid, deadline);
  for (pid_t c : controllers_) Stop(c, deadline);
  Stop(redis_pid_, deadline);
  return first_router;
}

ClusterProcesses::~ClusterProcesses() {
  for (pid_t pid : pids_) {
    if (pid > 0) kill(pid, SIGKILL);
  }
  for (pid_t pid : pids_) {
    if (pid > 0) waitpid(pid, nullptr, 0);
  }
  // SOMM_E2E_KEEP_LOGS keeps every process's log for a look after the test.
  if (std::getenv("SOMM_E2E_KEEP_LOGS") != nullptr) {
    std::fprintf(stderr, "cluster logs kept in %s\n", dir_.c_str());
    return;
  }
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

std::vector<std::string> ClusterProcesses::RegisteredWorkers() const {
  std::vector<std::string> ids;
  std::stringstream in(Redis("SMEMBERS somm:workers"));
  std::string s;
  while (std::getline(in, s)) {
    while (!s.empty() && (s.back() == '\r' || s.back() == ' ')) s.pop_back();
    if (!s.empty()) ids.push_back(s);
  }
  return ids;
}

std::string ClusterProcesses::Leader() const {
  std::string holder = Redis("GET somm:leader");
  while (!holder.empty() && (holder.back() == '\n' || holder.back() == '\r')) holder.pop_back();
  const auto bar = holder.find('|');
  return bar == std::string::npos ? "" : holder.substr(0, bar);
}

std::string ClusterProcesses::Metrics(int port) const {
  if (std::find(tls_ports_.begin(), tls_ports_.end(), port) == tls_ports_.end()) {
    httplib::Client c("127.0.0.1", port);
    auto res = c.Get("/metrics");
    return res && res->status == 200 ? res->body : "";
  }
  // httplib here speaks plaintext only. The metrics ports ask for no client
  // certificate (kubelet's probes have none); on loopback, for no key.
  const std::string command = "curl -sf --max-time 5 --cacert " + certs_ +
                              "/ca.pem https://localhost:" + std::to_string(port) +
                              "/metrics 2>/dev/null";
  std::string out;
  return Shell(command, &out) == 0 ? out : "";
}

std::string ClusterProcesses::Logs() const {
  std::string out;
  for (size_t i = 0; i < names_.size(); ++i) {
    if (i > 0 && names_[i] == names_[i - 1]) continue;
    out += "==== " + names_[i] + "\n" + ReadFile(dir_ + "/" + names_[i] + ".stderr");
  }
  return out;
}

}  // namespace somm::testing
