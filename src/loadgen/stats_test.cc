#include "loadgen/stats.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>

namespace somm::loadgen {
namespace {

TEST(StatsTest, NearestRankOnOneToHundred) {
  std::vector<int64_t> v(100);
  std::iota(v.begin(), v.end(), 1);
  EXPECT_EQ(PercentileOfSorted(v, 50), 50);
  EXPECT_EQ(PercentileOfSorted(v, 90), 90);
  EXPECT_EQ(PercentileOfSorted(v, 99), 99);
  EXPECT_EQ(PercentileOfSorted(v, 99.9), 100);
  EXPECT_EQ(PercentileOfSorted(v, 100), 100);
  EXPECT_EQ(PercentileOfSorted(v, 0.5), 1);
}

TEST(StatsTest, ExactRanksDoNotRoundUpOnFloatingPointNoise) {
  std::vector<int64_t> v(1000);
  std::iota(v.begin(), v.end(), 1);
  // 0.999 * 1000 is 999.0000000000001 in doubles; the rank is still 999.
  EXPECT_EQ(PercentileOfSorted(v, 99.9), 999);
  EXPECT_EQ(PercentileOfSorted(v, 99), 990);
}

TEST(StatsTest, SummarizeIgnoresInputOrder) {
  std::vector<int64_t> v(1000);
  std::iota(v.begin(), v.end(), 1);
  std::shuffle(v.begin(), v.end(), std::mt19937(7));
  const LatencySummary s = Summarize(v);
  EXPECT_EQ(s.count, 1000);
  EXPECT_EQ(s.p50, 500);
  EXPECT_EQ(s.p90, 900);
  EXPECT_EQ(s.p99, 990);
  EXPECT_EQ(s.p999, 999);
  EXPECT_DOUBLE_EQ(s.mean, 500.5);
}

TEST(StatsTest, SingleValueAndEmpty) {
  const LatencySummary one = Summarize({42});
  EXPECT_EQ(one.p50, 42);
  EXPECT_EQ(one.p999, 42);
  EXPECT_DOUBLE_EQ(one.mean, 42);
  const LatencySummary none = Summarize({});
  EXPECT_EQ(none.count, 0);
  EXPECT_EQ(none.p99, 0);
  EXPECT_DOUBLE_EQ(none.mean, 0);
}

TEST(StatsTest, SkewedTail) {
  // 990 fast queries and 10 slow ones: p99 is still fast, p99.9 is slow.
  std::vector<int64_t> v(990, 100);
  v.insert(v.end(), 10, 10000);
  const LatencySummary s = Summarize(v);
  EXPECT_EQ(s.p50, 100);
  EXPECT_EQ(s.p99, 100);
  EXPECT_EQ(s.p999, 10000);
  EXPECT_DOUBLE_EQ(s.mean, (990 * 100.0 + 10 * 10000.0) / 1000);
}

}  // namespace
}  // namespace somm::loadgen
