#include "loadgen/report.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

namespace somm::loadgen {
namespace {

using ::testing::HasSubstr;
using Json = nlohmann::json;

std::set<std::string> Keys(const Json& object) {
  std::set<std::string> keys;
  for (const auto& [key, value] : object.items()) keys.insert(key);
  return keys;
}

BenchReport SampleReport() {
  BenchReport report;
  report.target = "somm-cpu";
  report.protocol = "http";
  report.model = "digits-mlp";
  report.mode = "closed";
  report.batch_size = 4;
  PointResult p;
  p.concurrency = 4;
  p.windows = 3;
  p.stable = true;
  p.stop_reason = "stable";
  p.duration_s = 9;
  p.count = 12345;
  p.throughput_qps = 1371.66;
  p.throughput_sps = 5486.64;
  p.latency_us = LatencySummary{12345, 700, 900, 1300, 2100, 745.25};
  p.errors["RESOURCE_EXHAUSTED"] = 3;
  p.server_us = ServerSplit{100, 300, 40, 110.04, 305.5, 41, 250};
  report.points.push_back(p);
  PointResult peer;  // a server without timing parameters, with an SLO
  peer.concurrency = 8;
  peer.slo_ms = 5;
  peer.slo_attainment = 0.987654;
  report.points.push_back(peer);
  return report;
}

TEST(ReportTest, JsonHasExactlyTheSchema) {
  const Json j = ReportToJson(SampleReport());
  EXPECT_EQ(Keys(j), (std::set<std::string>{"tool", "target", "protocol", "model", "mode",
                                            "batch_size", "points"}));
  EXPECT_EQ(j["tool"], "somm bench");
  EXPECT_EQ(j["target"], "somm-cpu");
  EXPECT_EQ(j["protocol"], "http");
  EXPECT_EQ(j["mode"], "closed");
  EXPECT_EQ(j["batch_size"], 4);
  ASSERT_EQ(j["points"].size(), 2u);
  const Json& p = j["points"][0];
  EXPECT_EQ(Keys(p),
            (std::set<std::string>{"concurrency", "request_rate", "windows", "stable", "duration_s",
                                   "count", "throughput_qps", "throughput_sps", "latency_us",
                                   "errors", "slo_ms", "slo_attainment", "server_us"}));
  EXPECT_EQ(p["concurrency"], 4);
  EXPECT_TRUE(p["request_rate"].is_null());
  EXPECT_EQ(p["windows"], 3);
  EXPECT_EQ(p["stable"], true);
  EXPECT_EQ(p["count"], 12345);
  EXPECT_DOUBLE_EQ(p["throughput_qps"].get<double>(), 1371.7);
  EXPECT_DOUBLE_EQ(p["throughput_sps"].get<double>(), 5486.6);
  EXPECT_EQ(Keys(p["latency_us"]), (std::set<std::string>{"p50", "p90", "p99", "p999", "mean"}));
  EXPECT_EQ(p["latency_us"]["p99"], 1300);
  EXPECT_DOUBLE_EQ(p["latency_us"]["mean"].get<double>(), 745.3);
  EXPECT_EQ(p["errors"], Json({{"RESOURCE_EXHAUSTED", 3}}));
  EXPECT_TRUE(p["slo_ms"].is_null());
  EXPECT_TRUE(p["slo_attainment"].is_null());
  EXPECT_EQ(Keys(p["server_us"]),
            (std::set<std::string>{"queue_p50", "compute_p50", "overhead_p50", "queue_mean",
                                   "compute_mean", "overhead_mean", "client_overhead_p50"}));
  EXPECT_EQ(p["server_us"]["compute_p50"], 300);
  EXPECT_DOUBLE_EQ(p["server_us"]["queue_mean"].get<double>(), 110.0);

  const Json& q = j["points"][1];
  EXPECT_TRUE(q["server_us"].is_null());
  EXPECT_TRUE(q["errors"].is_object());
  EXPECT_TRUE(q["errors"].empty());
  EXPECT_DOUBLE_EQ(q["slo_ms"].get<double>(), 5);
  EXPECT_DOUBLE_EQ(q["slo_attainment"].get<double>(), 0.9877);
}

TEST(ReportTest, PoissonAndTracePointsLeaveConcurrencyNull) {
  BenchReport report = SampleReport();
  report.points.resize(1);
  report.points[0].concurrency.reset();
  report.points[0].request_rate = 500;
  const Json j = ReportToJson(report);
  EXPECT_TRUE(j["points"][0]["concurrency"].is_null());
  EXPECT_DOUBLE_EQ(j["points"][0]["request_rate"].get<double>(), 500);
}

TEST(ReportTest, TableShowsEveryPointAndNaForMissingTiming) {
  const std::string table = FormatReportTable(SampleReport());
  EXPECT_THAT(table, HasSubstr("somm-cpu"));
  EXPECT_THAT(table, HasSubstr("concurrency 4"));
  EXPECT_THAT(table, HasSubstr("concurrency 8"));
  EXPECT_THAT(table, HasSubstr("1371.7"));
  EXPECT_THAT(table, HasSubstr("RESOURCE_EXHAUSTED: 3"));
  EXPECT_THAT(table, HasSubstr("98.77%"));
  EXPECT_THAT(table, HasSubstr("n/a"));
}

TEST(ReportTest, PointLabels) {
  PointResult p;
  EXPECT_EQ(PointLabel(p), "trace");
  p.request_rate = 250;
  EXPECT_EQ(PointLabel(p), "rate 250.0/s");
  p.concurrency = 2;
  EXPECT_EQ(PointLabel(p), "concurrency 2");
}

}  // namespace
}  // namespace somm::loadgen
