// The INFaaS port replayed (policy_replay.cc): what its mechanisms do
// together on simulated workers, beside infaas_policy_test.cc's tests of
// each on its own.
#include <gtest/gtest.h>

#include <string>

#include "simulator/simulation.h"
#include "simulator/testing/test_repository.h"

namespace somm::sim {
namespace {

SimulationOptions Options(const std::string& name) {
  SimulationOptions o;
  o.repository = WriteTestRepository("infaas-" + name);
  o.workers = 4;
  o.worker_cores = 1;
  o.latency_noise_sigma = 0;
  o.provision_delay_s = 5;
  return o;
}

// Starting from one worker of four, a load that keeps it busy makes the VM
// daemon add workers, one per back-off, each after the provisioning delay;
// the pool's worker-seconds say so.
TEST(InfaasReplayTest, ThePoolGrowsFromItsInitialWorkersWhenTheyAreBusy) {
  SimulationOptions o = Options("pool");
  o.infaas.initial_workers = 1;
  const loadgen::Trace trace = SteadyTrace(400, 90);
  auto r = RunPolicy(o, trace, Policy::kInfaas);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const std::string json = ResultsToJson({*r});
  EXPECT_GT(r->worker_seconds, 1.5 * r->duration_s) << json;
  EXPECT_LT(r->worker_seconds, 4 * r->duration_s) << json;
  // Its new workers serve: more than the first one's replica was loaded.
  EXPECT_GE(r->control_actions_by_kind["load"], 1) << json;
  // The whole fleet from the start (the default): the pool is the fleet.
  o.infaas.initial_workers = 0;
  auto all = RunPolicy(o, trace, Policy::kInfaas);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_NEAR(all->worker_seconds, 4 * all->duration_s, 1e-6) << ResultsToJson({*all});
}

// A threshold set by name (somm simulate --infaas NAME=VALUE) reaches the
// replay: with at most one replica a worker, INFaaS never resizes one.
TEST(InfaasReplayTest, AThresholdSetByNameChangesTheRun) {
  SimulationOptions o = Options("option");
  o.workers = 2;
  o.worker_cores = 4;
  const loadgen::Trace trace = SteadyTrace(300, 30);
  auto base = RunPolicy(o, trace, Policy::kInfaas);
  ASSERT_TRUE(infaas::SetOption(o.infaas, "max_replicas", "1").ok());
  auto capped = RunPolicy(o, trace, Policy::kInfaas);
  ASSERT_TRUE(base.ok() && capped.ok());
  // One replica a worker at most: no resize, where the default resizes.
  EXPECT_GE(base->control_actions_by_kind["resize"], 1) << ResultsToJson({*base});
  EXPECT_EQ(capped->control_actions_by_kind["resize"], 0) << ResultsToJson({*capped});
}

}  // namespace
}  // namespace somm::sim
