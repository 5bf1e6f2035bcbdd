#include "loadgen/measurement.h"

#include <gtest/gtest.h>

namespace somm::loadgen {
namespace {

constexpr int64_t kMs = 1000000;  // ns

AggregateOptions Opts(double duration_s, int64_t samples_per_query = 1,
                      std::optional<double> default_slo_ms = std::nullopt) {
  AggregateOptions o;
  o.duration_s = duration_s;
  o.samples_per_query = samples_per_query;
  o.default_slo_ms = default_slo_ms;
  return o;
}

// A query scheduled at t=0 that answered after `latency_ms`.
QueryRecord Query(double latency_ms, StatusCode code = StatusCode::kOk,
                  std::optional<double> slo_ms = std::nullopt) {
  QueryRecord r;
  r.scheduled_ns = 0;
  r.sent_ns = 0;
  r.done_ns = static_cast<int64_t>(latency_ms * kMs);
  r.code = code;
  r.slo_ms = slo_ms;
  return r;
}

TEST(MeasurementTest, ThroughputCountsSuccessesAndSamples) {
  std::vector<QueryRecord> records;
  for (int i = 0; i < 30; ++i) records.push_back(Query(1));
  records.push_back(Query(0.1, StatusCode::kResourceExhausted));
  records.push_back(Query(0.1, StatusCode::kResourceExhausted));
  records.push_back(Query(5, StatusCode::kInternal));
  const PointResult p = Aggregate(records, Opts(3, 8));
  EXPECT_EQ(p.count, 30);
  EXPECT_DOUBLE_EQ(p.throughput_qps, 10);
  EXPECT_DOUBLE_EQ(p.throughput_sps, 80);
  EXPECT_EQ(p.latency_us.p99, 1000);  // failures are not in the latency
  EXPECT_EQ(p.errors.at("RESOURCE_EXHAUSTED"), 2);
  EXPECT_EQ(p.errors.at("INTERNAL"), 1);
  EXPECT_EQ(p.errors.size(), 2u);
  EXPECT_FALSE(p.slo_attainment.has_value());
}

TEST(MeasurementTest, SloAttainmentCountsRejectedFailedAndLateAsMisses) {
  std::vector<QueryRecord> records = {
      Query(5),                                    // attained
      Query(10),                                   // attained: exactly on the SLO
      Query(10.001),                               // late
      Query(0.2, StatusCode::kResourceExhausted),  // rejected (fast, but a miss)
      Query(3, StatusCode::kUnavailable),          // failed
  };
  const PointResult p = Aggregate(records, Opts(1, 1, 10.0));
  ASSERT_TRUE(p.slo_attainment.has_value());
  EXPECT_DOUBLE_EQ(*p.slo_attainment, 2.0 / 5.0);
  EXPECT_EQ(p.slo_ms, 10.0);
}

TEST(MeasurementTest, PerQuerySloWinsAndQueriesWithoutSloAreNotCounted) {
  std::vector<QueryRecord> records = {
      Query(5, StatusCode::kOk, 4.0),  // late against its own SLO
      Query(5, StatusCode::kOk, 6.0),  // attained
      Query(50),                       // no SLO at all: not in the ratio
  };
  const PointResult p = Aggregate(records, Opts(1));
  ASSERT_TRUE(p.slo_attainment.has_value());
  EXPECT_DOUBLE_EQ(*p.slo_attainment, 0.5);
  EXPECT_FALSE(p.slo_ms.has_value());
}

TEST(MeasurementTest, LatencyRunsFromTheScheduledTime) {
  QueryRecord r;
  r.scheduled_ns = 0;
  r.sent_ns = 40 * kMs;  // waited 40 ms for a free sender
  r.done_ns = 45 * kMs;
  const PointResult p = Aggregate({r}, Opts(1, 1, 10.0));
  EXPECT_EQ(p.latency_us.p50, 45000);
  EXPECT_DOUBLE_EQ(*p.slo_attainment, 0);
}

TEST(MeasurementTest, ServerSplitFromTimingParameters) {
  std::vector<QueryRecord> records;
  for (int i = 1; i <= 3; ++i) {
    QueryRecord r = Query(1);  // 1000 us client call
    Parameters params{{"somm_queue_us", int64_t{100 * i}},
                      {"somm_compute_us", int64_t{300}},
                      {"somm_server_us", int64_t{100 * i + 300 + 50}},
                      {"somm_device", std::string("cpu")}};
    RecordServerTiming(params, &r);
    records.push_back(r);
  }
  records.push_back(Query(1));  // no timing: left out of the split
  const PointResult p = Aggregate(records, Opts(1));
  ASSERT_TRUE(p.server_us.has_value());
  EXPECT_EQ(p.server_us->queue_p50, 200);
  EXPECT_DOUBLE_EQ(p.server_us->queue_mean, 200);
  EXPECT_EQ(p.server_us->compute_p50, 300);
  EXPECT_EQ(p.server_us->overhead_p50, 50);
  EXPECT_DOUBLE_EQ(p.server_us->overhead_mean, 50);
  EXPECT_EQ(p.server_us->client_overhead_p50, 1000 - 550);
}

// somm serve --explain compact: the timing is read out of the one `somm`
// parameter, and a number inside the reason is never taken for it.
TEST(MeasurementTest, TimingFromACompactExplanation) {
  QueryRecord r = Query(1);
  RecordServerTiming({{"somm", std::string("decision=loaded variant=m:1:ts-fp32 batch=3 queue_us=41 "
                                           "compute_us=12 server_us=73 cost_usd=3e-10 "
                                           "reason=faster than server_us=9")}},
                     &r);
  EXPECT_EQ(r.queue_us, 41);
  EXPECT_EQ(r.compute_us, 12);
  EXPECT_EQ(r.server_us, 73);
  QueryRecord only_reason = Query(1);
  RecordServerTiming({{"somm", std::string("decision=loaded reason=server_us=9 queue_us=1")}},
                     &only_reason);
  EXPECT_FALSE(only_reason.server_us.has_value());
  EXPECT_FALSE(only_reason.queue_us.has_value());
}

TEST(MeasurementTest, NoTimingMeansNoSplit) {
  QueryRecord r = Query(1);
  RecordServerTiming({{"other", int64_t{1}}}, &r);
  EXPECT_FALSE(r.server_us.has_value());
  EXPECT_FALSE(Aggregate({r}, Opts(1)).server_us.has_value());
}

TEST(MeasurementTest, WindowSummaryForTheStabilityRule) {
  std::vector<QueryRecord> records(10, Query(2));
  const WindowSummary w = SummarizeWindow(Aggregate(records, Opts(2)));
  EXPECT_DOUBLE_EQ(w.throughput_qps, 5);
  EXPECT_EQ(w.p99_us, 2000);
  EXPECT_EQ(w.successes, 10);
}

}  // namespace
}  // namespace somm::loadgen
