#include "auth/quota.h"

#include <gtest/gtest.h>

namespace somm::auth {
namespace {

QuotaConfig Config(const std::string& yaml) {
  auto c = ParseQuotaConfig(yaml, "tenants.yaml");
  EXPECT_TRUE(c.ok()) << c.status().message();
  return c.ok() ? *c : QuotaConfig{};
}

TEST(TenantQuotasTest, RateLimitRefusesPastTheBurstAndRefillsWithTime) {
  ManualClock clock;
  TenantQuotas q(Config("default: {requests_per_s: 2, burst: 2}"), clock);
  int retry = 0;
  EXPECT_TRUE(q.Acquire("a", &retry).ok());
  q.Release("a");
  EXPECT_TRUE(q.Acquire("a", &retry).ok());
  q.Release("a");
  Status third = q.Acquire("a", &retry);
  EXPECT_EQ(third.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(retry, 1);
  // Another tenant has its own bucket.
  EXPECT_TRUE(q.Acquire("b", &retry).ok());
  clock.Advance(std::chrono::milliseconds(500));  // one token back at 2/s
  EXPECT_TRUE(q.Acquire("a", &retry).ok());
  EXPECT_FALSE(q.Acquire("a", &retry).ok());
}

TEST(TenantQuotasTest, ConcurrencyLimitCountsQueriesInFlight) {
  ManualClock clock;
  TenantQuotas q(Config("tenants:\n  a: {max_concurrent: 1}\n"), clock);
  int retry = 0;
  ASSERT_TRUE(q.Acquire("a", &retry).ok());
  EXPECT_EQ(q.Acquire("a", &retry).code(), StatusCode::kResourceExhausted);
  q.Release("a");
  EXPECT_TRUE(q.Acquire("a", &retry).ok());
  // The default (no limits) applies to tenants the file does not name.
  EXPECT_TRUE(q.Acquire("z", &retry).ok());
  EXPECT_TRUE(q.Acquire("z", &retry).ok());
}

TEST(TenantQuotasTest, PrivateMemoryLimitAndMetricsLabelledByTenant) {
  ManualClock clock;
  TenantQuotas q(Config("default: {max_private_memory_mb: 1}\n"), clock);
  EXPECT_TRUE(q.CheckPrivateMemory("a", 512 * 1024).ok());
  EXPECT_EQ(q.CheckPrivateMemory("a", 2 * 1024 * 1024).code(), StatusCode::kResourceExhausted);
  int retry = 0;
  ASSERT_TRUE(q.Acquire("a", &retry).ok());
  const std::string text = q.MetricsText();
  EXPECT_NE(text.find("somm_tenant_private_model_bytes{tenant=\"a\"} 524288"), std::string::npos);
  EXPECT_NE(text.find("somm_tenant_inflight_queries{tenant=\"a\"} 1"), std::string::npos);
  EXPECT_NE(text.find("somm_tenant_memory_refusals_total{tenant=\"a\"} 1"), std::string::npos);
}

TEST(QuotaConfigTest, TenantEntryOverridesOnlyWhatItNamesAndBadFilesAreRefused) {
  QuotaConfig c = Config(
      "default: {requests_per_s: 5, max_concurrent: 3}\ntenants:\n  a: {max_concurrent: 9}\n");
  EXPECT_EQ(c.For("a").max_concurrent, 9);
  EXPECT_EQ(c.For("a").requests_per_s, 5);
  EXPECT_EQ(c.For("b").max_concurrent, 3);
  EXPECT_FALSE(ParseQuotaConfig("default: {rps: 1}", "t").ok());
  EXPECT_FALSE(ParseQuotaConfig("default: {requests_per_s: -1}", "t").ok());
  EXPECT_FALSE(ParseQuotaConfig("nonsense: 1", "t").ok());
  EXPECT_TRUE(ParseQuotaConfig("", "t").ok());
}

}  // namespace
}  // namespace somm::auth
