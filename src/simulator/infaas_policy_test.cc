#include "simulator/infaas_policy.h"

#include <gtest/gtest.h>

namespace somm::sim::infaas {
namespace {

Candidate Cand(const std::string& variant, int threads, double b1_ms, double cap_qps,
               double usd_per_s, double load_ms = 500) {
  Candidate c;
  c.variant = variant;
  c.hardware.threads = threads;
  c.cores = threads;
  c.batch1_ms = b1_ms;
  c.capacity_qps = cap_qps;
  c.usd_per_s = usd_per_s;
  c.load_ms = load_ms;
  c.memory_bytes = 1 << 20;
  return c;
}

// Per query: cheap 0.01, mid 0.02, fast 0.04 (USD per query at capacity).
std::vector<Candidate> Zoo() {
  return {Cand("cheap", 1, 20, 100, 1.0), Cand("mid", 2, 8, 100, 2.0),
          Cand("fast", 4, 2, 100, 4.0)};
}

std::vector<WorkerView> Workers(int n) {
  std::vector<WorkerView> w(n);
  for (auto& v : w) {
    v.cores = 8;
    v.free_cores = 8;
    v.free_bytes = int64_t{1} << 30;
  }
  return w;
}

InstanceView Inst(size_t cand, int worker, double rate = 0, int replicas = 1) {
  InstanceView v;
  v.candidate = cand;
  v.worker = worker;
  v.rate_qps = rate;
  v.replicas = replicas;
  return v;
}

TEST(InfaasSelect, FastPathTakesTheCheapestLoadedFeasibleCandidate) {
  const auto zoo = Zoo();
  std::vector<InstanceView> inst = {Inst(2, 0), Inst(1, 1)};
  const Selection s = SelectVariant(zoo, inst, Workers(2), 10.0, InfaasOptions{});
  ASSERT_TRUE(s.ok);
  EXPECT_TRUE(s.fast_path);
  EXPECT_EQ(s.candidate, 1u);  // mid: cheaper than fast; cheap misses 10 ms
  EXPECT_EQ(s.instance, 1);
}

TEST(InfaasSelect, FastPathLooksAtTheTopFewOnly) {
  const auto zoo = Zoo();
  std::vector<InstanceView> inst = {Inst(2, 0)};
  InfaasOptions o;
  o.fast_path_candidates = 2;  // cheap and mid: neither is loaded
  const Selection s = SelectVariant(zoo, inst, Workers(1), 100.0, o);
  ASSERT_TRUE(s.ok);
  EXPECT_FALSE(s.fast_path);
  // Slow path: loading cheap takes 20 + 500 ms, past the SLO; so does mid;
  // the loaded fast one meets it.
  EXPECT_EQ(s.candidate, 2u);
  EXPECT_EQ(s.instance, 0);
  o.fast_path_candidates = 3;
  EXPECT_TRUE(SelectVariant(zoo, inst, Workers(1), 100.0, o).fast_path);
}

TEST(InfaasSelect, NotLoadedVariantsPayTheirLoadTime) {
  const auto zoo = Zoo();
  std::vector<InstanceView> inst = {Inst(2, 0)};
  InfaasOptions o;
  o.fast_path_candidates = 1;
  // 1000 ms: loading cheap (20 + 500 ms) fits, and it is the cheapest.
  Selection s = SelectVariant(zoo, inst, Workers(1), 1000.0, o);
  EXPECT_EQ(s.candidate, 0u);
  EXPECT_EQ(s.instance, -1);
  EXPECT_EQ(s.worker, 0);
  // 300 ms: it does not; the loaded fast one is taken.
  s = SelectVariant(zoo, inst, Workers(1), 300.0, o);
  EXPECT_EQ(s.candidate, 2u);
  EXPECT_EQ(s.instance, 0);
}

TEST(InfaasSelect, SaturatedInstancesLeaveTheFastPath) {
  const auto zoo = Zoo();
  std::vector<InstanceView> inst = {Inst(0, 0, /*rate=*/150), Inst(1, 1)};
  const Selection s = SelectVariant(zoo, inst, Workers(2), 100.0, InfaasOptions{});
  EXPECT_TRUE(s.fast_path);
  EXPECT_EQ(s.candidate, 1u);
}

TEST(InfaasSelect, BlacklistedWorkersGetNeitherQueriesNorLoads) {
  const auto zoo = Zoo();
  std::vector<InstanceView> inst = {Inst(0, 0)};
  auto workers = Workers(2);
  workers[0].blacklisted = true;
  const Selection s = SelectVariant(zoo, inst, workers, 1000.0, InfaasOptions{});
  ASSERT_TRUE(s.ok);
  EXPECT_EQ(s.instance, -1);
  EXPECT_EQ(s.worker, 1);
  // With nowhere else to go, the blacklisted worker's instance, best effort.
  workers[1].free_cores = 0;
  const Selection t = SelectVariant(zoo, inst, workers, 1000.0, InfaasOptions{});
  ASSERT_TRUE(t.ok);
  EXPECT_EQ(t.instance, 0);
  EXPECT_FALSE(t.meets_slo);
}

TEST(InfaasSelect, InfeasibleSloGetsTheLowestLatencyBestEffort) {
  const auto zoo = Zoo();
  const Selection s = SelectVariant(zoo, {Inst(0, 0)}, Workers(1), 1.0, InfaasOptions{});
  ASSERT_TRUE(s.ok);
  EXPECT_FALSE(s.meets_slo);
  EXPECT_EQ(s.candidate, 0u);  // loaded, 20 ms, beats loading fast (502 ms)
}

TEST(InfaasBlacklist, OverloadedWorkerIsBlacklistedForAWhile) {
  InfaasOptions o;
  o.overload_utilization = 0.8;
  o.blacklist_s = 5;
  EXPECT_DOUBLE_EQ(BlacklistedUntil(0.9, 100, -1, o), 105);
  EXPECT_DOUBLE_EQ(BlacklistedUntil(0.5, 100, -1, o), -1);
  EXPECT_DOUBLE_EQ(BlacklistedUntil(0.5, 102, 105, o), 105);
  const auto zoo = Zoo();
  // Two replicas of mid (2 threads each), fully busy: 4 of 8 cores.
  EXPECT_DOUBLE_EQ(WorkerUtilization(zoo, {Inst(1, 0, 200, 2)}, 8), 0.5);
}

TEST(InfaasScale, ReplicatesWhenThatIsCheaperThanUpgrading) {
  const auto zoo = Zoo();
  WorkerView w = Workers(1)[0];
  const ScaleDecision d = ScaleInstance(zoo, Inst(0, 0, 150), w, 0, 0, 50, InfaasOptions{});
  EXPECT_EQ(d.kind, ScaleDecision::kSetReplicas);
  EXPECT_EQ(d.replicas, 2);  // 150 qps at 80% of 100 per replica
}

TEST(InfaasScale, UpgradesWhenAFasterVariantCostsLess) {
  std::vector<Candidate> zoo = {Cand("slow", 1, 20, 10, 1.0), Cand("batched", 2, 10, 400, 2.0)};
  WorkerView w = Workers(1)[0];
  const ScaleDecision d = ScaleInstance(zoo, Inst(0, 0, 30), w, 0, 0, 50, InfaasOptions{});
  EXPECT_EQ(d.kind, ScaleDecision::kUpgrade);
  EXPECT_EQ(d.to_candidate, 1u);
  EXPECT_EQ(d.replicas, 1);
  // Not when the faster one misses the tightest recent SLO.
  EXPECT_EQ(ScaleInstance(zoo, Inst(0, 0, 30), w, 0, 0, 5, InfaasOptions{}).kind,
            ScaleDecision::kSetReplicas);
}

TEST(InfaasScale, ReplicatesOnlyWithinTheWorkersCores) {
  const auto zoo = Zoo();
  WorkerView w = Workers(1)[0];
  w.free_cores = 0;
  EXPECT_EQ(ScaleInstance(zoo, Inst(0, 0, 150), w, 0, 0, 50, InfaasOptions{}).kind,
            ScaleDecision::kNone);
}

TEST(InfaasScale, ScalesDownOnlyAfterTheDelay) {
  const auto zoo = Zoo();
  InfaasOptions o;
  const InstanceView inst = Inst(0, 0, 10, 3);
  ASSERT_TRUE(Underloaded(zoo, inst, 50, o));
  WorkerView w = Workers(1)[0];
  EXPECT_EQ(ScaleInstance(zoo, inst, w, o.scale_down_delay_s / 2, 0, 50, o).kind,
            ScaleDecision::kNone);
  const ScaleDecision d = ScaleInstance(zoo, inst, w, o.scale_down_delay_s, 0, 50, o);
  EXPECT_EQ(d.kind, ScaleDecision::kSetReplicas);
  EXPECT_EQ(d.replicas, 2);  // one at a time
}

TEST(InfaasScale, DowngradesASingleReplicaToACheaperVariantThatMeetsTheSlo) {
  const auto zoo = Zoo();
  InfaasOptions o;
  const InstanceView on_fast = Inst(2, 0, 10);
  WorkerView w = Workers(1)[0];
  ASSERT_TRUE(Underloaded(zoo, on_fast, 50, o));
  ScaleDecision d = ScaleInstance(zoo, on_fast, w, o.scale_down_delay_s, 0, 50, o);
  EXPECT_EQ(d.kind, ScaleDecision::kDowngrade);
  EXPECT_EQ(d.to_candidate, 0u);
  // A 10 ms SLO lately: only mid (8 ms) is cheaper and meets it.
  d = ScaleInstance(zoo, on_fast, w, o.scale_down_delay_s, 0, 10, o);
  EXPECT_EQ(d.kind, ScaleDecision::kDowngrade);
  EXPECT_EQ(d.to_candidate, 1u);
  EXPECT_FALSE(Underloaded(zoo, on_fast, 1, o));
}

TEST(InfaasScale, UnloadsAnIdleInstance) {
  const auto zoo = Zoo();
  InfaasOptions o;
  WorkerView w = Workers(1)[0];
  EXPECT_EQ(ScaleInstance(zoo, Inst(0, 0), w, 0, o.idle_unload_s, 0, o).kind,
            ScaleDecision::kUnload);
  EXPECT_EQ(ScaleInstance(zoo, Inst(0, 0), w, 0, o.idle_unload_s / 2, 0, o).kind,
            ScaleDecision::kNone);
}

}  // namespace
}  // namespace somm::sim::infaas
