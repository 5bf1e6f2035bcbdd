#include "sandbox/confinement.h"

#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <mutex>

namespace somm {
namespace {

#if defined(__x86_64__)
constexpr uint32_t kNativeArch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
constexpr uint32_t kNativeArch = AUDIT_ARCH_AARCH64;
#else
constexpr uint32_t kNativeArch = 0;  // no filter
#endif

constexpr uint32_t kNamespaceFlags = CLONE_NEWUSER | CLONE_NEWNET | CLONE_NEWNS | CLONE_NEWPID |
                                     CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP;

// Appends BPF instructions to a fixed array; past its capacity it only
// counts, and the caller sees the overflow.
class Program {
 public:
  Program(sock_filter* out, size_t capacity) : out_(out), capacity_(capacity) {}
  void Add(uint16_t code, uint32_t k, uint8_t jt = 0, uint8_t jf = 0) {
    if (size_ < capacity_) out_[size_] = sock_filter{code, jt, jf, k};
    ++size_;
  }
  void LoadNr() { Add(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)); }
  void LoadArg(int i, bool high = false) {
    // Little-endian: the low half of a 64-bit argument comes first.
    Add(BPF_LD | BPF_W | BPF_ABS,
        static_cast<uint32_t>(offsetof(seccomp_data, args) + 8 * i + (high ? 4 : 0)));
  }
  void Return(uint32_t value) { Add(BPF_RET | BPF_K, value); }
  static uint32_t Errno(int e) { return SECCOMP_RET_ERRNO | (static_cast<uint32_t>(e) & SECCOMP_RET_DATA); }

  // nr -> EPERM (2 instructions; the accumulator holds nr).
  void Deny(long nr, int error = EPERM) {
    Add(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(nr), 0, 1);
    Return(Errno(error));
  }
  // nr -> allowed only when argument `arg` is `self` (a pid or a thread
  // group) or, with zero_too, 0 (the caller itself); else EPERM. The
  // accumulator holds nr and keeps it when nr does not match.
  void OnlySelf(long nr, int arg, pid_t self, bool zero_too) {
    Add(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(nr), 0, zero_too ? 5 : 4);
    LoadArg(arg);
    Add(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(self), zero_too ? 2 : 1, 0);
    if (zero_too) Add(BPF_JMP | BPF_JEQ | BPF_K, 0u, 1, 0);
    Return(Errno(EPERM));
    Return(SECCOMP_RET_ALLOW);
  }
  size_t size() const { return size_; }

 private:
  sock_filter* out_;
  size_t capacity_;
  size_t size_ = 0;
};

bool WriteWhole(const char* path, const char* text) noexcept {
  const int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  size_t n = 0;
  while (text[n] != '\0') ++n;
  const ssize_t written = write(fd, text, n);
  close(fd);
  return written == static_cast<ssize_t>(n);
}

// unshare(CLONE_NEWUSER | CLONE_NEWNET) and this process's own user and
// group mapped: 1 done, 0 refused (nothing changed), -1 half done.
int EnterNamespaces(const char* uid_map, const char* gid_map) noexcept {
  if (unshare(CLONE_NEWUSER | CLONE_NEWNET) != 0) return 0;
  if (!WriteWhole("/proc/self/setgroups", "deny") || !WriteWhole("/proc/self/uid_map", uid_map) ||
      !WriteWhole("/proc/self/gid_map", gid_map)) {
    return -1;
  }
  return 1;
}

bool SetLimit(int resource, rlim_t soft, rlim_t hard) noexcept {
  const rlimit limit{soft, hard};
  return setrlimit(resource, &limit) == 0;
}

}  // namespace

std::string DescribeConfinement(unsigned applied) {
  std::string out;
  const auto add = [&out](const char* what) { out += (out.empty() ? "" : ", ") + std::string(what); };
  if (applied & kConfinedRlimits) add("rlimits");
  if (applied & kConfinedNamespaces) add("user and network namespaces");
  if (applied & kConfinedSeccomp) add("seccomp filter");
  return out.empty() ? "none" : out;
}

size_t BuildSeccompFilter(pid_t self, sock_filter* out, size_t capacity) noexcept {
  if (kNativeArch == 0) return 0;
  Program p(out, capacity);
  p.Add(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch));
  p.Add(BPF_JMP | BPF_JEQ | BPF_K, kNativeArch, 1, 0);
  p.Return(SECCOMP_RET_KILL_PROCESS);
  p.LoadNr();
#if defined(__x86_64__)
  // x32 system calls: the same numbers with bit 30 set.
  p.Add(BPF_JMP | BPF_JGE | BPF_K, 0x40000000u, 0, 1);
  p.Return(Program::Errno(EPERM));
#endif
  // No sockets of any family: no network, and no local service reached
  // through a socket file either (socketpair stays: it reaches nothing).
  p.Deny(__NR_socket);
  for (long nr : {
#ifdef __NR_ptrace
           static_cast<long>(__NR_ptrace),
#endif
           static_cast<long>(__NR_process_vm_readv), static_cast<long>(__NR_process_vm_writev),
           static_cast<long>(__NR_tkill),
#ifdef __NR_pidfd_open
           static_cast<long>(__NR_pidfd_open), static_cast<long>(__NR_pidfd_send_signal),
           static_cast<long>(__NR_pidfd_getfd),
#endif
           static_cast<long>(__NR_unshare), static_cast<long>(__NR_setns),
#ifdef __NR_io_uring_setup
           static_cast<long>(__NR_io_uring_setup), static_cast<long>(__NR_io_uring_enter),
           static_cast<long>(__NR_io_uring_register),
#endif
           static_cast<long>(__NR_bpf), static_cast<long>(__NR_perf_event_open),
           static_cast<long>(__NR_userfaultfd), static_cast<long>(__NR_keyctl),
           static_cast<long>(__NR_add_key), static_cast<long>(__NR_request_key),
           static_cast<long>(__NR_personality), static_cast<long>(__NR_mount),
           static_cast<long>(__NR_umount2), static_cast<long>(__NR_pivot_root),
           static_cast<long>(__NR_chroot), static_cast<long>(__NR_kexec_load),
#ifdef __NR_kexec_file_load
           static_cast<long>(__NR_kexec_file_load),
#endif
           static_cast<long>(__NR_init_module), static_cast<long>(__NR_finit_module),
           static_cast<long>(__NR_delete_module), static_cast<long>(__NR_reboot),
           static_cast<long>(__NR_swapon), static_cast<long>(__NR_swapoff),
           static_cast<long>(__NR_acct), static_cast<long>(__NR_quotactl),
           static_cast<long>(__NR_open_by_handle_at), static_cast<long>(__NR_name_to_handle_at),
           static_cast<long>(__NR_fanotify_init), static_cast<long>(__NR_setrlimit),
           static_cast<long>(__NR_migrate_pages), static_cast<long>(__NR_move_pages),
#ifdef __NR_iopl
           static_cast<long>(__NR_iopl), static_cast<long>(__NR_ioperm),
#endif
#ifdef __NR_fsopen
           static_cast<long>(__NR_fsopen), static_cast<long>(__NR_fsmount),
           static_cast<long>(__NR_move_mount), static_cast<long>(__NR_open_tree),
#endif
       }) {
    p.Deny(nr);
  }
  // clone3's flags are behind a pointer the filter cannot read: ENOSYS
  // makes glibc fall back to clone, whose flags it can.
#ifdef __NR_clone3
  p.Deny(__NR_clone3, ENOSYS);
#endif
  // clone: threads and plain children, no new namespaces.
  p.Add(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(__NR_clone), 0, 4);
  p.LoadArg(0);
  p.Add(BPF_JMP | BPF_JSET | BPF_K, kNamespaceFlags, 0, 1);
  p.Return(Program::Errno(EPERM));
  p.Return(SECCOMP_RET_ALLOW);
  // Signals: to itself (its pid, its process group, 0 = its group) only.
  p.Add(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(__NR_kill), 0, 6);
  p.LoadArg(0);
  p.Add(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(self), 3, 0);
  p.Add(BPF_JMP | BPF_JEQ | BPF_K, 0u, 2, 0);
  p.Add(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(-self), 1, 0);
  p.Return(Program::Errno(EPERM));
  p.Return(SECCOMP_RET_ALLOW);
  p.OnlySelf(__NR_tgkill, 0, self, /*zero_too=*/false);
  p.OnlySelf(__NR_rt_sigqueueinfo, 0, self, false);
  p.OnlySelf(__NR_rt_tgsigqueueinfo, 0, self, false);
  // Another process's priority, scheduling, affinity, I/O priority: no.
  p.OnlySelf(__NR_setpriority, 1, self, true);
  p.OnlySelf(__NR_sched_setscheduler, 0, self, true);
  p.OnlySelf(__NR_sched_setparam, 0, self, true);
  p.OnlySelf(__NR_sched_setattr, 0, self, true);
  p.OnlySelf(__NR_sched_setaffinity, 0, self, true);
  p.OnlySelf(__NR_ioprio_set, 1, self, true);
  // prlimit64 may read limits, never set them (new_limit must be NULL).
  p.Add(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(__NR_prlimit64), 0, 6);
  p.LoadArg(2);
  p.Add(BPF_JMP | BPF_JEQ | BPF_K, 0u, 0, 2);
  p.LoadArg(2, /*high=*/true);
  p.Add(BPF_JMP | BPF_JEQ | BPF_K, 0u, 1, 0);
  p.Return(Program::Errno(EPERM));
  p.Return(SECCOMP_RET_ALLOW);
  p.Return(SECCOMP_RET_ALLOW);
  return p.size() <= capacity ? p.size() : 0;
}

bool SeccompFilterSupported() {
  sock_filter filter[kSeccompFilterCapacity];
  return BuildSeccompFilter(getpid(), filter, kSeccompFilterCapacity) > 0;
}

bool UserNamespacesAllowed() {
  static std::once_flag once;
  static bool allowed = false;
  std::call_once(once, [] {
    char uid_map[64], gid_map[64];
    std::snprintf(uid_map, sizeof uid_map, "%u %u 1", getuid(), getuid());
    std::snprintf(gid_map, sizeof gid_map, "%u %u 1", getgid(), getgid());
    const pid_t pid = fork();
    if (pid < 0) return;
    if (pid == 0) _exit(EnterNamespaces(uid_map, gid_map) == 1 ? 0 : 1);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    allowed = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  });
  return allowed;
}

PreparedConfinement::PreparedConfinement(const ConfinementOptions& options) : options_(options) {
  std::snprintf(uid_map_, sizeof uid_map_, "%u %u 1", getuid(), getuid());
  std::snprintf(gid_map_, sizeof gid_map_, "%u %u 1", getgid(), getgid());
  // Asked for but not allowed here: not tried in the child either (a
  // half-made user namespace would leave it unable to create files).
  if (options_.namespaces && !UserNamespacesAllowed()) options_.namespaces = false;
  if (options_.cpu_seconds > 0) {
    cpu_seconds_ = static_cast<unsigned long>(std::max(1.0, std::ceil(options_.cpu_seconds)));
  }
}

int PreparedConfinement::Apply() const noexcept {
  unsigned applied = 0;
  bool ok = true;
  if (cpu_seconds_ > 0) ok &= SetLimit(RLIMIT_CPU, cpu_seconds_, cpu_seconds_ + 2);
  if (options_.memory_bytes > 0) {
    const rlim_t m = static_cast<rlim_t>(options_.memory_bytes);
    ok &= SetLimit(RLIMIT_DATA, m, m);
  }
  if (options_.max_open_files > 0) {
    const rlim_t n = static_cast<rlim_t>(options_.max_open_files);
    ok &= SetLimit(RLIMIT_NOFILE, n, n);
  }
  ok &= SetLimit(RLIMIT_CORE, 0, 0);
  if (!ok) return -1;
  applied |= kConfinedRlimits;
  if (options_.namespaces) {
    const int entered = EnterNamespaces(uid_map_, gid_map_);
    if (entered < 0) return -1;
    if (entered > 0) applied |= kConfinedNamespaces;
  }
  if (!options_.work_dir.empty() && chdir(options_.work_dir.c_str()) != 0) return -1;
  umask(options_.umask);
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return -1;
  if (options_.seccomp) {
    sock_filter filter[kSeccompFilterCapacity];
    const size_t n = BuildSeccompFilter(getpid(), filter, kSeccompFilterCapacity);
    if (n > 0) {
      sock_fprog program{static_cast<unsigned short>(n), filter};
      if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &program) != 0) return -1;
      applied |= kConfinedSeccomp;
    }
  }
  return static_cast<int>(applied);
}

}  // namespace somm
