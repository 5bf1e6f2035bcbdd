#include "common/format_number.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <random>

namespace somm {
namespace {

std::string Printf(double v, int precision) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*g", precision, v);
  return buf;
}

TEST(FormatNumberTest, WritesWhatPrintfsPercentGWrites) {
  const double fixed[] = {0.0,     -0.0,    1.0,        0.9733,  0.05,     3.1e-10, 4.3e-9,
                          12.5,    100.0,   123456.0,   1234567, 1e-5,     1e21,    -2.5,
                          0.00012, 28.8,    0.0001234,  1e100,   5e-324,   1.0 / 3};
  for (double v : fixed) {
    for (int p : {4, 6}) EXPECT_EQ(FormatG(v, p), Printf(v, p)) << v << " at precision " << p;
  }
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> mantissa(-10, 10);
  std::uniform_int_distribution<int> exponent(-30, 30);
  for (int i = 0; i < 20000; ++i) {
    const double v = mantissa(rng) * std::pow(10.0, exponent(rng));
    for (int p : {4, 6}) ASSERT_EQ(FormatG(v, p), Printf(v, p)) << v << " at precision " << p;
  }
  EXPECT_EQ(FormatG(std::numeric_limits<double>::infinity()), "inf");
}

TEST(FormatNumberTest, AppendsToWhatIsThere) {
  std::string s = "latency_slo_ms=";
  AppendG(&s, 28.8);
  EXPECT_EQ(s, "latency_slo_ms=28.8");
}

}  // namespace
}  // namespace somm
