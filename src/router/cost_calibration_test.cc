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

cluster::GroupState Group(const std::string& model, const std::string& variant, double warm_ms) {
  cluster::GroupState g;
  g.model = model;
  g.version = 1;
  g.variant = variant;
  g.hardware = HardwareConfig{DeviceKind::kCpu, 0, 1};
  g.device = "cpu";
  g.warm_overhead_ms = warm_ms;
  return g;
}

Candidate CandidateOf(const std::string& model, const std::string& variant) {
  Candidate c;
  c.model = model;
  c.variant_id = model + ":1:" + variant;
  c.hardware = HardwareConfig{DeviceKind::kCpu, 0, 1};
  return c;
}

TEST(CandidateOverheadTest, ServedBatchesThenLoadMeasurementsThenTheDevice) {
  const Candidate fp32 = CandidateOf("m", "ts-fp32");
  const Candidate opt = CandidateOf("m", "ts-opt");  // not loaded
  const Candidate other = CandidateOf("n", "ts-fp32");
  const std::vector<cluster::GroupState> groups = {Group("m", "ts-fp32", 0.04),
                                                   Group("n", "ts-fp32", -1)};
  CostCalibration::Learnt none;
  // Nothing served yet: the variant's own load measurement, else its model's.
  EXPECT_DOUBLE_EQ(CandidateOverheadMs(none, fp32, groups), 0.04);
  EXPECT_DOUBLE_EQ(CandidateOverheadMs(none, opt, groups), 0.04);
  EXPECT_DOUBLE_EQ(CandidateOverheadMs(none, other, groups), 0.0);  // unknown: the profile
  CostCalibration::Learnt device;
  device.device_ms = 0.1;
  EXPECT_DOUBLE_EQ(CandidateOverheadMs(device, fp32, groups), 0.04);
  EXPECT_DOUBLE_EQ(CandidateOverheadMs(device, other, groups), 0.1);
  CostCalibration::Learnt own = device;
  own.variant_ms = 0.03;
  EXPECT_DOUBLE_EQ(CandidateOverheadMs(own, fp32, groups), 0.03);
  // Another device's measurements say nothing of this one.
  Candidate gpu = fp32;
  gpu.hardware = HardwareConfig{DeviceKind::kCuda, 0, 1};
  EXPECT_DOUBLE_EQ(CandidateOverheadMs(none, gpu, groups), 0.0);
}

TEST(CostCalibrationTest, LookupSaysWhichCount) {
  CostCalibration c(Opts(2, 0.5));
  c.Observe("cpu", "a", 0.5, 0.25, kT0);
  EXPECT_FALSE(c.Lookup("cpu", "a", kT0).variant_ms);
  EXPECT_FALSE(c.Lookup("cpu", "a", kT0).device_ms);
  c.Observe("cpu", "b", 0.5, 0.25, kT0);
  EXPECT_FALSE(c.Lookup("cpu", "a", kT0).variant_ms);
  EXPECT_DOUBLE_EQ(*c.Lookup("cpu", "a", kT0).device_ms, 0.25);
  c.Observe("cpu", "a", 0.5, 0.25, kT0);
  EXPECT_DOUBLE_EQ(*c.Lookup("cpu", "a", kT0).variant_ms, 0.25);
}

// Issue #43: the first batch after an instance idled took several times a
// settled one (digits-logistic: about 300 us against 40), was predicted as a
// settled one, and then counted among the settled, so that the variant
// looked dearer than it was for its next batches. Cold batches are learnt
// apart.
TEST(CostCalibrationTest, ColdBatchesAreLearntApartFromTheSettledOnes) {
  CostCalibration c(Opts(2, 0.5));
  c.Observe("cpu", "a", 1.04, 1.0, kT0);
  c.Observe("cpu", "a", 1.04, 1.0, kT0);
  c.ObserveCold("cpu", "a", 1.3, 1.0, kT0);
  const CostCalibration::Learnt a = c.Lookup("cpu", "a", kT0);
  EXPECT_NEAR(*a.variant_ms, 0.04, 1e-12);  // the settled ones alone
  EXPECT_NEAR(*a.cold_ms, 0.3, 1e-12);
  // Another variant on the device has only the device's cold figure, and
  // its own once it has one.
  EXPECT_NEAR(*c.Lookup("cpu", "b", kT0).cold_ms, 0.3, 1e-12);
  c.ObserveCold("cpu", "b", 1.5, 1.0, kT0);
  EXPECT_NEAR(*c.Lookup("cpu", "b", kT0).cold_ms, 0.5, 1e-12);
  EXPECT_FALSE(c.Lookup("cuda:0", "a", kT0).cold_ms);
  // They outlive the settled ones (an idle spell is what they are about),
  // but not for good: a disturbed one would keep cold queries out of a
  // tight ceiling, and none would run to correct it.
  const auto age = CostCalibration::Options().cold_max_age;
  EXPECT_GT(age, CostCalibration::Options().max_age);
  EXPECT_NEAR(*c.Lookup("cpu", "a", kT0 + age).cold_ms, 0.3, 1e-12);
  EXPECT_FALSE(c.Lookup("cpu", "a", kT0 + age + 1ms).cold_ms);
}

TEST(CandidateOverheadTest, ACandidateIsColdWhenEveryLoadedGroupOfItHasIdled) {
  const Candidate fp32 = CandidateOf("m", "ts-fp32");
  const Candidate opt = CandidateOf("m", "ts-opt");
  cluster::GroupState g = Group("m", "ts-fp32", 0.04);
  g.instances.resize(1);
  g.last_used = kT0;
  const std::vector<cluster::GroupState> groups = {g};
  EXPECT_FALSE(CandidateIsCold(fp32, groups, kT0 + 999ms, 1000ms));
  EXPECT_TRUE(CandidateIsCold(fp32, groups, kT0 + 1000ms, 1000ms));
  // Not loaded: a load warms its instances right before its query.
  EXPECT_FALSE(CandidateIsCold(opt, groups, kT0 + 1h, 1000ms));
  // One recently used group of it is enough to be warm.
  cluster::GroupState recent = g;
  recent.last_used = kT0 + 1h;
  EXPECT_FALSE(CandidateIsCold(fp32, {g, recent}, kT0 + 1h, 1000ms));
  cluster::GroupState loading = g;
  loading.loading = true;
  loading.instances.clear();
  EXPECT_FALSE(CandidateIsCold(fp32, {loading}, kT0 + 1h, 1000ms));
}

}  // namespace
}  // namespace somm
