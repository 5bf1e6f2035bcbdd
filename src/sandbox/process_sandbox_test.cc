// ProcessModelSandbox against a stand-in child (sandbox_test_child.cc) that
// loops, sleeps, allocates, crashes or reports what its confinement left it.
#include "sandbox/process_sandbox.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <thread>

namespace somm {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

ProcessSandboxOptions Options() {
  ProcessSandboxOptions o;
  o.executable = SOMM_SANDBOX_TEST_CHILD;
  o.probe = {30, 30, 1024};
  o.variants = {30, 30, 1024};
  return o;
}

Status ProbeAs(ProcessModelSandbox& sandbox, const std::string& mode) {
  ProbeRequest r;
  r.model_name = mode;
  r.model_dir = "/nonexistent";
  return sandbox.Probe(r).status();
}

std::string ValueOf(const std::string& report, const std::string& key) {
  const std::string k = key + "=";
  size_t at = report.find(" " + k);
  at = report.rfind(k, 0) == 0 ? 0 : (at == std::string::npos ? at : at + 1);
  if (at == std::string::npos) return "<absent>";
  const size_t from = at + k.size();
  return report.substr(from, report.find(' ', from) - from);
}

TEST(ProcessSandboxTest, AChildThatAnswersIsOkAndSaysHowItWasConfined) {
  ProcessModelSandbox sandbox(Options());
  EXPECT_TRUE(ProbeAs(sandbox, "ok").ok());
  const std::string confinement = sandbox.LastConfinement();
  EXPECT_NE(confinement.find("rlimits"), std::string::npos) << confinement;
  if (SeccompFilterSupported()) {
    EXPECT_NE(confinement.find("seccomp filter"), std::string::npos) << confinement;
  }
  if (UserNamespacesAllowed()) {
    EXPECT_NE(confinement.find("user and network namespaces"), std::string::npos) << confinement;
  }
  EXPECT_NE(sandbox.Describe().find(confinement), std::string::npos) << sandbox.Describe();
}

TEST(ProcessSandboxTest, TheChildStartsWithAFreshEnvironmentLimitsAndTheFilter) {
  ProcessSandboxOptions o = Options();
  o.probe = {7, 30, 512};
  ProcessModelSandbox sandbox(o);
  const Status s = ProbeAs(sandbox, "report");
  ASSERT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  const std::string& r = s.message();
  // Only these variables (and those the server had of the passed-through
  // ones, which a test run may or may not set).
  std::string env = ValueOf(r, "env") + ",";
  for (const char* allowed : {"PATH", "HOME", "TMPDIR", "LANG", "OMP_WAIT_POLICY", "LD_LIBRARY_PATH",
                              "PYTHONPATH", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
                              "OPENBLAS_NUM_THREADS"}) {
    const std::string entry = std::string(allowed) + ",";
    if (const size_t at = env.find(entry); at != std::string::npos) env.erase(at, entry.size());
  }
  EXPECT_EQ(env, "") << r;
  // Descriptors: stdin, stdout (the model's prints: the log), stderr, and
  // the answer's own copy.
  EXPECT_EQ(ValueOf(r, "fds"), "0,1,2," + ValueOf(r, "answer_fd")) << r;
  EXPECT_EQ(ValueOf(r, "cwd_is_home"), "yes") << r;
  EXPECT_EQ(ValueOf(r, "umask"), "077") << r;  // a probe writes nothing others may read
  EXPECT_EQ(ValueOf(r, "cpu"), "7") << r;
  EXPECT_EQ(ValueOf(r, "data"), std::to_string(512 << 20)) << r;
  EXPECT_EQ(ValueOf(r, "core"), "0") << r;
  EXPECT_EQ(ValueOf(r, "kill_self"), "0") << r;
  EXPECT_EQ(ValueOf(r, "socketpair"), "0") << r;
  EXPECT_EQ(ValueOf(r, "thread"), "ok") << r;  // clone3 refused, glibc falls back to clone
  if (SeccompFilterSupported()) {
    for (const char* refused : {"socket_inet", "socket_unix", "kill_parent", "kill_all",
                                "ptrace_parent", "prlimit_parent", "setrlimit_self",
                                "setpriority_parent", "unshare"}) {
      EXPECT_EQ(ValueOf(r, refused), "EPERM") << refused << ": " << r;
    }
  }
  if (UserNamespacesAllowed()) {
    EXPECT_EQ(ValueOf(r, "net_devices"), "1") << "only a loopback: " << r;
  }
}

TEST(ProcessSandboxTest, AChildThatLoopsIsStoppedAtItsCpuLimit) {
  ProcessSandboxOptions o = Options();
  o.probe = {1, 30, 1024};
  ProcessModelSandbox sandbox(o);
  const auto start = Clock::now();
  const Status s = ProbeAs(sandbox, "loop");
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s.ToString();
  EXPECT_EQ(s.message(), "the model's probe ran past its 1 s CPU limit");
  EXPECT_LT(SecondsSince(start), 20);
}

TEST(ProcessSandboxTest, AChildThatHangsIsKilledAtItsWallClockLimit) {
  ProcessSandboxOptions o = Options();
  o.probe = {30, 1, 1024};
  ProcessModelSandbox sandbox(o);
  const auto start = Clock::now();
  const Status s = ProbeAs(sandbox, "sleep");
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded) << s.ToString();
  EXPECT_EQ(s.message(), "the model's probe did not finish within its 1 s time limit");
  EXPECT_GE(SecondsSince(start), 1.0);
  EXPECT_LT(SecondsSince(start), 5);
}

TEST(ProcessSandboxTest, AChildThatEatsMemoryFailsWithTheMemoryLimit) {
  ProcessSandboxOptions o = Options();
  o.probe = {2, 30, 256};
  ProcessModelSandbox sandbox(o);
  // It says so; it dies saying so; it spins until its CPU limit once an
  // allocation fails (OpenBLAS does), and its peak data tells.
  for (const char* mode : {"alloc", "alloc-crash", "alloc-spin"}) {
    const Status s = ProbeAs(sandbox, mode);
    EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << mode << ": " << s.ToString();
    EXPECT_EQ(s.message().rfind("the model's probe used more than its 256 MiB memory limit", 0), 0u)
        << mode << ": " << s.message();
  }
}

TEST(ProcessSandboxTest, ACrashIsReportedWithItsSignal) {
  ProcessModelSandbox sandbox(Options());
  const Status s = ProbeAs(sandbox, "crash");
  EXPECT_EQ(s.code(), StatusCode::kInternal) << s.ToString();
  EXPECT_NE(s.message().find("the model's probe crashed (signal 11"), std::string::npos) << s.message();
}

TEST(ProcessSandboxTest, ShutdownKillsARunningChildAtOnceAndRefusesMore) {
  ProcessSandboxOptions o = Options();
  o.probe = {60, 60, 1024};
  ProcessModelSandbox sandbox(o);
  Status s;
  std::thread probe([&] { s = ProbeAs(sandbox, "sleep"); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const auto start = Clock::now();
  sandbox.Shutdown();
  probe.join();
  EXPECT_LT(SecondsSince(start), 2);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
  EXPECT_EQ(s.message(), "server is shutting down");
  EXPECT_EQ(ProbeAs(sandbox, "ok").code(), StatusCode::kUnavailable);
}

TEST(ProcessSandboxTest, AVariantJobReportsProgressAndIsCancelled) {
  const fs::path root = fs::temp_directory_path() / ("sandbox-test-" + std::to_string(getpid()));
  fs::create_directories(root);
  ProcessModelSandbox sandbox(Options());
  VariantJobRequest r;
  r.config.name = "progress";
  r.model_dir = "/nonexistent";
  r.options.variants_root = root.string();
  r.private_files = true;
  std::vector<int> done;
  auto set = sandbox.GenerateVariants(r, [&](const VariantProgress& p) { done.push_back(p.done); });
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  EXPECT_EQ(done, (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(set->warnings, std::vector<std::string>{"a warning"});
  // A private model's variants: its folder and what the child wrote in it
  // are the owner's alone.
  struct stat st {};
  ASSERT_EQ(stat((root / "progress").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  ASSERT_EQ(stat((root / "progress" / "1").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  ASSERT_EQ(stat((root / "progress" / "1" / "skipped.json").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);

  std::atomic<bool> cancel{false};
  r.config.name = "sleep";
  r.options.cancelled = [&cancel] { return cancel.load(); };
  std::thread later([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    cancel = true;
  });
  const auto start = Clock::now();
  auto cancelled = sandbox.GenerateVariants(r, {});
  later.join();
  EXPECT_EQ(cancelled.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(cancelled.status().message(), "variant generation cancelled");
  EXPECT_LT(SecondsSince(start), 3);
  fs::remove_all(root);
}

TEST(ProcessSandboxTest, FoldersOfAKilledServersChildrenAreRemovedLiveOnesKept) {
  const pid_t dead = fork();  // a pid that no longer runs
  if (dead == 0) _exit(0);
  waitpid(dead, nullptr, 0);
  const fs::path temp = fs::temp_directory_path();
  const fs::path stale = temp / ("somm-sandbox-" + std::to_string(dead) + "-test");
  const fs::path live = temp / ("somm-sandbox-" + std::to_string(getpid()) + "-test");
  fs::create_directories(stale / "left");
  fs::create_directories(live);
  ProcessModelSandbox sandbox(Options());
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists(live));
  fs::remove_all(live);
}

TEST(ProcessSandboxTest, AMissingBinaryIsTheSandboxsOwnFailure) {
  ProcessSandboxOptions o = Options();
  o.executable = "/nonexistent/somm";
  ProcessModelSandbox sandbox(o);
  const Status s = ProbeAs(sandbox, "ok");
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
  EXPECT_NE(s.message().find("cannot run /nonexistent/somm"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace somm
