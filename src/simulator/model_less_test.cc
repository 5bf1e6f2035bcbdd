// Model-less rows in the simulator: task rows and the min_accuracy and
// max_cost constraints replay under every policy, through the same
// selection rules (somm's router, INFaaS's and the oracle's own choice among
// the task's variants, static's configured model), and a policy that cannot
// honour a constraint refuses the query and is charged for it. Also: every
// policy runs on the cluster description's workers.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "simulator/simulation.h"
#include "simulator/testing/test_repository.h"

namespace somm::sim {
namespace {

const std::vector<Policy> kAll = {Policy::kSomm, Policy::kStaticPeak, Policy::kStaticAvg,
                                  Policy::kInfaas, Policy::kClairvoyant};

// Two models of task "t/demo": "cheap" (accuracy 0.80, 1 ms at batch 1) and
// "accurate" (0.97, 10 ms: ten times the price of a query); one thread,
// 100 MiB and a 500-ms load each.
std::string WriteTaskRepository(const std::string& name) {
  return WriteTestRepository("task-" + name, {{"cheap", "t/demo", 0.80, 1.0, 500.0},
                                              {"accurate", "t/demo", 0.97, 10.0, 500.0}});
}

// `qps` rows a second for `seconds`, evenly spaced, with a 200-ms SLO:
// task "t/demo" rows, or `model`'s when one is named.
loadgen::Trace Rows(double qps, double seconds, const std::string& model = "") {
  return SteadyTrace(qps, seconds, model, "t/demo");
}

SimulationOptions Options(const std::string& name) {
  SimulationOptions o;
  o.repository = WriteTaskRepository(name);
  o.workers = 2;
  o.worker_cores = 4;
  o.latency_noise_sigma = 0;
  return o;
}

// Every query is answered, refused for a constraint, or otherwise failed:
// nothing is lost from the accounting.
int64_t Accounted(const PolicyResult& r) {
  return r.answered + r.refused_constraint + r.rejections + r.expired + r.failed;
}

// Only "accurate" reaches the floor: whatever each policy does, it serves
// the rows with that model or refuses them, and a refusal is a miss (the
// rows are feasible).
TEST(SimulationModelLessTest, AnAccuracyFloorIsServedByTheAccurateModelOrRefusedAndCharged) {
  SimulationOptions o = Options("floor");
  loadgen::Trace trace = Rows(50, 10);
  for (auto& q : trace.queries) q.min_accuracy = 0.9;
  for (Policy p : kAll) {
    auto r = RunPolicy(o, trace, p);
    ASSERT_TRUE(r.ok()) << PolicyName(p) << ": " << r.status().ToString();
    const std::string json = ResultsToJson({*r});
    EXPECT_EQ(r->queries, 500) << json;
    EXPECT_EQ(r->feasible, 500) << json;
    EXPECT_EQ(Accounted(*r), r->queries) << json;
    EXPECT_EQ(r->served_by["task:t/demo"].count("cheap"), 0u) << json;
    EXPECT_EQ(r->served_by["task:t/demo"]["accurate"], r->answered) << json;
    EXPECT_LE(r->met, r->answered) << json;
    EXPECT_DOUBLE_EQ(r->attainment, static_cast<double>(r->met) / 500) << json;
    EXPECT_NE(json.find("\"refused_constraint\""), std::string::npos) << json;
    EXPECT_NE(json.find("\"task:t/demo\""), std::string::npos) << json;
  }
  // The static plan serves the task through the cheapest model that meets
  // the strictest floor its rows ask.
  std::map<std::string, std::string> task_models;
  auto plan = StaticReplicas(o, trace, Policy::kStaticPeak, &task_models);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(task_models.at("t/demo"), "accurate");
  EXPECT_EQ(plan->count("cheap"), 0u);
  // Without a floor the same rows go to the cheaper model.
  for (auto& q : trace.queries) q.min_accuracy.reset();
  plan = StaticReplicas(o, trace, Policy::kStaticPeak, &task_models);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(task_models.at("t/demo"), "cheap");
  for (Policy p : {Policy::kSomm, Policy::kClairvoyant}) {
    auto r = RunPolicy(o, trace, p);
    ASSERT_TRUE(r.ok()) << PolicyName(p) << ": " << r.status().ToString();
    EXPECT_GT(r->served_by["task:t/demo"]["cheap"], r->answered / 2) << ResultsToJson({*r});
  }
  // INFaaS's released master takes, of the running variants within the
  // SLO, the one with the least slack: the slower "accurate", which it
  // then keeps among its recent choices (infaas_policy.h, ChooseForTask).
  auto infaas = RunPolicy(o, trace, Policy::kInfaas);
  ASSERT_TRUE(infaas.ok()) << infaas.status().ToString();
  EXPECT_GT(infaas->served_by["task:t/demo"]["accurate"], infaas->answered / 2)
      << ResultsToJson({*infaas});
}

// A static deployment serves a task through one configured model: rows that
// ask more of it than that model reaches are refused and charged, while the
// policies that choose per query serve them.
TEST(SimulationModelLessTest, StaticRefusesWhatItsConfiguredModelCannotHonour) {
  SimulationOptions o = Options("static-refuses");
  // The strictest floor of the trace is 0.95, but a max_cost only "cheap"
  // meets: static's model ("accurate") refuses every such row.
  loadgen::Trace trace = Rows(20, 10);
  const double cheap_charge = PriceList().cpu_thread_usd_per_s * 1.0 / 1000;
  for (size_t i = 0; i < trace.queries.size(); ++i) {
    if (i % 2 == 0) {
      trace.queries[i].min_accuracy = 0.95;
    } else {
      trace.queries[i].max_cost = 2 * cheap_charge;
    }
  }
  auto peak = RunPolicy(o, trace, Policy::kStaticPeak);
  ASSERT_TRUE(peak.ok()) << peak.status().ToString();
  EXPECT_EQ(peak->static_task_models.at("t/demo"), "accurate");
  EXPECT_EQ(peak->refused_constraint, 100) << ResultsToJson({*peak});
  EXPECT_EQ(peak->feasible, 200);
  EXPECT_LE(peak->met, 100);
  auto oracle = RunPolicy(o, trace, Policy::kClairvoyant);
  ASSERT_TRUE(oracle.ok()) << oracle.status().ToString();
  EXPECT_EQ(oracle->refused_constraint, 0) << ResultsToJson({*oracle});
  EXPECT_EQ(oracle->served_by["task:t/demo"]["cheap"], 100) << ResultsToJson({*oracle});
  EXPECT_EQ(oracle->served_by["task:t/demo"]["accurate"], 100) << ResultsToJson({*oracle});
}

// No variant of any model meets the ceiling: every policy refuses every
// row, task rows and model rows alike, and none of them is feasible.
TEST(SimulationModelLessTest, AMaxCostNoVariantMeetsIsRefusedByEveryPolicy) {
  SimulationOptions o = Options("max-cost");
  loadgen::Trace trace = Rows(20, 5);
  for (const auto& q : Rows(20, 5, "accurate").queries) trace.queries.push_back(q);
  std::stable_sort(trace.queries.begin(), trace.queries.end(),
                   [](const auto& a, const auto& b) { return a.timestamp_ms < b.timestamp_ms; });
  for (auto& q : trace.queries) q.max_cost = 1e-15;
  for (Policy p : kAll) {
    auto r = RunPolicy(o, trace, p);
    ASSERT_TRUE(r.ok()) << PolicyName(p) << ": " << r.status().ToString();
    const std::string json = ResultsToJson({*r});
    EXPECT_EQ(r->queries, 200) << json;
    EXPECT_EQ(r->refused_constraint, 200) << json;
    EXPECT_EQ(r->answered, 0) << json;
    EXPECT_EQ(r->feasible, 0) << json;
    EXPECT_EQ(r->models.at("accurate").refused_constraint, 100) << json;
    EXPECT_EQ(r->models.at("task:t/demo").refused_constraint, 100) << json;
  }
}

// Model rows and task rows in one trace: each policy replays both, files
// them apart, and serves nearly all within their SLO.
TEST(SimulationModelLessTest, AMixedTraceOfModelAndTaskRowsReplays) {
  SimulationOptions o = Options("mixed");
  loadgen::Trace trace = Rows(40, 10);
  for (size_t i = 0; i < trace.queries.size(); ++i) {
    if (i % 4 == 0) {
      trace.queries[i].task.clear();
      trace.queries[i].model = "accurate";
    } else if (i % 4 == 1) {
      trace.queries[i].min_accuracy = 0.9;
    }
  }
  for (Policy p : kAll) {
    auto r = RunPolicy(o, trace, p);
    ASSERT_TRUE(r.ok()) << PolicyName(p) << ": " << r.status().ToString();
    const std::string json = ResultsToJson({*r});
    EXPECT_EQ(r->queries, 400) << json;
    EXPECT_EQ(r->models.at("accurate").queries, 100) << json;
    EXPECT_EQ(r->models.at("task:t/demo").queries, 300) << json;
    EXPECT_EQ(r->refused_constraint, 0) << json;
    EXPECT_EQ(Accounted(*r), r->queries) << json;
    if (p != Policy::kStaticAvg) {
      EXPECT_GE(r->attainment, 0.95) << json;
    }
  }
}

// The cluster description's workers are every policy's: INFaaS and the
// oracle ran on `workers` workers of worker_cores whatever --cluster said.
TEST(SimulationModelLessTest, EveryPolicyRunsOnTheClusterDescriptionsWorkers) {
  SimulationOptions o = Options("cluster");
  o.workers = 1;
  o.worker_cores = 8;  // not the cluster's: its zones' workers have one core
  o.zones = {{"a", 2, 1, int64_t{1} << 30}, {"b", 1, 1, int64_t{1} << 30}};
  // Ten times what one replica of "accurate" carries (8 / 24 ms = 333 q/s).
  const loadgen::Trace trace = Rows(3000, 5, "accurate");
  for (Policy p : kAll) {
    auto r = RunPolicy(o, trace, p);
    ASSERT_TRUE(r.ok()) << PolicyName(p) << ": " << r.status().ToString();
    const std::string json = ResultsToJson({*r});
    EXPECT_NEAR(r->worker_seconds, 3 * r->duration_s, 1e-6) << PolicyName(p) << json;
    // One one-thread replica per one-core worker at most.
    EXPECT_LE(r->mean_replicas, 3 + 1e-9) << PolicyName(p) << json;
  }
}

}  // namespace
}  // namespace somm::sim
