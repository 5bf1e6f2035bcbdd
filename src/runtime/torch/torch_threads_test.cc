#include "runtime/torch/torch_threads.h"

#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstring>
#include <future>
#include <stdexcept>
#include <string>
#include <thread>

namespace somm {
namespace {

// The bug: a batcher bound to 1 intra-op thread ran with the count another
// model's batcher had bound later (2 for resnet18), because torch applies the
// process-wide default on a thread's first parallel op. Two batchers start,
// bind, and only then run their first op.
TEST(TorchThreadsTest, BoundCountSurvivesAnotherThreadBindingLater) {
  std::promise<void> bound_one, bound_two;
  std::future<int> seen = std::async(std::launch::async, [&] {
    BindIntraOpThreads(1);
    bound_one.set_value();
    bound_two.get_future().wait();
    return at::get_num_threads();  // the first op: lazy initialisation runs here
  });
  bound_one.get_future().wait();
  std::thread([] { BindIntraOpThreads(2); }).join();
  bound_two.set_value();
  EXPECT_EQ(seen.get(), 1);
}

// The regression: BindIntraOpThreads used at::set_num_threads, which also
// set the process-wide default and rebuilt libtorch's global pthreadpool
// (whose new workers spin for milliseconds), on every instance start.
TEST(TorchThreadsTest, BindingOneThreadLeavesTheDefaultOthersStartFrom) {
  int before = 0;
  std::thread([&] { before = at::get_num_threads(); }).join();
  int bound = 0;
  std::thread([&] {
    BindIntraOpThreads(before == 1 ? 2 : 1);
    bound = at::get_num_threads();
  }).join();
  EXPECT_EQ(bound, before == 1 ? 2 : 1);
  int fresh = 0;
  std::thread([&] { fresh = at::get_num_threads(); }).join();
  EXPECT_EQ(fresh, before);
}

TEST(TorchThreadsTest, BackgroundThreadRunsAtLowPriorityWithItsOwnThreadCount) {
  int before = 0;
  std::thread([&] { before = at::get_num_threads(); }).join();
  BackgroundThreadOptions options;
  options.intra_op_threads = 1;
  int policy = -1, threads = 0;
  char name[16] = {0};
  bool ran_elsewhere = false;
  const pid_t caller = gettid();
  RunOnBackgroundThread(options, "somm-test", [&] {
    policy = sched_getscheduler(0);
    threads = at::get_num_threads();
    pthread_getname_np(pthread_self(), name, sizeof(name));
    ran_elsewhere = gettid() != caller;
  });
  EXPECT_TRUE(ran_elsewhere);
  EXPECT_EQ(policy, SCHED_IDLE);
  EXPECT_EQ(threads, 1);
  EXPECT_STREQ(name, "somm-test");
  // ...and the default other threads start from is untouched.
  int fresh = 0;
  std::thread([&] { fresh = at::get_num_threads(); }).join();
  EXPECT_EQ(fresh, before);
}

TEST(TorchThreadsTest, NiceInsteadOfSchedIdle) {
  BackgroundThreadOptions options;
  options.sched_idle = false;
  options.nice = 15;
  int policy = -1, nice = -100;
  RunOnBackgroundThread(options, "somm-test", [&] {
    policy = sched_getscheduler(0);
    nice = getpriority(PRIO_PROCESS, static_cast<id_t>(gettid()));
  });
  EXPECT_EQ(policy, SCHED_OTHER);
  EXPECT_GE(nice, 15);  // more if the test itself runs niced
}

TEST(TorchThreadsTest, AnExceptionReachesTheCaller) {
  EXPECT_THROW(RunOnBackgroundThread({}, "somm-test", [] { throw std::runtime_error("x"); }),
               std::runtime_error);
}

}  // namespace
}  // namespace somm
