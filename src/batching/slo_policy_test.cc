#include "batching/slo_policy.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace somm {
namespace {

TEST(ComputePredictorTest, UnknownWithoutSeedOrObservations) {
  ComputePredictor p(8, {});
  EXPECT_FALSE(p.PredictUs(1).has_value());
  EXPECT_FALSE(p.PredictUs(8).has_value());
  EXPECT_FALSE(PredictQueueUs(p, 0, 8).has_value());
}

TEST(ComputePredictorTest, SeedIsUsedUntilObserved) {
  ComputePredictor p(8, [](int64_t n) { return 100.0 + 10.0 * static_cast<double>(n); });
  EXPECT_DOUBLE_EQ(*p.PredictUs(1), 110);
  EXPECT_DOUBLE_EQ(*p.PredictUs(8), 180);
  EXPECT_DOUBLE_EQ(*p.PredictUs(100), 180);  // clamped to max_batch
}

TEST(ComputePredictorTest, ObservationsMoveThePredictionByAlpha) {
  ComputePredictor p(8, [](int64_t) { return 100.0; });
  p.Observe(4, 200);
  EXPECT_DOUBLE_EQ(*p.PredictUs(4), 100 + ComputePredictor::kAlpha * 100);
  for (int i = 0; i < 60; ++i) p.Observe(4, 200);
  EXPECT_NEAR(*p.PredictUs(4), 200, 0.1);
}

TEST(ComputePredictorTest, UnobservedSizesFollowTheSeedScaledByObservations) {
  ComputePredictor p(8, [](int64_t n) { return 100.0 * static_cast<double>(n); });
  for (int i = 0; i < 60; ++i) p.Observe(2, 400);  // twice the seed
  EXPECT_NEAR(*p.PredictUs(4), 800, 1);
  EXPECT_NEAR(*p.PredictUs(1), 200, 1);
}

TEST(ComputePredictorTest, WithoutSeedTheFirstObservationIsTakenAsIs) {
  ComputePredictor p(8, {});
  p.Observe(2, 300);
  EXPECT_DOUBLE_EQ(*p.PredictUs(2), 300);
  EXPECT_DOUBLE_EQ(*p.PredictUs(1), 300);   // below the smallest known size: its time
  EXPECT_DOUBLE_EQ(*p.PredictUs(8), 1200);  // above the largest: its time per sample
  p.Observe(6, 500);
  EXPECT_DOUBLE_EQ(*p.PredictUs(4), 400);  // between: interpolated
}

TEST(ComputePredictorTest, UselessSeedValuesAreUnknown) {
  ComputePredictor p(4, [](int64_t n) { return n == 2 ? 50.0 : (n == 3 ? NAN : -1.0); });
  EXPECT_DOUBLE_EQ(*p.PredictUs(1), 50);
  EXPECT_DOUBLE_EQ(*p.PredictUs(4), 100);
}

TEST(ComputePredictorTest, NonBatchingModelHasOneSize) {
  ComputePredictor p(0, [](int64_t) { return 70.0; });
  EXPECT_DOUBLE_EQ(*p.PredictUs(1), 70);
  EXPECT_DOUBLE_EQ(*PredictQueueUs(p, 3, 1), 210);
}

TEST(BatchCapAimdTest, DecreasesByATenthAndIncreasesByOne) {
  BatchCapAimd cap(20);
  EXPECT_EQ(cap.cap(), 20);
  cap.OnBatch(true);
  EXPECT_EQ(cap.cap(), 20);  // never above the ceiling
  cap.OnBatch(false);
  EXPECT_EQ(cap.cap(), 18);
  cap.OnBatch(false);
  EXPECT_EQ(cap.cap(), 16);  // floor(16.2)
  cap.OnBatch(true);
  EXPECT_EQ(cap.cap(), 17);
}

TEST(BatchCapAimdTest, NeverBelowOne) {
  BatchCapAimd cap(3);
  for (int i = 0; i < 5; ++i) cap.OnBatch(false);
  EXPECT_EQ(cap.cap(), 1);
  cap.OnBatch(true);
  EXPECT_EQ(cap.cap(), 2);
}

TEST(PredictQueueUsTest, CutsSamplesIntoFullBatchesAndARemainder) {
  ComputePredictor p(8, [](int64_t n) { return 100.0 + 10.0 * static_cast<double>(n); });
  EXPECT_DOUBLE_EQ(*PredictQueueUs(p, 0, 4), 0);
  EXPECT_DOUBLE_EQ(*PredictQueueUs(p, 4, 4), 140);
  EXPECT_DOUBLE_EQ(*PredictQueueUs(p, 11, 4), 2 * 140 + 130);
}

// Each queued task: samples and slack (µs until its deadline; inf: none).
NextBatch Next(const ComputePredictor& p, int64_t cap, const std::vector<QueuedTaskView>& q) {
  return NextBatchOf(p, cap, q.begin(), q.end(),
                     [](const QueuedTaskView& t) -> std::optional<QueuedTaskView> { return t; });
}

constexpr double kNone = std::numeric_limits<double>::infinity();

TEST(NextBatchOfTest, TakesTheWholeQueueWithinTheCap) {
  ComputePredictor p(8, [](int64_t n) { return 100.0 * static_cast<double>(n); });
  const NextBatch b = Next(p, 8, {{1, kNone}, {2, kNone}, {1, kNone}});
  EXPECT_EQ(b.tasks, 3u);
  EXPECT_EQ(b.samples, 4);
  EXPECT_FALSE(b.cut);
}

TEST(NextBatchOfTest, TheCapEndsTheBatchButTheHeadAlwaysGoes) {
  ComputePredictor p(8, [](int64_t n) { return 100.0 * static_cast<double>(n); });
  NextBatch b = Next(p, 4, {{3, kNone}, {2, kNone}});
  EXPECT_EQ(b.tasks, 1u);
  EXPECT_TRUE(b.cut);
  b = Next(p, 4, {{6, kNone}, {1, kNone}});  // a head past the cap still goes, alone
  EXPECT_EQ(b.tasks, 1u);
  EXPECT_EQ(b.samples, 6);
}

TEST(NextBatchOfTest, ATightDeadlineBehindRelaxedOnesCutsTheBatchShort) {
  // 100 µs per sample: three samples end at 300 µs, four at 400.
  ComputePredictor p(8, [](int64_t n) { return 100.0 * static_cast<double>(n); });
  NextBatch b = Next(p, 8, {{1, 10'000}, {1, 10'000}, {1, 350}, {1, 10'000}});
  EXPECT_EQ(b.tasks, 3u);  // the fourth would end the batch after the third's deadline
  EXPECT_TRUE(b.cut);
  b = Next(p, 8, {{1, 10'000}, {1, 10'000}, {1, 250}});
  EXPECT_EQ(b.tasks, 2u);  // the tight one itself would end late in a batch of 3: it waits
  // Without an SLO nothing cuts short.
  b = Next(p, 8, {{1, kNone}, {1, kNone}, {1, kNone}, {1, kNone}});
  EXPECT_EQ(b.tasks, 4u);
}

TEST(NextBatchOfTest, ATaskThatCannotJoinEndsThePrefix) {
  ComputePredictor p(8, [](int64_t) { return 100.0; });
  const std::vector<int> shapes = {1, 1, 2, 1};
  const NextBatch b = NextBatchOf(p, 8, shapes.begin(), shapes.end(),
                                  [](int shape) -> std::optional<QueuedTaskView> {
                                    if (shape != 1) return std::nullopt;
                                    return QueuedTaskView{1};
                                  });
  EXPECT_EQ(b.tasks, 2u);
  EXPECT_TRUE(b.cut);
}

}  // namespace
}  // namespace somm
