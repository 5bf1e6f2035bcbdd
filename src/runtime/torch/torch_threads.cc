#include "runtime/torch/torch_threads.h"

#include <ATen/Config.h>
#include <ATen/Parallel.h>
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <exception>
#include <system_error>
#include <thread>

#if AT_PARALLEL_OPENMP
#include <omp.h>
#endif

namespace somm {
namespace {

// Under OpenMP (Debian's libtorch) a thread applies the process-wide default
// thread count the first time it runs a parallel op
// (at::internal::lazy_init_num_threads); a count set on the thread before
// that is silently replaced. at::get_num_threads() runs that first-time
// initialisation, so that a count set after it sticks.
void InitThreadCountNow() { (void)at::get_num_threads(); }

void LowerPriorityOfThisThread(const BackgroundThreadOptions& options) {
  if (options.sched_idle) {
    sched_param param{};
    if (sched_setscheduler(0, SCHED_IDLE, &param) == 0) return;  // 0: this thread
  }
  // On Linux, setpriority(PRIO_PROCESS, tid) changes one thread (setpriority(2),
  // BUGS); raising nice needs no privilege. If it fails the work runs at normal
  // priority: slower for the others, not wrong.
  if (options.nice > 0) {
    setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), std::min(options.nice, 19));
  }
}

}  // namespace

std::chrono::nanoseconds ThisThreadCpuTime() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
}

std::chrono::nanoseconds RunOnBackgroundThread(const BackgroundThreadOptions& options,
                                               const char* name,
                                               const std::function<void()>& work) {
  std::exception_ptr thrown;
  std::thread thread;
  std::chrono::nanoseconds cpu{0};
  try {
    thread = std::thread([&] {
      pthread_setname_np(pthread_self(), name);
      LowerPriorityOfThisThread(options);
      InitThreadCountNow();
#if AT_PARALLEL_OPENMP
      // Not at::set_num_threads: that also changes the process-wide default,
      // which every thread that has not yet run a parallel op would pick up.
      omp_set_num_threads(std::max(1, options.intra_op_threads));
#endif
      const auto cpu_start = ThisThreadCpuTime();
      try {
        work();
        cpu = ThisThreadCpuTime() - cpu_start;
      } catch (...) {
        cpu = ThisThreadCpuTime() - cpu_start;
        thrown = std::current_exception();  // rethrown to the caller, as a direct call would
      }
    });
  } catch (const std::system_error&) {
    const auto cpu_start = ThisThreadCpuTime();
    work();  // no thread to be had: do it here rather than not at all
    return ThisThreadCpuTime() - cpu_start;
  }
  thread.join();
  if (thrown) std::rethrow_exception(thrown);
  return cpu;
}

void BindIntraOpThreads(int n) {
  InitThreadCountNow();
#if AT_PARALLEL_OPENMP
  // Not at::set_num_threads. Besides this thread's OpenMP team size it sets
  // the process-wide default and rebuilds libtorch's global pthreadpool
  // (caffe2::pthreadpool(), QNNPACK's), whose fresh workers spin for
  // milliseconds at the caller's priority: every instance start, i.e. every
  // model load, took both cores from the serving threads for 5-10 ms
  // (docs/isolation.md, 2026-11-22, commit 136fe43).
  omp_set_num_threads(std::max(1, n));
#else
  at::set_num_threads(std::max(1, n));
#endif
}

}  // namespace somm
