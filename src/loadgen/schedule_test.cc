#include "loadgen/schedule.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

namespace somm::loadgen {
namespace {

using ::testing::HasSubstr;

std::vector<int> Range(const std::string& spec) {
  auto r = ParseConcurrencyRange(spec);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? r.value() : std::vector<int>{};
}

TEST(ConcurrencyRangeTest, MultiplierIsTheDefault) {
  EXPECT_EQ(Range("1:16:2"), (std::vector<int>{1, 2, 4, 8, 16}));
  EXPECT_EQ(Range("1:8"), (std::vector<int>{1, 2, 4, 8}));
  EXPECT_EQ(Range("1:10:3"), (std::vector<int>{1, 3, 9}));
  EXPECT_EQ(Range("4:4"), (std::vector<int>{4}));
}

TEST(ConcurrencyRangeTest, PlusMeansAdditive) {
  EXPECT_EQ(Range("1:16:+5"), (std::vector<int>{1, 6, 11, 16}));
  EXPECT_EQ(Range("2:5:+1"), (std::vector<int>{2, 3, 4, 5}));
}

TEST(ConcurrencyRangeTest, RejectsNonsense) {
  for (const char* bad :
       {"", "4", "0:4", "4:2", "1:4:1", "1:4:x", "1:4:+0", "a:b", "1:2:3:4", "-1:4", "1:4:"}) {
    auto r = ParseConcurrencyRange(bad);
    EXPECT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(r.status().message(), HasSubstr("--concurrency-range")) << bad;
  }
}

TEST(PoissonArrivalsTest, SameSeedSameSchedule) {
  PoissonArrivals a(500, 42);
  PoissonArrivals b(500, 42);
  PoissonArrivals c(500, 43);
  bool differs = false;
  for (int i = 0; i < 100; ++i) {
    const int64_t x = a.NextOffsetNs();
    EXPECT_EQ(x, b.NextOffsetNs());
    differs |= x != c.NextOffsetNs();
  }
  EXPECT_TRUE(differs);
}

TEST(PoissonArrivalsTest, MeanRateAndExponentialGaps) {
  // A statistical check on the schedule itself, no clock involved: 200k
  // arrivals at 1000/s. The mean gap's relative standard error is
  // 1/sqrt(n) = 0.22%, so 2% is a ~9-sigma band; the coefficient of
  // variation of exponential gaps is 1.
  constexpr int kN = 200000;
  constexpr double kRate = 1000;
  PoissonArrivals arrivals(kRate, 1);
  int64_t previous = 0;
  double sum = 0;
  double sum_sq = 0;
  for (int i = 0; i < kN; ++i) {
    const int64_t t = arrivals.NextOffsetNs();
    ASSERT_GE(t, previous);
    const double gap_s = static_cast<double>(t - previous) / 1e9;
    sum += gap_s;
    sum_sq += gap_s * gap_s;
    previous = t;
  }
  const double mean = sum / kN;
  const double rate = 1 / mean;
  EXPECT_NEAR(rate, kRate, kRate * 0.02);
  const double stddev = std::sqrt(sum_sq / kN - mean * mean);
  EXPECT_NEAR(stddev / mean, 1.0, 0.03);
  // The whole schedule spans n / rate seconds.
  EXPECT_NEAR(static_cast<double>(previous) / 1e9, kN / kRate, kN / kRate * 0.02);
}

}  // namespace
}  // namespace somm::loadgen
