#include "dashboard/operator_api.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace somm::dashboard {
namespace {

using nlohmann::json;

// The operator's interface alone, as the views see it.
class ViewServer : public OperatorApi {
 public:
  std::shared_ptr<const cluster::ClusterState> ClusterView() const override { return view; }
  PriceList Prices() const override { return prices; }
  std::map<std::string, int64_t> ControlActionTotals() const override { return action_totals; }

  std::shared_ptr<cluster::ClusterState> view;
  PriceList prices;
  std::map<std::string, int64_t> action_totals;
};

cluster::GroupState Group(const std::string& worker, const std::string& model, int threads,
                          int replicas) {
  cluster::GroupState g;
  g.worker = worker;
  g.zone = "z-" + worker;
  g.model = model;
  g.variant = "ts";
  g.hardware.threads = threads;
  g.device = "cpu";
  g.replicas = replicas;
  g.queued = 2;
  return g;
}

constexpr char kMetrics[] =
    "somm_inference_request_success_total{model=\"a\",version=\"1\"} 10\n"
    "somm_inference_request_success_total{model=\"b\",version=\"1\"} 5\n"
    "somm_inference_request_failure_total{model=\"a\",reason=\"RESOURCE_EXHAUSTED\",version=\"1\"} "
    "2\n"
    "somm_inference_request_failure_total{model=\"b\",reason=\"RESOURCE_EXHAUSTED\",version=\"1\"} "
    "1\n"
    "somm_inference_request_failure_total{model=\"b\",reason=\"DEADLINE_EXCEEDED\",version=\"1\"} "
    "4\n"
    "somm_slo_queries_total{model=\"a\",version=\"1\"} 8\n"
    "somm_slo_met_queries_total{model=\"a\",version=\"1\"} 6\n"
    "somm_inference_request_duration_seconds_bucket{model=\"a\",version=\"1\",le=\"0.001\"} 7\n"
    "somm_inference_request_duration_seconds_bucket{model=\"a\",version=\"1\",le=\"+Inf\"} 10\n"
    "somm_inference_request_duration_seconds_count{model=\"a\",version=\"1\"} 10\n"
    "somm_inference_request_duration_seconds_sum{model=\"a\",version=\"1\"} 0.02\n"
    "somm_selector_decisions_total{outcome=\"rejected\"} 3\n"
    "somm_control_actions_total{kind=\"load\"} 2\n"
    "somm_inflight_queries 1\n";

TEST(OperatorApiTest, OverviewSumsTheCountersAndPricesTheReplicas) {
  ViewServer server;
  server.view = std::make_shared<cluster::ClusterState>();
  server.view->groups = {Group("w1", "a", 2, 3), Group("w2", "b", 1, 1)};
  server.view->devices = {{"cpu", 1000, 400, 4, "w1"}, {"cpu", 1000, 100, 4, "w2"}};
  server.prices.cpu_thread_usd_per_s = 1.0 / 3600.0;
  server.action_totals = {{"load", 2}};
  auto text = EncodeOverview(server, kMetrics, 42);
  ASSERT_TRUE(text.ok()) << text.status().message();
  const json o = json::parse(*text);
  EXPECT_EQ(o["unix_ms"], 42);
  EXPECT_EQ(o["totals"]["success"], 15);
  EXPECT_EQ(o["totals"]["failure"], 7);
  EXPECT_EQ(o["totals"]["slo_queries"], 8);
  EXPECT_EQ(o["totals"]["slo_met_queries"], 6);
  EXPECT_EQ(o["failures_by_reason"]["RESOURCE_EXHAUSTED"], 3);
  EXPECT_EQ(o["failures_by_reason"]["DEADLINE_EXCEEDED"], 4);
  EXPECT_EQ(o["decisions_total"]["rejected"], 3);
  EXPECT_EQ(o["control_actions_total"]["load"], 2);
  EXPECT_EQ(o["inflight_queries"], 1);
  const json& a = o["models"][0];
  EXPECT_EQ(a["model"], "a");
  EXPECT_EQ(a["latency"]["le_ms"][0], 1.0);
  EXPECT_TRUE(a["latency"]["le_ms"][1].is_null());  // +Inf
  EXPECT_EQ(a["latency"]["cumulative"][0], 7);
  EXPECT_DOUBLE_EQ(a["latency"]["sum_ms"].get<double>(), 20.0);
  // 3 replicas x 2 threads + 1 x 1, at $1 per thread-hour.
  EXPECT_DOUBLE_EQ(o["cluster"]["cost_usd_per_hour"].get<double>(), 7.0);
  EXPECT_EQ(o["cluster"]["replicas"], 4);
  EXPECT_EQ(o["cluster"]["workers"], 2);
  EXPECT_EQ(o["cluster"]["memory_used_bytes"], 500);
}

// A cluster router's registry counts no control action: they are the
// leader controller's, and the overview takes them from there.
TEST(OperatorApiTest, OverviewCountsTheControllersActionsNotTheProcesss) {
  ViewServer server;
  server.action_totals = {{"evict", 1}, {"scale_out", 4}};
  auto text = EncodeOverview(server, kMetrics, 1);
  ASSERT_TRUE(text.ok());
  const json o = json::parse(*text);
  EXPECT_EQ(o["control_actions_total"], json({{"evict", 1}, {"scale_out", 4}}));
  // A user sees no count that names no model.
  auto user = EncodeOverview(server, kMetrics, 1, [](const std::string&) { return true; });
  ASSERT_TRUE(user.ok());
  EXPECT_TRUE(json::parse(*user)["control_actions_total"].empty());
}

TEST(OperatorApiTest, OverviewWithoutMetricsHasNoCounters) {
  ViewServer server;
  auto text = EncodeOverview(server, "", 1);
  ASSERT_TRUE(text.ok());
  const json o = json::parse(*text);
  EXPECT_FALSE(o["metrics"].get<bool>());
  EXPECT_FALSE(o.contains("totals"));
  EXPECT_EQ(o["cluster"]["cost_usd_per_hour"], 0.0);
  EXPECT_FALSE(EncodeOverview(server, "broken{", 1).ok());
}

TEST(OperatorApiTest, WorkersGroupDevicesAndGroupsPerWorker) {
  ViewServer server;
  server.view = std::make_shared<cluster::ClusterState>();
  server.view->groups = {Group("w1", "a", 2, 3), Group("w1", "b", 1, 1), Group("w2", "b", 1, 2)};
  server.view->devices = {
      {"cpu", 1000, 400, 4, "w1"}, {"cpu", 2000, 100, 4, "w2"}, {"cpu", 10, 1, 1, ""}};
  const json w = json::parse(EncodeWorkers(server));
  ASSERT_EQ(w["workers"].size(), 3u);
  EXPECT_EQ(w["workers"][0]["worker"], "local");  // "" = the only worker
  const json& w1 = w["workers"][1];
  EXPECT_EQ(w1["worker"], "w1");
  EXPECT_EQ(w1["zone"], "z-w1");
  EXPECT_EQ(w1["groups"].size(), 2u);
  EXPECT_EQ(w1["replicas"], 4);
  EXPECT_EQ(w1["queued"], 4);
  EXPECT_EQ(w1["devices"][0]["budget_bytes"], 1000);
  EXPECT_EQ(w1["groups"][0]["hardware"], "cpu2");
  EXPECT_EQ(json::parse(EncodeWorkers(ViewServer()))["workers"].size(), 0u);
}

TEST(OperatorApiTest, ActionsNameTheirKind) {
  DecisionRecord r;
  r.unix_ms = 7;
  r.outcome = "control:evict";
  r.target = "a";
  r.variant = "a:1:ts@cpu1";
  r.reason = "room for b";
  const json j = json::parse(EncodeActions({r}));
  EXPECT_EQ(j["actions"][0]["kind"], "evict");
  EXPECT_EQ(j["actions"][0]["group"], "a:1:ts@cpu1");
  EXPECT_EQ(j["actions"][0]["reason"], "room for b");
}

}  // namespace
}  // namespace somm::dashboard
