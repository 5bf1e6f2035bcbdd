// Several routers in one simulation (router_fleet.h): the trace is served
// as well through two routers as through one, and the controllers size the
// fleet from every router's demand, not one router's share.
#include "simulator/router_fleet.h"

#include <gtest/gtest.h>

#include <string>

#include "simulator/simulation.h"
#include "simulator/testing/test_repository.h"

namespace somm::sim {
namespace {

// "m": ts-fp32 on one thread, 10 ms at batch 1 up to 24 ms at 8 (333
// queries/s a replica), 100 MiB, loaded in 500 ms.
std::string WriteRepository() { return WriteTestRepository("router-fleet"); }

// 50 queries/s for 10 s, then 400/s for 30 s (more than one replica
// carries), 200-ms SLO: the controller must scale up on the demand it reads.
loadgen::Trace Rising() {
  loadgen::Trace t;
  double at_ms = 0;
  while (at_ms < 40000) {
    loadgen::TraceQuery q;
    q.timestamp_ms = at_ms;
    q.model = "m";
    q.latency_slo_ms = 200;
    q.line = static_cast<int>(t.queries.size()) + 2;
    t.queries.push_back(q);
    at_ms += at_ms < 10000 ? 20 : 1000.0 / 400;
  }
  return t;
}

TEST(RouterFleetTest, TwoRoutersServeTheTraceAsOneAndTheControllerSeesBothDemands) {
  SimulationOptions o;
  o.repository = WriteRepository();
  // One core a worker: each replica on a worker of its own, so that the
  // routers choose among holders, each by its own view.
  o.workers = 4;
  o.worker_cores = 1;
  const loadgen::Trace trace = Rising();
  o.routers = 1;
  auto one = RunPolicy(o, trace, Policy::kSomm);
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  o.routers = 2;
  auto two = RunPolicy(o, trace, Policy::kSomm);
  ASSERT_TRUE(two.ok()) << two.status().ToString();
  two->policy = "somm, 2 routers";
  const std::string json = ResultsToJson({*one, *two});
  EXPECT_EQ(one->routers, 1) << json;
  EXPECT_EQ(two->routers, 2) << json;
  // Every query reached a router and was counted in its demand row; the
  // rows the controllers read hold both routers' counts, not one's half.
  const auto queries = static_cast<int64_t>(trace.queries.size());
  EXPECT_EQ(one->demand_arrivals, queries) << json;
  EXPECT_EQ(two->demand_arrivals, queries) << json;
  // Served alike: the same attainment within a point, and the fleet sized
  // for the whole load (a controller that saw one router's half would hold
  // about half the replicas through the rise).
  EXPECT_GE(one->attainment, 0.85) << json;
  EXPECT_NEAR(two->attainment, one->attainment, 0.01) << json;
  EXPECT_GT(two->instance_seconds, 0.85 * one->instance_seconds) << json;
  EXPECT_LT(two->instance_seconds, 1.15 * one->instance_seconds) << json;
  EXPECT_NE(json.find("\"routers\": 2"), std::string::npos) << json;
}

TEST(RouterFleetTest, AtLeastOneRouter) {
  SimulationOptions o;
  o.repository = WriteRepository();
  o.routers = 0;
  EXPECT_EQ(RunPolicy(o, Rising(), Policy::kSomm).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace somm::sim
