#include "router/inference_statistics.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace somm {
namespace {

BatchStats Batch(int64_t size, bool first, int64_t queue_ns, int64_t input_ns, int64_t compute_ns,
                 int64_t output_ns) {
  BatchStats b;
  b.batch_size = size;
  b.first_in_batch = first;
  b.queue_ns = queue_ns;
  b.input_ns = input_ns;
  b.compute_ns = compute_ns;
  b.output_ns = output_ns;
  return b;
}

TEST(InferenceStatisticsTest, StartsAtZeroWithNoBatchRows) {
  InferenceStatistics stats(8);
  const ModelStatistics s = stats.Snapshot();
  EXPECT_EQ(s.inference_count, 0u);
  EXPECT_EQ(s.execution_count, 0u);
  EXPECT_EQ(s.last_inference_ms, 0u);
  EXPECT_EQ(s.inference_stats.success.count, 0u);
  EXPECT_TRUE(s.batch_stats.empty());
}

// Two queries of 1 and 3 samples joined into one batch of 4, then a query
// alone: queries count per query, executions per batch, as Triton's do.
TEST(InferenceStatisticsTest, QueriesCountPerQueryAndBatchesPerExecution) {
  InferenceStatistics stats(8);
  stats.RecordSuccess(1, 5000, Batch(4, true, 100, 10, 1000, 20), 111);
  stats.RecordSuccess(3, 7000, Batch(4, false, 300, 10, 1000, 20), 222);
  stats.RecordSuccess(1, 2000, Batch(1, true, 50, 1, 400, 2), 333);
  const ModelStatistics s = stats.Snapshot();
  EXPECT_EQ(s.inference_count, 5u);
  EXPECT_EQ(s.execution_count, 2u);
  EXPECT_EQ(s.last_inference_ms, 333u);
  const InferStatistics& i = s.inference_stats;
  EXPECT_EQ(i.success.count, 3u);
  EXPECT_EQ(i.success.ns, 14000u);
  EXPECT_EQ(i.queue.count, 3u);
  EXPECT_EQ(i.queue.ns, 450u);
  EXPECT_EQ(i.compute_input.ns, 21u);
  // compute_ns holds the inputs' assembly: the model's run is the rest.
  EXPECT_EQ(i.compute_infer.count, 3u);
  EXPECT_EQ(i.compute_infer.ns, 990u + 990u + 399u);
  EXPECT_EQ(i.compute_output.ns, 42u);
  EXPECT_EQ(i.fail.count, 0u);
  ASSERT_EQ(s.batch_stats.size(), 2u);
  EXPECT_EQ(s.batch_stats[0].batch_size, 1u);  // ascending
  EXPECT_EQ(s.batch_stats[0].compute_infer.count, 1u);
  EXPECT_EQ(s.batch_stats[0].compute_infer.ns, 399u);
  EXPECT_EQ(s.batch_stats[1].batch_size, 4u);
  EXPECT_EQ(s.batch_stats[1].compute_input.count, 1u);
  EXPECT_EQ(s.batch_stats[1].compute_input.ns, 10u);
  EXPECT_EQ(s.batch_stats[1].compute_infer.ns, 990u);
  EXPECT_EQ(s.batch_stats[1].compute_output.ns, 20u);
}

TEST(InferenceStatisticsTest, FailuresAndCacheAnswersCountApart) {
  InferenceStatistics stats(4);
  stats.RecordFailure(3000, 10);
  stats.RecordCacheHit(800, 20);
  stats.RecordCacheMiss(60);
  const ModelStatistics s = stats.Snapshot();
  EXPECT_EQ(s.inference_stats.fail.count, 1u);
  EXPECT_EQ(s.inference_stats.fail.ns, 3000u);
  // A cache hit is a success that did not run the model.
  EXPECT_EQ(s.inference_stats.success.count, 1u);
  EXPECT_EQ(s.inference_stats.cache_hit.count, 1u);
  EXPECT_EQ(s.inference_stats.cache_hit.ns, 800u);
  EXPECT_EQ(s.inference_stats.cache_miss.ns, 60u);
  EXPECT_EQ(s.inference_stats.compute_infer.count, 0u);
  EXPECT_EQ(s.inference_count, 0u);
  EXPECT_EQ(s.execution_count, 0u);
  EXPECT_EQ(s.last_inference_ms, 20u);
}

// A batch size past the lock-free rows (a large max_batch_size) still
// gets its own row, in order after the others.
TEST(InferenceStatisticsTest, LargeBatchSizesGetRowsToo) {
  const int64_t big = InferenceStatistics::kDenseBatchSizes + 7;
  InferenceStatistics stats(big);
  stats.RecordSuccess(big, 1, Batch(big, true, 0, 0, 10, 0), 1);
  stats.RecordSuccess(2, 1, Batch(2, true, 0, 0, 10, 0), 1);
  const ModelStatistics s = stats.Snapshot();
  ASSERT_EQ(s.batch_stats.size(), 2u);
  EXPECT_EQ(s.batch_stats[0].batch_size, 2u);
  EXPECT_EQ(s.batch_stats[1].batch_size, static_cast<uint64_t>(big));
}

TEST(InferenceStatisticsTest, ConcurrentRecordsAddUp) {
  InferenceStatistics stats(64);
  constexpr int kThreads = 4, kEach = 2000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&stats, t] {
      for (int i = 0; i < kEach; ++i) {
        stats.RecordSuccess(1, 10, Batch(1 + (i + t) % 64, true, 1, 1, 3, 1), i);
        stats.Snapshot();  // readers beside writers
      }
    });
  }
  for (auto& t : threads) t.join();
  const ModelStatistics s = stats.Snapshot();
  EXPECT_EQ(s.inference_stats.success.count, uint64_t{kThreads} * kEach);
  EXPECT_EQ(s.inference_stats.success.ns, uint64_t{kThreads} * kEach * 10);
  uint64_t executions = 0;
  for (const BatchSizeStatistics& b : s.batch_stats) executions += b.compute_infer.count;
  EXPECT_EQ(executions, uint64_t{kThreads} * kEach);
}

}  // namespace
}  // namespace somm
