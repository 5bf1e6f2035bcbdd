// SerialExecutor (serial_executor.h): closures run in order on one thread;
// with a bound, the closure past it is refused and dropped at once.
#include "common/serial_executor.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <vector>

namespace somm {
namespace {

TEST(SerialExecutorTest, RunsInOrderAndRunsWhatWasPostedBeforeShutdown) {
  std::vector<int> order;
  {
    SerialExecutor executor("test");
    for (int i = 0; i < 5; ++i) EXPECT_TRUE(executor.Post([&order, i] { order.push_back(i); }));
    executor.Shutdown();
    EXPECT_EQ(executor.TryPost([] {}), SerialExecutor::Posted::kStopped);
  }
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));
}

TEST(SerialExecutorTest, PastItsBoundTheNextClosureIsRefused) {
  SerialExecutor executor("test", 2);
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::promise<void> running;
  ASSERT_EQ(executor.TryPost([&] {
    running.set_value();
    released.wait();
  }),
            SerialExecutor::Posted::kQueued);
  running.get_future().wait();  // the first runs: it no longer waits
  std::atomic<int> ran{0};
  EXPECT_EQ(executor.TryPost([&] { ++ran; }), SerialExecutor::Posted::kQueued);
  EXPECT_EQ(executor.TryPost([&] { ++ran; }), SerialExecutor::Posted::kQueued);
  EXPECT_EQ(executor.TryPost([&] { ++ran; }), SerialExecutor::Posted::kFull);
  EXPECT_FALSE(executor.Post([&] { ++ran; }));
  release.set_value();
  executor.Shutdown();
  EXPECT_EQ(ran.load(), 2);
}

}  // namespace
}  // namespace somm
