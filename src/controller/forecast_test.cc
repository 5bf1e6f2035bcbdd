#include "controller/forecast.h"

#include <gtest/gtest.h>

namespace somm::control {
namespace {

TEST(ForecastTest, FirstObservationSetsTheLevel) {
  HoltState s = Update(HoltState{}, 42.0, 1.0);
  EXPECT_TRUE(s.initialized);
  EXPECT_DOUBLE_EQ(s.level, 42.0);
  EXPECT_DOUBLE_EQ(s.trend, 0.0);
  EXPECT_DOUBLE_EQ(Forecast(s, 10.0), 42.0);
}

TEST(ForecastTest, ConstantRateForecastsFlat) {
  HoltState s;
  for (int i = 0; i < 50; ++i) s = Update(s, 100.0, 1.0);
  EXPECT_NEAR(Forecast(s, 5.0), 100.0, 1e-9);
}

TEST(ForecastTest, TracksARampAndForecastsAhead) {
  // 10 q/s rising by 5 q/s every second.
  HoltState s;
  double rate = 0;
  for (int t = 0; t < 40; ++t) {
    rate = 10.0 + 5.0 * t;
    s = Update(s, rate, 1.0);
  }
  EXPECT_NEAR(s.trend, 5.0, 0.05);
  EXPECT_NEAR(s.level, rate, 0.5);
  EXPECT_NEAR(Forecast(s, 6.0), rate + 30.0, 1.0);
}

TEST(ForecastTest, TrendIsPerSecondWhateverTheTick) {
  HoltState half, one;
  for (int i = 0; i <= 80; ++i) half = Update(half, 2.0 * (i * 0.5), 0.5);
  for (int i = 0; i <= 40; ++i) one = Update(one, 2.0 * i, 1.0);
  EXPECT_NEAR(half.trend, 2.0, 0.05);
  EXPECT_NEAR(one.trend, 2.0, 0.05);
}

TEST(ForecastTest, NeverNegative) {
  HoltState s;
  for (double r : {100.0, 80.0, 50.0, 20.0, 0.0, 0.0}) s = Update(s, r, 1.0);
  EXPECT_LT(s.trend, 0.0);
  EXPECT_EQ(Forecast(s, 60.0), 0.0);
  EXPECT_GE(s.level, 0.0);
}

TEST(ForecastTest, ARepeatedTickChangesNothing) {
  HoltState s = Update(Update(HoltState{}, 10.0, 1.0), 20.0, 1.0);
  HoltState same = Update(s, 500.0, 0.0);
  EXPECT_DOUBLE_EQ(same.level, s.level);
  EXPECT_DOUBLE_EQ(same.trend, s.trend);
}

}  // namespace
}  // namespace somm::control
