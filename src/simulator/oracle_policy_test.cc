#include "simulator/oracle_policy.h"

#include <gtest/gtest.h>

namespace somm::sim::oracle {
namespace {

// latency(b) = base + per * b, profiled at batches 1, 2, 4, 8.
Candidate Cand(HardwareProfile* hp, double base_ms, double per_ms, double usd_per_s) {
  for (int64_t b : {1, 2, 4, 8}) hp->latency.points.push_back({b, base_ms + per_ms * b});
  Candidate c;
  c.profile = hp;
  c.batch1_ms = base_ms + per_ms;
  c.usd_per_s = usd_per_s;
  c.capacity_qps = CapacityWithin(c, 8, 1e300);
  c.cores = 1;
  return c;
}

TEST(OracleCapacity, BatchesMustFitInHalfTheSlo) {
  HardwareProfile hp;
  const Candidate c = Cand(&hp, 2, 1, 1.0);               // 3, 4, 6, 10 ms
  EXPECT_DOUBLE_EQ(CapacityAtSlo(c, 8, 20), 800);         // batch 8 in 10 ms
  EXPECT_DOUBLE_EQ(CapacityAtSlo(c, 8, 12), 4000.0 / 6);  // batch 4
  EXPECT_DOUBLE_EQ(CapacityAtSlo(c, 8, 4), 1000.0 / 3);   // batch 1, no room to queue
  EXPECT_DOUBLE_EQ(CapacityAtSlo(c, 8, 2), 0);            // infeasible
  EXPECT_DOUBLE_EQ(CapacityAtSlo(c, 2, 20), 500);         // max_batch 2
}

TEST(OraclePlan, SizesTheCheapestCandidateToThePeak) {
  HardwareProfile a, b;
  std::vector<Candidate> cands = {Cand(&a, 2, 1, 1.0), Cand(&b, 1, 0.5, 3.0)};
  OracleOptions o;
  o.headroom = 0.5;
  // 1000 qps at 20 ms: a gives 800 qps per replica, half used: 3 replicas.
  const ModelPlan plan = PlanInterval(cands, 8, {{20, 1000}}, o);
  ASSERT_EQ(plan.replicas.size(), 1u);
  EXPECT_EQ(plan.replicas.at(0), 3);
  EXPECT_EQ(plan.route.at(20), 0u);
  EXPECT_DOUBLE_EQ(plan.usd_per_s, 3.0);
}

TEST(OraclePlan, TightSlosGoToTheFastCandidateAndShareItsReplicas) {
  HardwareProfile a, b;
  std::vector<Candidate> cands = {Cand(&a, 10, 1, 1.0), Cand(&b, 1, 0.5, 8.0)};
  OracleOptions o;
  o.headroom = 1;
  // 3 ms: only b (1.5 ms at batch 1). 200 ms: a (batch 8 in 18 ms, 444 qps
  // for $1) rather than b (1600 qps for $8).
  const ModelPlan plan = PlanInterval(cands, 8, {{3, 100}, {200, 400}}, o);
  EXPECT_EQ(plan.route.at(3), 1u);
  EXPECT_EQ(plan.route.at(200), 0u);
  EXPECT_EQ(plan.replicas.at(1), 1);
  EXPECT_EQ(plan.replicas.at(0), 1);
}

TEST(OraclePlan, NoLoadNoReplicas) {
  HardwareProfile a;
  std::vector<Candidate> cands = {Cand(&a, 2, 1, 1.0)};
  const ModelPlan plan = PlanInterval(cands, 8, {{20, 0}}, OracleOptions{});
  EXPECT_TRUE(plan.replicas.empty());
  EXPECT_EQ(plan.route.at(20), 0u);
  EXPECT_DOUBLE_EQ(plan.usd_per_s, 0);
}

TEST(OraclePlan, InfeasibleSloGoesToTheFastestCandidate) {
  HardwareProfile a, b;
  std::vector<Candidate> cands = {Cand(&a, 2, 1, 1.0), Cand(&b, 1, 0.5, 3.0)};
  const ModelPlan plan = PlanInterval(cands, 8, {{0.5, 10}}, OracleOptions{});
  EXPECT_EQ(plan.route.at(0.5), 1u);
  EXPECT_EQ(plan.replicas.at(1), 1);
}

}  // namespace
}  // namespace somm::sim::oracle
