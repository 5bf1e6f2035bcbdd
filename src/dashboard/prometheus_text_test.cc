#include "dashboard/prometheus_text.h"

#include <gtest/gtest.h>

#include <cmath>

namespace somm::dashboard {
namespace {

TEST(PrometheusTextTest, ParsesSamplesLabelsAndEscapes) {
  auto samples = ParsePrometheusText(
      "# HELP somm_x Something\n"
      "# TYPE somm_x counter\n"
      "somm_x{model=\"a\",version=\"1\"} 3\n"
      "somm_y 2.5e-3 1700000000000\n"
      "somm_h_bucket{le=\"+Inf\",reason=\"say \\\"hi\\\"\\\\\"} +Inf\n"
      "\n");
  ASSERT_TRUE(samples.ok()) << samples.status().message();
  ASSERT_EQ(samples->size(), 3u);
  EXPECT_EQ((*samples)[0].name, "somm_x");
  EXPECT_EQ((*samples)[0].labels.at("model"), "a");
  EXPECT_EQ((*samples)[0].labels.at("version"), "1");
  EXPECT_EQ((*samples)[0].value, 3);
  EXPECT_TRUE((*samples)[1].labels.empty());
  EXPECT_DOUBLE_EQ((*samples)[1].value, 2.5e-3);
  EXPECT_EQ((*samples)[2].labels.at("reason"), "say \"hi\"\\");
  EXPECT_TRUE(std::isinf((*samples)[2].value));
}

TEST(PrometheusTextTest, BrokenLineIsAnErrorNamingIt) {
  for (const char* text : {"somm_x{model=\"a\" 3\n", "somm_x abc\n", "{a=\"b\"} 1\n", "x 1\ny\n"}) {
    auto samples = ParsePrometheusText(text);
    EXPECT_FALSE(samples.ok()) << text;
    if (!samples.ok()) {
      EXPECT_NE(samples.status().message().find("line"), std::string::npos);
    }
  }
}

}  // namespace
}  // namespace somm::dashboard
