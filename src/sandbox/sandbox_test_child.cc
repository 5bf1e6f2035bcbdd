// A stand-in for `somm model-sandbox` in process_sandbox_test.cc: the same
// command line and answer lines (sandbox_wire.h), and a behaviour chosen by
// the request's model name: ok, loop, sleep, alloc, alloc-crash, crash,
// alloc-spin (spins once memory runs out), report (what the confinement
// left it: its environment, descriptors,
// limits and which calls were refused), progress (a variant job's lines).
// Self-contained (libc only), so that the sanitizer builds can build it
// without their run-time, whose reservations a memory limit would refuse.
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

extern char** environ;

namespace {

int answer_fd = -1;

void Answer(const std::string& line) {
  const std::string text = line + "\n";
  [[maybe_unused]] ssize_t n = write(answer_fd, text.data(), text.size());
}

std::string Field(const std::string& json, const std::string& key) {
  const std::string quoted = "\"" + key + "\":\"";
  const size_t at = json.find(quoted);
  if (at == std::string::npos) return "";
  const size_t from = at + quoted.size();
  return json.substr(from, json.find('"', from) - from);
}

std::string Errno(int rc) { return rc == 0 ? "0" : errno == EPERM ? "EPERM" : std::to_string(errno); }

std::string Limit(int resource) {
  rlimit l{};
  getrlimit(resource, &l);
  return l.rlim_cur == RLIM_INFINITY ? "inf" : std::to_string(l.rlim_cur);
}

void* Nothing(void*) { return nullptr; }

std::string Report() {
  std::string r;
  const auto add = [&r](const std::string& key, const std::string& value) {
    r += (r.empty() ? "" : " ") + key + "=" + value;
  };
  std::string env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string var = *e;
    env += (env.empty() ? "" : ",") + var.substr(0, var.find('='));
  }
  add("env", env);
  std::string fds;
  if (DIR* d = opendir("/proc/self/fd")) {
    const int own = dirfd(d);
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] == '.' || std::atoi(e->d_name) == own) continue;
      fds += (fds.empty() ? "" : ",") + std::string(e->d_name);
    }
    closedir(d);
  }
  add("fds", fds);
  add("answer_fd", std::to_string(answer_fd));
  const char* home = std::getenv("HOME");
  char cwd[4096] = {0};
  add("cwd_is_home", home != nullptr && getcwd(cwd, sizeof cwd) && std::string(cwd) == home ? "yes" : "no");
  const mode_t mask = umask(0);
  umask(mask);
  char octal[8];
  std::snprintf(octal, sizeof octal, "%03o", static_cast<unsigned>(mask));
  add("umask", octal);
  add("cpu", Limit(RLIMIT_CPU));
  add("data", Limit(RLIMIT_DATA));
  add("core", Limit(RLIMIT_CORE));
  add("nofile", Limit(RLIMIT_NOFILE));
  int s = socket(AF_INET, SOCK_STREAM, 0);
  add("socket_inet", Errno(s >= 0 ? 0 : -1));
  s = socket(AF_UNIX, SOCK_STREAM, 0);
  add("socket_unix", Errno(s >= 0 ? 0 : -1));
  int pair[2];
  add("socketpair", Errno(socketpair(AF_UNIX, SOCK_STREAM, 0, pair)));
  add("kill_parent", Errno(kill(getppid(), 0)));
  add("kill_self", Errno(kill(getpid(), 0)));
  add("kill_all", Errno(kill(-1, 0)));
  // Each change below would set what is already set: harmless if allowed.
  // (PEEKUSER on a process nobody traces: ESRCH if ptrace itself is allowed.)
  add("ptrace_parent", Errno(static_cast<int>(ptrace(PTRACE_PEEKUSER, getppid(), nullptr, nullptr))));
  rlimit theirs{}, mine{};
  prlimit(getppid(), RLIMIT_NOFILE, nullptr, &theirs);
  add("prlimit_parent", Errno(prlimit(getppid(), RLIMIT_NOFILE, &theirs, nullptr)));
  getrlimit(RLIMIT_NOFILE, &mine);
  add("setrlimit_self", Errno(setrlimit(RLIMIT_NOFILE, &mine)));
  const int nice = getpriority(PRIO_PROCESS, static_cast<id_t>(getppid()));
  add("setpriority_parent", Errno(setpriority(PRIO_PROCESS, static_cast<id_t>(getppid()), nice)));
  add("unshare", Errno(unshare(CLONE_NEWNET)));
  pthread_t thread;
  const int created = pthread_create(&thread, nullptr, Nothing, nullptr);
  if (created == 0) pthread_join(thread, nullptr);
  add("thread", created == 0 ? "ok" : std::to_string(created));
  int devices = -2;  // lines of /proc/net/dev past its two headers
  if (FILE* f = std::fopen("/proc/net/dev", "r")) {
    char line[512];
    while (std::fgets(line, sizeof line, f)) ++devices;
    std::fclose(f);
  }
  add("net_devices", std::to_string(devices));
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) return 2;
  answer_fd = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
  dup2(STDERR_FILENO, STDOUT_FILENO);
  const std::string op = argv[2], request = argv[3];
  const std::string mode = op == "probe" ? Field(request, "model_name") : Field(request, "name");
  if (mode == "ok") {
    Answer(R"({"result":{"ok":true,"warnings":[]}})");
  } else if (mode == "loop") {
    volatile unsigned long spins = 0;
    for (;;) spins = spins + 1;
  } else if (mode == "sleep") {
    for (;;) pause();
  } else if (mode == "alloc" || mode == "alloc-crash" || mode == "alloc-spin") {
    std::vector<void*> held;
    for (;;) {
      void* p = std::malloc(32 << 20);
      if (p == nullptr) break;
      std::memset(p, 1, 32 << 20);
      held.push_back(p);
    }
    if (mode == "alloc-spin") {  // as OpenBLAS does when it cannot allocate
      volatile unsigned long spins = 0;
      for (;;) spins = spins + 1;
    }
    if (mode == "alloc-crash") {
      std::fprintf(stderr, "terminate called after throwing an instance of 'std::bad_alloc'\n");
      std::fflush(stderr);
      std::abort();
    }
    Answer(R"({"result":{"ok":false,"code":"RESOURCE_EXHAUSTED","message":"DefaultCPUAllocator: can't allocate memory","out_of_memory":true,"warnings":[]}})");
  } else if (mode == "crash") {
    raise(SIGSEGV);
  } else if (mode == "report") {
    Answer(R"({"result":{"ok":false,"code":"INVALID_ARGUMENT","message":")" + Report() +
           R"(","out_of_memory":false,"warnings":[]}})");
  } else if (mode == "progress") {
    // The variants folder a job writes, and one file in it.
    const std::string folder = Field(request, "variants_root") + "/progress/1";
    const std::string model = Field(request, "variants_root") + "/progress";
    mkdir(model.c_str(), 0777);
    mkdir(folder.c_str(), 0777);
    const int fd = open((folder + "/skipped.json").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0666);
    [[maybe_unused]] ssize_t n = write(fd, "[]\n", 3);
    close(fd);
    for (int i = 1; i <= 3; ++i) {
      Answer(R"({"progress":{"phase":"build","done":)" + std::to_string(i) +
             R"(,"total":3,"current":"step"}})");
    }
    Answer(R"({"result":{"ok":true,"warnings":["a warning"]}})");
  } else {
    Answer(R"({"result":{"ok":false,"code":"INVALID_ARGUMENT","message":"unknown mode"}})");
  }
  return 0;
}
