// Confinement: what a child process that runs a user's model code gets
// instead of the server's rights, as far as Linux offers it without extra
// privileges (docs/hostile-input.md, "Registration runs in a confined child"):
//
//   * rlimits: CPU seconds (RLIMIT_CPU: SIGXCPU at the limit, SIGKILL two
//     seconds later), memory (RLIMIT_DATA: heap, anonymous maps and thread
//     stacks, the memory a model's tensors take; libraries' code and
//     reserved address space do not count), open files, no core files;
//   * new user and network namespaces, where unprivileged namespaces are
//     allowed: the network namespace has no interface but a loopback that is
//     down, and the user namespace maps only the server's own user and group;
//   * no_new_privs and a seccomp filter that answers EPERM (the process goes
//     on; libtorch's and Python's start-up survive a refused call) to: every
//     socket(), ptrace and process_vm_readv/writev, signals to any process
//     but itself (kill, tgkill, sigqueue; tkill, pidfd_*), changing another
//     process's priority, scheduling, affinity or rlimits, raising any rlimit,
//     new namespaces (unshare, setns, clone with a CLONE_NEW* flag; clone3
//     answers ENOSYS so that glibc falls back to clone), io_uring (its
//     operations bypass seccomp), bpf, perf_event_open, userfaultfd, keyctl,
//     personality, mount and the rest of the administrator's calls. A call of
//     another architecture's ABI (i386, x32) kills the process. Built for
//     x86_64 and aarch64; elsewhere there is no filter (and Supported() says
//     so);
//   * a working folder and a umask.
//
// Prepare everything in the parent (PreparedConfinement's constructor
// allocates); Apply() runs in the child between fork() and exec(), calls only
// async-signal-safe system calls and allocates nothing, so it is safe after
// fork() in a multi-threaded server. The filter and the limits survive
// exec(), and are inherited by whatever the child starts (Python).
//
// Thread-safety: a PreparedConfinement is immutable once built.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>

struct sock_filter;

namespace somm {

struct ConfinementOptions {
  double cpu_seconds = 0;     // 0 = unlimited
  int64_t memory_bytes = 0;   // RLIMIT_DATA; 0 = unlimited
  int64_t max_open_files = 1024;
  bool namespaces = true;     // try new user and network namespaces
  bool seccomp = true;
  std::string work_dir;       // "" = stay where it is
  mode_t umask = 022;
};

// What Apply() put in place (bits).
enum ConfinementApplied : unsigned {
  kConfinedRlimits = 1u << 0,
  kConfinedNamespaces = 1u << 1,
  kConfinedSeccomp = 1u << 2,
};
// "rlimits, user and network namespaces, seccomp filter".
std::string DescribeConfinement(unsigned applied);

class PreparedConfinement {
 public:
  explicit PreparedConfinement(const ConfinementOptions& options);
  // In the child, after fork(), before exec(): rlimits, namespaces (when
  // asked and allowed), working folder, umask, no_new_privs and the filter.
  // Returns the ConfinementApplied bits, or -1 when a step that was asked
  // for and is available failed (the child must not go on: exit).
  int Apply() const noexcept;

 private:
  ConfinementOptions options_;
  unsigned long cpu_seconds_ = 0;  // whole seconds, rounded up; 0 = none
  char uid_map_[64] = {0};
  char gid_map_[64] = {0};
};

// Whether this process may create user and network namespaces (forks a
// child that tries; the answer is kept after the first call).
bool UserNamespacesAllowed();

// The seccomp program for process `self` (signals may go to it and its
// process group only): writes up to `capacity` instructions to `out` and
// returns how many, or 0 on an architecture without a filter.
// Async-signal-safe.
size_t BuildSeccompFilter(pid_t self, sock_filter* out, size_t capacity) noexcept;
inline constexpr size_t kSeccompFilterCapacity = 320;
bool SeccompFilterSupported();

}  // namespace somm
