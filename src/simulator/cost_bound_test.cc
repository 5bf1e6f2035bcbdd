// The lower bound on cost (cost_bound.h): its figure on traces small enough
// to work out by hand, its shape (monotone in attainment, the attainment
// bound its inverse), and the claim it exists for: no policy the simulator
// runs pays less than it, at the attainment that policy reached.
#include "simulator/cost_bound.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "simulator/simulation.h"
#include "simulator/testing/test_repository.h"

namespace somm::sim {
namespace {

// One option at $1/s with a replica carrying `capacity` queries/s at the
// SLO, loaded in `load_s`.
bound::Demand OneOption(double capacity, double load_s, double slo_ms) {
  bound::Demand d;
  d.options = {{1.0, load_s}};
  bound::QueryClass c;
  c.slo_ms = slo_ms;
  c.capacity = {{0, capacity}};
  d.classes = {c};
  return d;
}

// Ten queries, one a second from 0 to 9 s, 50-ms SLO, 100 queries/s a
// replica: each of the first nine costs 1/100 of a replica-second ($0.01);
// the last arrives at the window's end and may be answered after it, unpaid.
TEST(CostBoundTest, OneQueryASecondCostsItsShareOfAReplica) {
  bound::Demand d = OneOption(100, 0, 50);
  for (int i = 0; i < 10; ++i) d.arrivals.push_back({static_cast<double>(i), 0});
  d.duration_s = 9;
  const bound::CostCurve curve = bound::ComputeCostBound(d);
  EXPECT_EQ(curve.feasible(), 10);
  EXPECT_NEAR(curve.UsdAt(1), 0.09, 1e-12);
  // Half: the unpaid one and four others.
  EXPECT_NEAR(curve.UsdAt(0.5), 0.04, 1e-12);
  EXPECT_NEAR(curve.AttainmentAt(0.09), 1.0, 1e-12);
  EXPECT_NEAR(curve.AttainmentAt(0.04), 0.5, 1e-12);
  EXPECT_NEAR(curve.AttainmentAt(0), 0.1, 1e-12);
}

// 50 queries in [20, 30) s and nothing before: 5 busy replica-seconds, and
// the replicas that carry them must load after the window's first 10 s, 2 s
// each, billed: the LP's optimum is half a replica on average over those
// 10 s, so half a load, $1 more. The fluid bound alone says $5.
TEST(CostBoundTest, ALoadAfterTheFirstIntervalIsPaidFor) {
  bound::Demand d = OneOption(10, 2, 100);
  for (int i = 0; i < 50; ++i) d.arrivals.push_back({20 + 0.2 * i, 0});
  d.arrivals.push_back({40, 0});  // ends the window; answered after it
  d.duration_s = 40;
  bound::BoundOptions only_fluid;
  only_fluid.intervals_s = {10};
  only_fluid.load_weights = {0};
  EXPECT_NEAR(bound::ComputeCostBound(d, only_fluid).UsdAt(1), 5.0, 1e-9);
  bound::BoundOptions with_loads = only_fluid;
  with_loads.load_weights = {0, 1};
  EXPECT_NEAR(bound::ComputeCostBound(d, with_loads).UsdAt(1), 6.0, 1e-9);
  // The defaults try 10-s intervals with a full load weight among others.
  EXPECT_GE(bound::ComputeCostBound(d).UsdAt(1), 6.0 - 1e-9);
}

// Queries whose deadline falls in the next interval may work there, at the
// cheaper of the two intervals' prices; a query without an SLO costs
// nothing (it may be answered after the window).
TEST(CostBoundTest, WorkMayFallUpToTheDeadlineAndNoSloIsFree) {
  bound::Demand d = OneOption(100, 0, 500);
  bound::QueryClass no_slo;
  no_slo.capacity = {{0, 100}};
  d.classes.push_back(no_slo);
  d.arrivals = {{0.7, 0}, {5, 1}, {9, 0}};
  d.duration_s = 10;
  bound::BoundOptions o;
  o.intervals_s = {1};
  o.load_weights = {0};
  // Two SLO queries at $0.01 each (the one at 9 s has its deadline in the
  // last interval, inside the window); the no-SLO one is free.
  EXPECT_NEAR(bound::ComputeCostBound(d, o).UsdAt(1), 0.02, 1e-12);
  EXPECT_NEAR(bound::ComputeCostBound(d, o).UsdAt(1.0 / 3), 0, 1e-12);
}

TEST(CostBoundTest, CapacityAtTheSloIsTheBestBatchThatFitsIt) {
  const LatencyCurve c = LatencyCurve::Fit({{1, 10}, {2, 12}, {4, 16}, {8, 24}});
  EXPECT_DOUBLE_EQ(bound::CapacityAtSlo(c, 8, std::nullopt), 8000.0 / 24);
  EXPECT_DOUBLE_EQ(bound::CapacityAtSlo(c, 8, 16), 4000.0 / 16);
  EXPECT_DOUBLE_EQ(bound::CapacityAtSlo(c, 2, 100), 2000.0 / 12);
  EXPECT_DOUBLE_EQ(bound::CapacityAtSlo(c, 8, 9.9), 0);
}

// ---- against the policies

// Task "t/b": "small" (accuracy 0.80; 2 ms at batch 1, loaded in 300 ms)
// and "big" (0.95; 8 ms, 800 ms), one thread each.
std::string WriteRepository() {
  return WriteTestRepository(
      "cost-bound", {{"small", "t/b", 0.80, 2.0, 300.0}, {"big", "t/b", 0.95, 8.0, 800.0}});
}

// 40 s of Poisson arrivals whose rate changes every 4 s (50-1,500
// queries/s: up to several replicas of "big"),
// each row "small", "big" or the task (half of the task rows with a 0.9
// floor), with an SLO of 20, 50 or 200 ms.
loadgen::Trace RandomTrace(uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> rate(50, 1500);
  std::uniform_int_distribution<int> pick(0, 2);
  std::bernoulli_distribution floor(0.5);
  const double slos[] = {20, 50, 200};
  loadgen::Trace t;
  double at_s = 0;
  double qps = rate(rng);
  int segment = 0;
  while (at_s < 40) {
    at_s += std::exponential_distribution<double>(qps)(rng);
    if (static_cast<int>(at_s / 4) != segment) {
      segment = static_cast<int>(at_s / 4);
      qps = rate(rng);
    }
    loadgen::TraceQuery q;
    q.timestamp_ms = at_s * 1000;
    switch (pick(rng)) {
      case 0:
        q.model = "small";
        break;
      case 1:
        q.model = "big";
        break;
      default:
        q.task = "t/b";
        if (floor(rng)) q.min_accuracy = 0.9;
    }
    q.latency_slo_ms = slos[pick(rng)];
    q.line = static_cast<int>(t.queries.size()) + 2;
    t.queries.push_back(q);
  }
  return t;
}

TEST(CostBoundTest, NoPolicyPaysLessThanTheBoundAtItsAttainment) {
  SimulationOptions o;
  o.repository = WriteRepository();
  o.workers = 4;
  o.worker_cores = 4;
  // The bound's premise: batches take their profiled time.
  o.latency_noise_sigma = 0;
  for (uint32_t seed : {1u, 2u, 3u}) {
    const loadgen::Trace trace = RandomTrace(seed);
    auto demand = bound::TraceDemand(o.repository, o.prices, o.worker_cores, 1.0, trace);
    ASSERT_TRUE(demand.ok()) << demand.status().ToString();
    const bound::CostCurve curve = bound::ComputeCostBound(*demand);
    EXPECT_GT(curve.UsdAt(1), 0) << "seed " << seed;
    for (Policy p : {Policy::kSomm, Policy::kStaticPeak, Policy::kStaticAvg, Policy::kInfaas,
                     Policy::kClairvoyant}) {
      o.seed = seed;
      auto r = RunPolicy(o, trace, p);
      ASSERT_TRUE(r.ok()) << PolicyName(p) << ": " << r.status().ToString();
      EXPECT_EQ(curve.feasible(), r->feasible) << PolicyName(p) << ", seed " << seed;
      const double lower = curve.UsdAt(r->attainment);
      EXPECT_LE(lower, r->usd * (1 + 1e-9))
          << PolicyName(p) << ", seed " << seed << ": attainment " << r->attainment;
      // Its attainment is within what its dollars could buy.
      EXPECT_LE(r->attainment, curve.AttainmentAt(r->usd) + 1e-9) << PolicyName(p);
    }
  }
}

TEST(CostBoundTest, TheBoundRisesWithAttainment) {
  const loadgen::Trace trace = RandomTrace(7);
  const std::string repo = WriteRepository();
  auto demand = bound::TraceDemand(repo, PriceList{}, 4, 1.0, trace);
  ASSERT_TRUE(demand.ok()) << demand.status().ToString();
  const bound::CostCurve curve = bound::ComputeCostBound(*demand);
  double before = -1;
  for (int i = 0; i <= 100; ++i) {
    const double a = i / 100.0;
    const double usd = curve.UsdAt(a);
    EXPECT_GE(usd, before) << "at " << a;
    EXPECT_GE(curve.AttainmentAt(usd) + 1e-9, a) << "at " << a;
    before = usd;
  }
  EXPECT_GT(curve.UsdAt(1), curve.UsdAt(0.5));
}

}  // namespace
}  // namespace somm::sim
