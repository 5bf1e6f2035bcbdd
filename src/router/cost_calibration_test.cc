#include "router/cost_calibration.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <random>
#include <vector>

namespace somm {
namespace {

using namespace std::chrono_literals;

const CostCalibration::TimePoint kT0 = CostCalibration::TimePoint{} + 1h;

CostCalibration::Options Opts(int min_batches, double quantile) {
  CostCalibration::Options o;
  o.min_batches = min_batches;
  o.quantile = quantile;
  return o;
}

TEST(CostCalibrationTest, UnseenDeviceKeepsTheProfile) {
  CostCalibration c(Opts(1, 1.0));
  EXPECT_DOUBLE_EQ(c.OverheadMs("cpu", "a", kT0), 0.0);
  c.Observe("cpu", "a", 0.5, 0.25, kT0);
  EXPECT_DOUBLE_EQ(c.OverheadMs("cuda:0", "a", kT0), 0.0);
  EXPECT_DOUBLE_EQ(c.OverheadMs("cpu", "a", kT0), 0.25);
}

// The first batch after a load is often many times slower than the rest.
TEST(CostCalibrationTest, OneBatchDoesNotSetTheOverhead) {
  CostCalibration c(Opts(3, 1.0));
  c.Observe("cpu", "a", 101.0, 1.0, kT0);
  c.Observe("cpu", "a", 2.0, 1.0, kT0);
  EXPECT_DOUBLE_EQ(c.OverheadMs("cpu", "a", kT0), 0.0);
  c.Observe("cpu", "a", 2.0, 1.0, kT0);
  EXPECT_DOUBLE_EQ(c.OverheadMs("cpu", "a", kT0), 100.0);  // now counted, at quantile 1
}

TEST(CostCalibrationTest, VariantWithoutEnoughBatchesGetsItsDevicesOverhead) {
  CostCalibration c(Opts(2, 1.0));
  c.Observe("cpu", "a", 1.5, 1.0, kT0);  // 0.5 ms over
  c.Observe("cpu", "a", 1.5, 1.0, kT0);
  c.Observe("cpu", "b", 3.0, 1.0, kT0);  // 2 ms over, once: not enough for b alone
  EXPECT_DOUBLE_EQ(c.OverheadMs("cpu", "a", kT0), 0.5);
  EXPECT_DOUBLE_EQ(c.OverheadMs("cpu", "b", kT0), 2.0);             // the device's
  EXPECT_DOUBLE_EQ(c.OverheadMs("cpu", "never-served", kT0), 2.0);  // the device's
  c.Observe("cpu", "c", 1.25, 1.0, kT0);
  c.Observe("cpu", "c", 1.25, 1.0, kT0);
  EXPECT_DOUBLE_EQ(c.OverheadMs("cpu", "c", kT0), 0.25);  // its own, below the device's 2
}

TEST(CostCalibrationTest, OverheadIsTheQuantileOfTheDifferences) {
  CostCalibration::Options o = Opts(1, 0.9);
  o.window = 11;
  CostCalibration c(o);
  for (int i = 1; i <= 11; ++i) c.Observe("cpu", "a", 1.0 + i, 1.0, kT0);  // 1 .. 11 ms over
  EXPECT_DOUBLE_EQ(c.OverheadMs("cpu", "a", kT0), 10.0);  // the 10th of 11
}

TEST(CostCalibrationTest, OldBatchesFallOutOfTheWindow) {
  CostCalibration::Options o = Opts(1, 1.0);
  o.window = 4;
  CostCalibration c(o);
  c.Observe("cpu", "a", 101.0, 1.0, kT0);  // one disturbed batch
  for (int i = 0; i < 3; ++i) c.Observe("cpu", "a", 3.0, 1.0, kT0);
  EXPECT_DOUBLE_EQ(c.OverheadMs("cpu", "a", kT0), 100.0);
  c.Observe("cpu", "a", 3.0, 1.0, kT0);  // pushes it out
  EXPECT_DOUBLE_EQ(c.OverheadMs("cpu", "a", kT0), 2.0);
}

// Many batches through a small window, with repeated values: the overhead
// is always the quantile of exactly the last `window` differences.
TEST(CostCalibrationTest, OverheadFollowsTheWindowBatchAfterBatch) {
  CostCalibration::Options o = Opts(1, 0.5);
  o.window = 7;
  CostCalibration c(o);
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> tenths(0, 30);
  std::deque<double> last;
  for (int i = 0; i < 2000; ++i) {
    const double over = tenths(rng) / 10.0;
    c.Observe("cpu", "a", 1.0 + over, 1.0, kT0);
    last.push_back(over);
    if (last.size() > 7) last.pop_front();
    std::vector<double> sorted(last.begin(), last.end());
    std::sort(sorted.begin(), sorted.end());
    const size_t at = static_cast<size_t>(std::ceil(0.5 * static_cast<double>(sorted.size() - 1)));
    ASSERT_NEAR(c.OverheadMs("cpu", "a", kT0), sorted[at], 1e-12) << "after batch " << i;
  }
}

// A burst made the predictions too high for every client's ceiling, so no
// batch runs to correct them: they must not stay that way for good.
TEST(CostCalibrationTest, BatchesOlderThanMaxAgeNoLongerCount) {
  CostCalibration::Options o = Opts(1, 1.0);
  o.max_age = 10s;
  CostCalibration c(o);
  c.Observe("cpu", "a", 101.0, 1.0, kT0);
  EXPECT_DOUBLE_EQ(c.OverheadMs("cpu", "a", kT0 + 10s), 100.0);
  EXPECT_DOUBLE_EQ(c.OverheadMs("cpu", "a", kT0 + 11s), 0.0);
  c.Observe("cpu", "a", 3.0, 1.0, kT0 + 12s);  // the burst's batch is gone
  EXPECT_DOUBLE_EQ(c.OverheadMs("cpu", "a", kT0 + 12s), 2.0);
}

TEST(CostCalibrationTest, ServingFasterThanTheProfileLeavesTheProfile) {
  CostCalibration c(Opts(1, 1.0));
  c.Observe("cpu", "a", 0.5, 1.0, kT0);
  EXPECT_DOUBLE_EQ(c.OverheadMs("cpu", "a", kT0), 0.0);
}

TEST(CostCalibrationTest, MeaninglessTimesAreIgnored) {
  CostCalibration c(Opts(1, 0.0));  // the smallest difference seen: any ignored one would show
  c.Observe("cpu", "a", 3.0, 1.0, kT0);
  c.Observe("cpu", "a", 0.0, 1.0, kT0);
  c.Observe("cpu", "a", 1.0, 0.0, kT0);
  c.Observe("cpu", "a", -1.0, 1.0, kT0);
  EXPECT_DOUBLE_EQ(c.OverheadMs("cpu", "a", kT0), 2.0);
}

}  // namespace
}  // namespace somm
