#include "batching/slo_policy.h"

#include <gtest/gtest.h>

#include <cmath>

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

}  // namespace
}  // namespace somm
