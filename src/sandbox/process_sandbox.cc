#include "sandbox/process_sandbox.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <thread>

#include "sandbox/sandbox_wire.h"

namespace somm {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

constexpr size_t kLogTail = 16 * 1024;
// A child's HOME and TMPDIR: <temp>/somm-sandbox-<server pid>-XXXXXX.
const std::string kHomePrefix = "somm-sandbox-";
// Exit statuses of the child before it runs somm (nothing else uses them).
constexpr int kExitConfineFailed = 125;
constexpr int kExitExecFailed = 127;

std::string Seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", s);
  return buf;
}

// The variables the child starts with: nothing of the server's but what
// libtorch, OpenMP and Python need to start as the server did.
std::vector<std::string> ChildEnvironment(const std::string& home) {
  std::vector<std::string> env = {"PATH=/usr/bin:/bin", "HOME=" + home, "TMPDIR=" + home,
                                  "LANG=C.UTF-8"};
  const char* wait_policy = std::getenv("OMP_WAIT_POLICY");
  env.push_back(std::string("OMP_WAIT_POLICY=") + (wait_policy ? wait_policy : "PASSIVE"));
  for (const char* name : {"LD_LIBRARY_PATH", "PYTHONPATH", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
                           "OPENBLAS_NUM_THREADS"}) {
    if (const char* value = std::getenv(name)) env.push_back(std::string(name) + "=" + value);
  }
  return env;
}

std::vector<char*> Pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

void KillGroup(pid_t pid) {
  kill(-pid, SIGKILL);  // the child's session: it, and Python under it
  kill(pid, SIGKILL);   // before its setsid(), the group does not exist yet
}

void CloseFrom(int first) noexcept {
#ifdef SYS_close_range
  if (syscall(SYS_close_range, first, ~0u, 0) == 0) return;
#endif
  rlimit limit{};
  const int last = getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < 65536
                       ? static_cast<int>(limit.rlim_cur)
                       : 65536;
  for (int fd = first; fd < last; ++fd) close(fd);
}

// The memory a process holds against RLIMIT_DATA (VmData), in bytes; 0
// when it cannot be read.
int64_t DataBytes(pid_t pid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/status", static_cast<int>(pid));
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[4096];
  const ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  const char* at = std::strstr(buf, "VmData:");
  return at == nullptr ? 0 : std::atoll(at + 7) * 1024;
}

void Say(const char* text) noexcept {
  size_t n = 0;
  while (text[n] != '\0') ++n;
  [[maybe_unused]] ssize_t ignored = write(STDERR_FILENO, text, n);
}

// Everything the child uses between fork() and exec(), built beforehand:
// the child calls only async-signal-safe functions and allocates nothing.
struct ChildPlan {
  pid_t parent = 0;
  // exec: a close-on-exec pipe kept open until exec() succeeds, so the
  // parent knows when the process it watches is somm and no longer its own
  // copy.
  int in = -1, answer = -1, log = -1, exec = -1;
  const PreparedConfinement* confinement = nullptr;
  const std::array<std::string, 8>* confinement_lines = nullptr;
  const char* executable = nullptr;
  char** argv = nullptr;
  char** envp = nullptr;
};

[[noreturn]] void ChildAfterFork(const ChildPlan& plan) noexcept {
  setsid();
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != plan.parent) _exit(kExitConfineFailed);  // the server is gone
  // 0 /dev/null, 1 the answer, 2 the log, 3 the exec pipe (closed by
  // exec()); every other descriptor closed.
  const int in = fcntl(plan.in, F_DUPFD, 10), answer = fcntl(plan.answer, F_DUPFD, 10),
            log = fcntl(plan.log, F_DUPFD, 10), exec = fcntl(plan.exec, F_DUPFD, 10);
  if (in < 0 || answer < 0 || log < 0 || exec < 0 || dup2(in, 0) < 0 || dup2(answer, 1) < 0 ||
      dup2(log, 2) < 0 || dup3(exec, 3, O_CLOEXEC) < 0) {
    _exit(kExitConfineFailed);
  }
  CloseFrom(4);
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  for (int s = 1; s < NSIG; ++s) {
    if (s != SIGKILL && s != SIGSTOP) sigaction(s, &default_action, nullptr);
  }
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  const int applied = plan.confinement->Apply();
  if (applied < 0) {
    Say("model sandbox: the child could not be confined\n");
    _exit(kExitConfineFailed);
  }
  const std::string& line = (*plan.confinement_lines)[static_cast<size_t>(applied) & 7];
  [[maybe_unused]] ssize_t ignored = write(STDOUT_FILENO, line.data(), line.size());
  execve(plan.executable, plan.argv, plan.envp);
  Say("model sandbox: cannot execute the somm binary\n");
  _exit(kExitExecFailed);
}

}  // namespace

struct ProcessModelSandbox::Outcome {
  Status start;  // the sandbox's own failure: nothing ran
  std::optional<sandbox_wire::ChildLine::Result> result;
  std::string confinement;
  std::string log_tail;
  int wait_status = 0;
  double cpu_seconds = 0;
  int64_t max_rss_bytes = 0;
  int64_t peak_data_bytes = 0;  // VmData, sampled every 100 ms at most
  double wall_seconds = 0;
  bool wall_killed = false, cancelled = false, stopped = false, answer_too_long = false,
       unreadable = false;
};

ProcessModelSandbox::ProcessModelSandbox(ProcessSandboxOptions options)
    : options_(std::move(options)) {
  // The folders of children whose server was killed (SIGKILL leaves no
  // time to remove them) go now; a live server's stay.
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(fs::temp_directory_path(ec), ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(kHomePrefix, 0) != 0) continue;
    const long pid = std::atol(name.c_str() + kHomePrefix.size());
    if (pid > 0 && kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) {
      std::error_code ignored;
      fs::remove_all(e.path(), ignored);
    }
  }
}

ProcessModelSandbox::~ProcessModelSandbox() { Shutdown(); }

std::string ProcessModelSandbox::Describe() const {
  unsigned applied = kConfinedRlimits;
  if (options_.namespaces && UserNamespacesAllowed()) applied |= kConfinedNamespaces;
  if (options_.seccomp && SeccompFilterSupported()) applied |= kConfinedSeccomp;
  return "a child process (" + DescribeConfinement(applied) + "; probe: " +
         Seconds(options_.probe.cpu_seconds) + " s CPU, " + Seconds(options_.probe.wall_seconds) +
         " s, " + std::to_string(options_.probe.memory_mb) + " MiB; variant job: " +
         Seconds(options_.variants.cpu_seconds) + " s CPU, " +
         Seconds(options_.variants.wall_seconds) + " s, " +
         std::to_string(options_.variants.memory_mb) + " MiB)";
}

std::string ProcessModelSandbox::LastConfinement() const {
  MutexLock lock(&mu_);
  return last_confinement_;
}

void ProcessModelSandbox::Shutdown() {
  MutexLock lock(&mu_);
  stopping_ = true;
  for (pid_t pid : live_) KillGroup(pid);
}

ProcessModelSandbox::Outcome ProcessModelSandbox::Run(
    const std::string& op, const std::string& request, const SandboxLimits& limits, mode_t umask,
    const std::function<void(const VariantProgress&)>& progress,
    const std::function<bool()>& cancelled) {
  Outcome out;
  std::error_code ec;
  std::string home =
      (fs::temp_directory_path(ec) / (kHomePrefix + std::to_string(getpid()) + "-XXXXXX")).string();
  if (ec || mkdtemp(home.data()) == nullptr) {
    out.start = Unavailable(std::string("the model sandbox cannot make its folder: ") +
                            std::strerror(errno));
    return out;
  }
  struct RemoveHome {
    std::string path;
    ~RemoveHome() {
      std::error_code e;
      fs::remove_all(path, e);
    }
  } remove_home{home};

  std::vector<std::string> args = {options_.executable, sandbox_wire::kCommand, op, request};
  std::vector<std::string> env = ChildEnvironment(home);
  std::vector<char*> argv = Pointers(args), envp = Pointers(env);
  ConfinementOptions co;
  co.cpu_seconds = limits.cpu_seconds;
  co.memory_bytes = limits.memory_mb * 1024 * 1024;
  co.namespaces = options_.namespaces;
  co.seccomp = options_.seccomp;
  co.work_dir = home;
  co.umask = umask;
  const PreparedConfinement confinement(co);
  std::array<std::string, 8> lines;
  for (unsigned bits = 0; bits < lines.size(); ++bits) {
    lines[bits] = sandbox_wire::ConfinementLine(DescribeConfinement(bits));
  }
  int answer_pipe[2] = {-1, -1}, log_pipe[2] = {-1, -1}, exec_pipe[2] = {-1, -1};
  const int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (devnull < 0 || pipe2(answer_pipe, O_CLOEXEC) != 0 || pipe2(log_pipe, O_CLOEXEC) != 0 ||
      pipe2(exec_pipe, O_CLOEXEC) != 0) {
    out.start = Unavailable(std::string("the model sandbox cannot make its pipes: ") +
                            std::strerror(errno));
    for (int fd : {devnull, answer_pipe[0], answer_pipe[1], log_pipe[0], log_pipe[1],
                   exec_pipe[0], exec_pipe[1]}) {
      if (fd >= 0) close(fd);
    }
    return out;
  }
  ChildPlan plan{getpid(), devnull, answer_pipe[1], log_pipe[1], exec_pipe[1], &confinement,
                 &lines, args[0].c_str(), argv.data(), envp.data()};
  pid_t pid = -1;
  int fork_errno = 0;
  {
    MutexLock lock(&mu_);
    if (!stopping_) {
      pid = fork();
      fork_errno = errno;
      if (pid == 0) ChildAfterFork(plan);
      if (pid > 0) live_.insert(pid);
    }
  }
  close(devnull);
  close(answer_pipe[1]);
  close(log_pipe[1]);
  close(exec_pipe[1]);
  if (pid <= 0) {
    close(answer_pipe[0]);
    close(log_pipe[0]);
    close(exec_pipe[0]);
    if (pid < 0) {
      out.start = Unavailable(std::string("the model sandbox cannot start a process: ") +
                              std::strerror(fork_errno));
    } else {
      out.start = Unavailable("server is shutting down");
    }
    return out;
  }

  const auto started = Clock::now();
  const auto deadline =
      limits.wall_seconds > 0
          ? started + std::chrono::duration_cast<Clock::duration>(
                          std::chrono::duration<double>(limits.wall_seconds))
          : Clock::time_point::max();
  bool killed = false;
  const auto kill_child = [&](bool* why) {
    if (killed) return;
    killed = true;
    *why = true;
    KillGroup(pid);
  };
  std::string pending;  // the answer's unfinished line
  size_t answer_bytes = 0;
  // The answer, the log, and the exec pipe (closed once somm runs).
  pollfd fds[3] = {
      {answer_pipe[0], POLLIN, 0}, {log_pipe[0], POLLIN, 0}, {exec_pipe[0], POLLIN, 0}};
  const auto take_line = [&](const std::string& line) {
    StatusOr<sandbox_wire::ChildLine> parsed = sandbox_wire::ParseChildLine(line);
    if (!parsed.ok()) {
      spdlog::warn("model sandbox: {}", parsed.status().message());
      return;
    }
    if (parsed->confinement) out.confinement = *parsed->confinement;
    if (parsed->progress && progress) progress(*parsed->progress);
    if (parsed->result) out.result = std::move(parsed->result);
  };
  // Reads until both pipes close, then until the child has exited.
  for (;;) {
    const bool pipes_open = fds[0].fd >= 0 || fds[1].fd >= 0 || fds[2].fd >= 0;
    int exited = 0;
    if (!pipes_open) {
      siginfo_t info{};
      if (waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
          info.si_pid == pid) {
        exited = 1;
      }
    }
    if (exited) break;
    // A child that runs out of memory does not always say so (OpenBLAS
    // retries a failed allocation forever): how close it came tells. Only
    // once it runs somm: before, it is a copy of the server.
    if (fds[2].fd < 0) out.peak_data_bytes = std::max(out.peak_data_bytes, DataBytes(pid));
    if (!killed) {
      bool stopping;
      {
        MutexLock lock(&mu_);
        stopping = stopping_;
      }
      if (stopping) {
        kill_child(&out.stopped);
      } else if (cancelled && cancelled()) {
        kill_child(&out.cancelled);
      } else if (Clock::now() >= deadline) {
        kill_child(&out.wall_killed);
      }
    }
    int timeout_ms = 100;
    if (!killed && deadline != Clock::time_point::max()) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      timeout_ms = static_cast<int>(std::clamp<int64_t>(left + 1, 1, 100));
    }
    if (!pipes_open) {
      std::this_thread::sleep_for(std::chrono::milliseconds(std::min(timeout_ms, 10)));
      continue;
    }
    if (poll(fds, 3, timeout_ms) < 0 && errno != EINTR) {
      // Nothing more can be read: end it, so that the wait below returns.
      if (!killed) kill_child(&out.unreadable);
      break;
    }
    char buf[65536];
    for (int i = 0; i < 3; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      const ssize_t n = read(fds[i].fd, buf, sizeof buf);
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n <= 0) {
        close(fds[i].fd);
        fds[i].fd = -1;
        continue;
      }
      if (i == 2) continue;  // nothing is written there
      if (i == 1) {
        out.log_tail.append(buf, static_cast<size_t>(n));
        if (out.log_tail.size() > 2 * kLogTail) {
          out.log_tail.erase(0, out.log_tail.size() - kLogTail);
        }
        continue;
      }
      answer_bytes += static_cast<size_t>(n);
      if (answer_bytes > options_.max_answer_bytes) {
        kill_child(&out.answer_too_long);
        continue;
      }
      pending.append(buf, static_cast<size_t>(n));
      for (size_t nl = pending.find('\n'); nl != std::string::npos; nl = pending.find('\n')) {
        take_line(pending.substr(0, nl));
        pending.erase(0, nl + 1);
      }
    }
  }
  for (pollfd& p : fds) {
    if (p.fd >= 0) close(p.fd);
  }
  if (out.log_tail.size() > kLogTail) out.log_tail.erase(0, out.log_tail.size() - kLogTail);
  {
    // Out of the set first: Shutdown() never signals a reaped pid.
    MutexLock lock(&mu_);
    live_.erase(pid);
    if (!out.confinement.empty()) last_confinement_ = out.confinement;
    // Killed by Shutdown() (or about to be): the server is stopping.
    if (stopping_ && !out.result) out.stopped = true;
  }
  kill(-pid, SIGKILL);  // whatever it left running in its session
  rusage usage{};
  while (wait4(pid, &out.wait_status, 0, &usage) < 0 && errno == EINTR) {
  }
  out.cpu_seconds = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                    static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
  out.max_rss_bytes = static_cast<int64_t>(usage.ru_maxrss) * 1024;
  out.wall_seconds = std::chrono::duration<double>(Clock::now() - started).count();
  spdlog::debug("model sandbox: {} in a child ({}): {:.1f} s, {:.1f} s CPU, {} MiB of data", op,
                out.confinement.empty() ? "confinement not reported" : out.confinement,
                out.wall_seconds, out.cpu_seconds, out.peak_data_bytes >> 20);
  return out;
}

Status ProcessModelSandbox::Judge(const Outcome& o, const std::string& what,
                                  const SandboxLimits& limits) const {
  if (!o.start.ok()) return o.start;
  const std::string memory = what + " used more than its " + std::to_string(limits.memory_mb) +
                             " MiB memory limit";
  if (o.result) {
    if (o.result->status.ok()) return Status::Ok();
    if (o.result->out_of_memory) {
      // The allocator's own words, the last line of a TorchScript traceback.
      std::string words = o.result->status.message();
      while (!words.empty() && (words.back() == '\n' || words.back() == ' ')) words.pop_back();
      if (const size_t nl = words.rfind('\n'); nl != std::string::npos) words.erase(0, nl + 1);
      if (words.size() > 200) words = words.substr(0, 200) + "...";
      return ResourceExhausted(memory + " (" + words + ")");
    }
    return o.result->status;
  }
  if (o.stopped) return Unavailable("server is shutting down");
  if (o.cancelled) return Unavailable(what + " cancelled");
  if (o.unreadable) return Unavailable("the model sandbox could not read its child's answer");
  // No answer: say why from how it ended, and keep its last words in the log.
  std::string last_words = o.log_tail.size() > 2000 ? o.log_tail.substr(o.log_tail.size() - 2000)
                                                     : o.log_tail;
  while (!last_words.empty() && last_words.back() == '\n') last_words.pop_back();
  spdlog::warn("model sandbox: {} ended without an answer after {:.1f} s ({:.1f} s CPU, {} MiB "
               "peak resident, {} MiB of data); its last output: {}",
               what, o.wall_seconds, o.cpu_seconds, o.max_rss_bytes >> 20,
               o.peak_data_bytes >> 20, last_words);
  const int64_t limit_bytes = limits.memory_mb * 1024 * 1024;
  const bool out_of_memory =
      sandbox_wire::LooksLikeOutOfMemory(o.log_tail) ||
      (limit_bytes > 0 && (o.max_rss_bytes >= limit_bytes * 3 / 4 ||
                           o.peak_data_bytes >= limit_bytes * 3 / 4));
  // Near its memory limit (within the large allocation that may have
  // failed), whatever stopped it came of that: a CPU or time limit reached
  // while an allocator retried, a crash on a null pointer.
  if (out_of_memory && !o.answer_too_long) return ResourceExhausted(memory);
  if (o.wall_killed) {
    return DeadlineExceeded(what + " did not finish within its " + Seconds(limits.wall_seconds) +
                            " s time limit");
  }
  if (o.answer_too_long) {
    return Internal(what + " wrote more than " + std::to_string(options_.max_answer_bytes) +
                    " bytes of answer");
  }
  if (WIFSIGNALED(o.wait_status)) {
    const int sig = WTERMSIG(o.wait_status);
    if (sig == SIGXCPU ||
        (sig == SIGKILL && limits.cpu_seconds > 0 && o.cpu_seconds >= limits.cpu_seconds - 0.5)) {
      return ResourceExhausted(what + " ran past its " + Seconds(limits.cpu_seconds) +
                               " s CPU limit");
    }
    const char* name = sigdescr_np(sig);  // strsignal's text, thread-safe
    return Internal(what + " crashed (signal " + std::to_string(sig) + ": " +
                    (name ? name : "unknown") + ")");
  }
  const int code = WIFEXITED(o.wait_status) ? WEXITSTATUS(o.wait_status) : -1;
  if (code == kExitConfineFailed) return Unavailable("the model sandbox could not confine its child");
  if (code == kExitExecFailed) {
    return Unavailable("the model sandbox cannot run " + options_.executable);
  }
  return Internal(what + " exited with status " + std::to_string(code) + " without an answer");
}

StatusOr<ProbeReport> ProcessModelSandbox::Probe(const ProbeRequest& request) {
  ProbeRequest absolute = request;
  absolute.model_dir = fs::absolute(request.model_dir).lexically_normal().string();
  const Outcome o = Run(sandbox_wire::kProbe, sandbox_wire::EncodeProbe(absolute), options_.probe,
                        077, {}, {});
  const Status s = Judge(o, "the model's probe", options_.probe);
  // Whatever the child answered is the model's doing, even UNAVAILABLE
  // (a device it asked for): only the sandbox's own troubles are.
  if (!s.ok() && o.result && s.code() == StatusCode::kUnavailable) {
    return InvalidArgument(s.message());
  }
  if (!s.ok()) return s;
  return ProbeReport{o.result->peak_memory_bytes};
}

StatusOr<VariantSet> ProcessModelSandbox::GenerateVariants(
    const VariantJobRequest& request, std::function<void(const VariantProgress&)> progress) {
  if (request.options.variants_root.empty()) return InvalidArgument("variants_root is not set");
  VariantJobRequest absolute = request;
  absolute.model_dir = fs::absolute(request.model_dir).lexically_normal().string();
  absolute.options.variants_root =
      fs::absolute(request.options.variants_root).lexically_normal().string();
  if (request.private_files) {
    // Its folder is the owner's before the child writes a byte in it, and
    // whatever an earlier run left there becomes so too.
    const fs::path folder = fs::path(absolute.options.variants_root) / request.config.name;
    std::error_code ec;
    fs::create_directories(folder, ec);
    RestrictToOwner(folder.string());
  }
  const Outcome o = Run(sandbox_wire::kVariants, sandbox_wire::EncodeVariantJob(absolute),
                        options_.variants, request.private_files ? 077 : 022, progress,
                        request.options.cancelled);
  SOMM_RETURN_IF_ERROR(Judge(o, "variant generation", options_.variants));
  SOMM_ASSIGN_OR_RETURN(VariantSet set, LoadVariantSet(request.options.variants_root,
                                                       request.config.name, request.version));
  set.warnings = o.result->warnings;
  return set;
}

}  // namespace somm
