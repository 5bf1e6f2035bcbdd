#include "cli/status_format.h"

#include <gtest/gtest.h>

namespace somm {
namespace {

constexpr char kOverview[] = R"({"unix_ms": 10000, "inflight_queries": 2,
  "cluster": {"workers": 1, "replicas": 3, "memory_used_bytes": 1048576,
              "memory_budget_bytes": 2147483648, "cost_usd_per_hour": 0.1275},
  "totals": {"success": 100, "failure": 4, "slo_queries": 80, "slo_met_queries": 60},
  "models": [{"model": "digits-mlp", "version": "1", "success_total": 100,
              "failure_total": {"RESOURCE_EXHAUSTED": 4}, "slo_queries_total": 80,
              "slo_met_queries_total": 60,
              "latency": {"le_ms": [1, 10, null], "cumulative": [50, 100, 100]}},
             {"model": "", "version": "", "success_total": 0, "failure_total": {},
              "slo_queries_total": 0, "slo_met_queries_total": 0,
              "latency": {"le_ms": [], "cumulative": []}}]})";
constexpr char kWorkers[] = R"({"workers": [{"worker": "w1", "zone": "a", "queued": 5,
  "devices": [{"name": "cpu", "used_bytes": 1048576, "budget_bytes": 2147483648}],
  "groups": [{"model": "digits-mlp", "variant": "ts-int8", "hardware": "cpu2", "replicas": 3,
              "recent_rate_qps": 41.5, "loading": false}]}], "demand": []})";
constexpr char kActions[] = R"({"actions": [{"unix_ms": 5000, "kind": "set_replicas",
  "target": "digits-mlp", "group": "digits-mlp:1:ts-int8@cpu2", "reason": "rate 41.5 q/s"}]})";

TEST(StatusFormatTest, ShowsModelsWorkersLoadAndActions) {
  StatusFormatOptions o;
  o.url = "127.0.0.1:8000";
  auto table = FormatStatus({kOverview, kWorkers, kActions}, o);
  ASSERT_TRUE(table.ok()) << table.status().message();
  const std::string& t = *table;
  EXPECT_NE(t.find("somm at 127.0.0.1:8000: 1 worker(s), 3 replica(s), memory 1.0 MiB / 2.0 GiB, "
                   "$0.1275/h, in flight 2"),
            std::string::npos)
      << t;
  EXPECT_NE(
      t.find("since start: 100 answered, 4 failed, SLO attainment 75.0 %, p50 1 ms, p99 9.82 ms"),
      std::string::npos)
      << t;
  // The model row: replicas and load from the workers, counters from the overview.
  EXPECT_NE(t.find("digits-mlp  1        3         41.5      100       4       75.0 %"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("w1      a     1.0 MiB / 2.0 GiB  5       digits-mlp:ts-int8@cpu2 x3"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("set_replicas  digits-mlp:1:ts-int8@cpu2  rate 41.5 q/s"), std::string::npos)
      << t;
}

TEST(StatusFormatTest, WatchShowsTheIntervalsRate) {
  StatusFormatOptions o;
  o.previous_overview = std::string(kOverview);
  std::string later = kOverview;
  later.replace(later.find("10000"), 5, "12000");
  later.replace(later.find("\"success\": 100"), 14, "\"success\": 150");
  auto table = FormatStatus({later, kWorkers, kActions}, o);
  ASSERT_TRUE(table.ok()) << table.status().message();
  EXPECT_NE(table->find("last 2.0 s: 25.0 q/s, 0 failed, SLO attainment -"), std::string::npos)
      << *table;
}

TEST(StatusFormatTest, MalformedViewIsAnError) {
  EXPECT_FALSE(FormatStatus({"{", kWorkers, kActions}, {}).ok());
}

}  // namespace
}  // namespace somm
