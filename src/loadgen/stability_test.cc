#include "loadgen/stability.h"

#include <gtest/gtest.h>

namespace somm::loadgen {
namespace {

WindowSummary W(double qps, int64_t p99) { return WindowSummary{qps, p99, 100}; }

TEST(StabilityTest, NeedsThreeWindows) {
  EXPECT_FALSE(IsStable({}, 10));
  EXPECT_FALSE(IsStable({W(100, 1000), W(100, 1000)}, 10));
  EXPECT_TRUE(IsStable({W(100, 1000), W(100, 1000), W(100, 1000)}, 10));
}

TEST(StabilityTest, OnlyTheLastThreeCount) {
  EXPECT_TRUE(IsStable({W(10, 99999), W(100, 1000), W(104, 1050), W(97, 980)}, 10));
  EXPECT_FALSE(IsStable({W(100, 1000), W(104, 1050), W(97, 980), W(10, 1000)}, 10));
}

TEST(StabilityTest, ThroughputOutsideTheBandIsUnstable) {
  // mean 100: 89 is 11% below.
  EXPECT_FALSE(IsStable({W(111, 1000), W(100, 1000), W(89, 1000)}, 10));
  EXPECT_TRUE(IsStable({W(109, 1000), W(100, 1000), W(91, 1000)}, 10));
}

TEST(StabilityTest, P99OutsideTheBandIsUnstable) {
  EXPECT_FALSE(IsStable({W(100, 1000), W(100, 1000), W(100, 1500)}, 10));
  EXPECT_TRUE(IsStable({W(100, 1000), W(100, 1000), W(100, 1500)}, 30));
}

TEST(StabilityTest, WindowWithoutSuccessesIsNeverStable) {
  EXPECT_FALSE(IsStable({W(100, 1000), W(100, 1000), WindowSummary{0, 0, 0}}, 10));
  EXPECT_FALSE(
      IsStable({WindowSummary{0, 0, 0}, WindowSummary{0, 0, 0}, WindowSummary{0, 0, 0}}, 10));
}

TEST(StabilityTest, WithinPercentOfMean) {
  EXPECT_TRUE(WithinPercentOfMean({10, 10, 10}, 1));
  EXPECT_TRUE(WithinPercentOfMean({95, 105}, 5));
  EXPECT_FALSE(WithinPercentOfMean({94, 106}, 5));
  EXPECT_FALSE(WithinPercentOfMean({}, 5));
  EXPECT_FALSE(WithinPercentOfMean({0, 0}, 5));
}

}  // namespace
}  // namespace somm::loadgen
