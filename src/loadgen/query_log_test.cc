#include "loadgen/query_log.h"

#include <gtest/gtest.h>

#include <sstream>

namespace somm::loadgen {
namespace {

constexpr int64_t kMs = 1000000;  // ns
constexpr int64_t kOrigin = 5000 * kMs;

// A query of `model` due `at_ms` after the origin, answered `latency_ms` later.
QueryRecord Query(const std::string& model, double at_ms, double latency_ms,
                  StatusCode code = StatusCode::kOk, std::optional<double> slo_ms = std::nullopt) {
  QueryRecord r;
  r.model = model;
  r.scheduled_ns = kOrigin + static_cast<int64_t>(at_ms * kMs);
  r.sent_ns = r.scheduled_ns;
  r.done_ns = r.scheduled_ns + static_cast<int64_t>(latency_ms * kMs);
  r.code = code;
  r.slo_ms = slo_ms;
  if (code != StatusCode::kOk) r.error_message = "no";
  return r;
}

TEST(QueryLogTest, TimelineBucketsBySecondDueAndModel) {
  const std::vector<QueryRecord> records{
      // Second 0, model a: two met, one late (answered in second 1: still second 0).
      Query("a", 10, 5, StatusCode::kOk, 20),
      Query("a", 900, 50, StatusCode::kOk, 20),
      Query("a", 999, 10, StatusCode::kOk, 20),
      // Second 0, model b: a rejection, an unavailable, an expiry, a failure.
      Query("b", 100, 0.1, StatusCode::kResourceExhausted, 20),
      Query("b", 200, 0.1, StatusCode::kUnavailable),
      Query("b", 250, 25, StatusCode::kDeadlineExceeded, 20),
      Query("b", 300, 30, StatusCode::kInternal),
      // Second 2, model a: no SLO of its own, the default (15 ms) applies.
      Query("a", 2500, 10),
      Query("a", 2600, 16),
  };
  const std::vector<TimelineRow> rows = BuildTimeline(records, kOrigin, 15.0);
  ASSERT_EQ(rows.size(), 3u);

  EXPECT_EQ(rows[0].second, 0);
  EXPECT_EQ(rows[0].model, "a");
  EXPECT_EQ(rows[0].sent, 3);
  EXPECT_EQ(rows[0].ok, 3);
  EXPECT_EQ(rows[0].slo_met, 2);
  EXPECT_EQ(rows[0].late, 1);
  EXPECT_EQ(rows[0].rejected, 0);
  ASSERT_TRUE(rows[0].p50_ms.has_value());
  EXPECT_DOUBLE_EQ(*rows[0].p50_ms, 10);
  EXPECT_DOUBLE_EQ(*rows[0].p99_ms, 50);

  EXPECT_EQ(rows[1].second, 0);
  EXPECT_EQ(rows[1].model, "b");
  EXPECT_EQ(rows[1].sent, 4);
  EXPECT_EQ(rows[1].ok, 0);
  EXPECT_EQ(rows[1].rejected, 2);
  EXPECT_EQ(rows[1].expired, 1);
  EXPECT_EQ(rows[1].failed, 1);
  EXPECT_EQ(rows[1].slo_met + rows[1].late, 0);
  EXPECT_FALSE(rows[1].p50_ms.has_value());

  EXPECT_EQ(rows[2].second, 2);
  EXPECT_EQ(rows[2].slo_met, 1);
  EXPECT_EQ(rows[2].late, 1);
}

TEST(QueryLogTest, TimelineWithoutAnySloCountsNeitherMetNorLate) {
  const std::vector<TimelineRow> rows =
      BuildTimeline({Query("a", 0, 1), Query("a", 1, 100)}, kOrigin, std::nullopt);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].ok, 2);
  EXPECT_EQ(rows[0].slo_met, 0);
  EXPECT_EQ(rows[0].late, 0);
}

TEST(QueryLogTest, QueryDueBeforeTheOriginIsSecondMinusOne) {
  const std::vector<TimelineRow> rows = BuildTimeline({Query("a", -0.5, 1)}, kOrigin, std::nullopt);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].second, -1);
}

TEST(QueryLogTest, TimelineCsv) {
  std::ostringstream out;
  WriteTimelineCsv(BuildTimeline({Query("a", 1500, 2.5, StatusCode::kOk, 5),
                                  Query("a", 1600, 0.1, StatusCode::kResourceExhausted, 5)},
                                 kOrigin, std::nullopt),
                   out);
  EXPECT_EQ(out.str(),
            "second,model,sent,ok,slo_met,late,rejected,expired,failed,p50_ms,p99_ms\n"
            "1,a,2,1,1,0,1,0,0,2.500,2.500\n");
}

TEST(QueryLogTest, QueryLogRowsInScheduledOrderWithQuotedErrors) {
  QueryRecord late = Query("b", 20, 3, StatusCode::kOk, 1);
  late.queue_us = 100;
  late.compute_us = 2000;
  late.server_us = 2500;
  QueryRecord rejected = Query("a", 10, 0.25, StatusCode::kResourceExhausted, 1);
  rejected.error_message = "cannot meet latency_slo_ms=1, \"best\"\n0.3 ms";
  std::ostringstream out;
  WriteQueryLogCsv({late, rejected, Query("a", 30, 1)}, kOrigin, 50.0, out);
  EXPECT_EQ(out.str(),
            "scheduled_ms,sent_ms,done_ms,latency_ms,model,slo_ms,code,queue_us,compute_us,"
            "server_us,error\n"
            "10.000,10.000,10.250,0.250,a,1,RESOURCE_EXHAUSTED,,,,"
            "\"cannot meet latency_slo_ms=1, \"\"best\"\" 0.3 ms\"\n"
            "20.000,20.000,23.000,3.000,b,1,OK,100,2000,2500,\n"
            "30.000,30.000,31.000,1.000,a,50,OK,,,,\n");
}

}  // namespace
}  // namespace somm::loadgen
