// DecisionLog: a bounded ring whose records are numbered so that a query's
// actual latency reaches its row once answered, and whose control actions
// are kept apart from per-query decisions.
#include "api/decision_log.h"

#include <gtest/gtest.h>

namespace somm {
namespace {

DecisionRecord Query(const std::string& target) {
  DecisionRecord r;
  r.target = target;
  r.outcome = "loaded";
  r.predicted_latency_ms = 1.5;
  return r;
}

TEST(DecisionLogTest, CompleteFillsInTheActualLatencyOfThatRowOnly) {
  DecisionLog log(10);
  const uint64_t a = log.Add(Query("a"));
  const uint64_t b = log.Add(Query("b"));
  EXPECT_NE(a, 0u);
  EXPECT_EQ(b, a + 1);
  log.Complete(a, 2.25, "OK");
  const auto recent = log.Recent(10);  // newest first
  ASSERT_EQ(recent.size(), 2u);
  EXPECT_EQ(recent[1].target, "a");
  EXPECT_DOUBLE_EQ(recent[1].actual_latency_ms, 2.25);
  EXPECT_EQ(recent[1].status, "OK");
  EXPECT_LT(recent[0].actual_latency_ms, 0);  // b: not answered yet
  EXPECT_TRUE(recent[0].status.empty());
  log.Complete(b, -1, "UNAVAILABLE");
  EXPECT_EQ(log.Recent(1)[0].status, "UNAVAILABLE");
}

TEST(DecisionLogTest, ARowPushedOutOfTheRingIsNotCompletedAsAnother) {
  DecisionLog log(2);
  const uint64_t first = log.Add(Query("first"));
  log.Add(Query("second"));
  const uint64_t third = log.Add(Query("third"));  // pushes "first" out
  log.Complete(first, 9.0, "OK");
  for (const DecisionRecord& r : log.Recent(10)) {
    EXPECT_NE(r.target, "first");
    EXPECT_LT(r.actual_latency_ms, 0) << r.target << " took the evicted row's latency";
  }
  log.Complete(third, 3.0, "OK");
  EXPECT_DOUBLE_EQ(log.Recent(1)[0].actual_latency_ms, 3.0);
  log.Complete(0, 1.0, "OK");        // never logged
  log.Complete(third + 5, 1.0, "OK");  // not logged yet
  EXPECT_DOUBLE_EQ(log.Recent(1)[0].actual_latency_ms, 3.0);
}

TEST(DecisionLogTest, ControlActionsAreKeptApartFromQueries) {
  DecisionLog log(2);
  DecisionRecord load = Query("digits-mlp");
  load.outcome = "control:load";
  log.Add(load);
  for (int i = 0; i < 5; ++i) log.Add(Query("q"));
  const auto actions = log.RecentActions(10);
  ASSERT_EQ(actions.size(), 1u);
  EXPECT_EQ(actions[0].outcome, "control:load");
  EXPECT_EQ(log.Recent(10).size(), 2u);
}

// The counts by kind cover every action, those pushed out of the ring too.
TEST(DecisionLogTest, ActionTotalsCountEveryActionByKind) {
  DecisionLog log(2);
  for (const char* kind : {"load", "evict", "load", "load", "scale_out"}) {
    DecisionRecord r = Query("m");
    r.outcome = std::string("control:") + kind;
    log.Add(r);
  }
  log.Add(Query("q"));
  EXPECT_EQ(log.RecentActions(10).size(), 2u);
  const std::map<std::string, int64_t> expected = {{"evict", 1}, {"load", 3}, {"scale_out", 1}};
  EXPECT_EQ(log.ActionTotals(), expected);
}

}  // namespace
}  // namespace somm
