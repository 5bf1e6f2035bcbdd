// The confinement applied in a forked child of the test, as the sandbox
// applies it between fork() and exec(): each refused call is tried there and
// the child reports through a pipe.
#include "sandbox/confinement.h"

#include <gtest/gtest.h>
#include <linux/filter.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <string>

namespace somm {
namespace {

// Runs `check` in a child confined by `options`; returns what it wrote
// (at most 4 KiB), or "confinement failed".
template <typename Check>
std::string InConfinedChild(const ConfinementOptions& options, Check check) {
  const PreparedConfinement confinement(options);
  int fds[2];
  if (pipe(fds) != 0) return "no pipe";
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    const int applied = confinement.Apply();
    std::string out = applied < 0 ? "confinement failed" : check(static_cast<unsigned>(applied));
    [[maybe_unused]] ssize_t n = write(fds[1], out.data(), out.size());
    _exit(0);
  }
  close(fds[1]);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  waitpid(pid, nullptr, 0);
  return out;
}

std::string Outcome(long rc) { return rc >= 0 ? "ok" : errno == EPERM ? "EPERM" : std::to_string(errno); }

TEST(ConfinementTest, TheFilterRefusesSocketsSignalsToOthersAndTracing) {
  if (!SeccompFilterSupported()) GTEST_SKIP() << "no seccomp filter on this architecture";
  ConfinementOptions o;
  o.namespaces = false;
  const pid_t parent = getpid();
  const std::string out = InConfinedChild(o, [parent](unsigned applied) {
    std::string r = (applied & kConfinedSeccomp) ? "seccomp" : "no-seccomp";
    r += " inet=" + Outcome(socket(AF_INET, SOCK_STREAM, 0));
    r += " inet6=" + Outcome(socket(AF_INET6, SOCK_DGRAM, 0));
    r += " unix=" + Outcome(socket(AF_UNIX, SOCK_STREAM, 0));
    r += " kill_parent=" + Outcome(kill(parent, 0));
    r += " tgkill_parent=" + Outcome(syscall(SYS_tgkill, parent, parent, 0));
    r += " kill_self=" + Outcome(kill(getpid(), 0));
    r += " kill_group=" + Outcome(kill(0, 0));
    r += " vm_read=" + Outcome(syscall(SYS_process_vm_readv, parent, nullptr, 0, nullptr, 0, 0));
    r += " unshare=" + Outcome(unshare(CLONE_NEWUSER));
    r += " personality=" + Outcome(syscall(SYS_personality, 0));
    r += " bpf=" + Outcome(syscall(SYS_bpf, 0, nullptr, 0));
#ifdef SYS_io_uring_setup
    r += " io_uring=" + Outcome(syscall(SYS_io_uring_setup, 1, nullptr));
#endif
#ifdef SYS_clone3
    const long clone3 = syscall(SYS_clone3, nullptr, 0);
    r += std::string(" clone3=") + (clone3 < 0 && errno == ENOSYS ? "ENOSYS" : "other");
#endif
    rlimit files{};
    r += " get_rlimit=" + Outcome(getrlimit(RLIMIT_NOFILE, &files));
    r += " set_rlimit=" + Outcome(setrlimit(RLIMIT_NOFILE, &files));
    return r;
  });
  std::string expected =
      "seccomp inet=EPERM inet6=EPERM unix=EPERM kill_parent=EPERM tgkill_parent=EPERM "
      "kill_self=ok kill_group=ok vm_read=EPERM unshare=EPERM personality=EPERM bpf=EPERM";
#ifdef SYS_io_uring_setup
  expected += " io_uring=EPERM";
#endif
#ifdef SYS_clone3
  expected += " clone3=ENOSYS";
#endif
  expected += " get_rlimit=ok set_rlimit=EPERM";
  EXPECT_EQ(out, expected);
}

TEST(ConfinementTest, LimitsWorkingFolderAndUmaskAreSet) {
  ConfinementOptions o;
  o.namespaces = false;
  o.seccomp = false;
  o.cpu_seconds = 2.5;
  o.max_open_files = 64;
  o.work_dir = "/";
  o.umask = 077;
  const std::string out = InConfinedChild(o, [](unsigned applied) {
    rlimit cpu{}, files{}, core{};
    getrlimit(RLIMIT_CPU, &cpu);
    getrlimit(RLIMIT_NOFILE, &files);
    getrlimit(RLIMIT_CORE, &core);
    char cwd[64] = {0};
    const mode_t mask = umask(0);
    return std::to_string(applied) + " cpu=" + std::to_string(cpu.rlim_cur) + "/" +
           std::to_string(cpu.rlim_max) + " files=" + std::to_string(files.rlim_cur) +
           " core=" + std::to_string(core.rlim_max) + " cwd=" + (getcwd(cwd, sizeof cwd) ? cwd : "?") +
           " umask=" + std::to_string(mask);
  });
  EXPECT_EQ(out, std::to_string(kConfinedRlimits) + " cpu=3/5 files=64 core=0 cwd=/ umask=63");
}

TEST(ConfinementTest, UserAndNetworkNamespacesWhereAllowed) {
  if (!UserNamespacesAllowed()) GTEST_SKIP() << "unprivileged user namespaces are not allowed here";
  struct stat outside {};
  ASSERT_EQ(stat("/proc/self/ns/net", &outside), 0);
  ConfinementOptions o;
  o.seccomp = false;
  const uid_t uid = getuid();
  const std::string out = InConfinedChild(o, [&outside, uid](unsigned applied) {
    struct stat inside {};
    stat("/proc/self/ns/net", &inside);
    return std::string((applied & kConfinedNamespaces) ? "namespaces" : "none") +
           (inside.st_ino != outside.st_ino ? " own-net" : " shared-net") +
           (getuid() == uid ? " same-uid" : " other-uid");
  });
  EXPECT_EQ(out, "namespaces own-net same-uid");
}

TEST(ConfinementTest, DescribesWhatApplied) {
  EXPECT_EQ(DescribeConfinement(0), "none");
  EXPECT_EQ(DescribeConfinement(kConfinedRlimits | kConfinedSeccomp), "rlimits, seccomp filter");
  EXPECT_EQ(DescribeConfinement(kConfinedRlimits | kConfinedNamespaces | kConfinedSeccomp),
            "rlimits, user and network namespaces, seccomp filter");
}

}  // namespace
}  // namespace somm
