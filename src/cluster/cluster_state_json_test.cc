#include "cluster/cluster_state_json.h"

#include <gtest/gtest.h>

namespace somm::cluster {
namespace {

using namespace std::chrono_literals;

WorkerReport Sample(TimePoint now) {
  WorkerReport r;
  r.worker = "w1";
  r.incarnation = "0000001700000000-ab12";
  r.zone = "zone-a";
  r.address = "10.0.0.7:8101";
  r.sequence = 42;
  r.devices.push_back(DeviceState{"cpu", int64_t{8} << 30, int64_t{1} << 30, 4, "w1"});
  GroupState g;
  g.worker = "w1";
  g.model = "digits-mlp";
  g.version = 2;
  g.variant = "ts-int8";
  g.hardware = HardwareConfig{DeviceKind::kCpu, 0, 2};
  g.device = "cpu";
  g.replicas = 3;
  g.memory_bytes = 1234567;
  g.queued = 5;
  g.executing = 1;
  g.last_used = now - 2500ms;
  g.recent_rate_qps = 17.5;
  g.load_ms = 88;
  g.uses_total = 99;
  g.observed_slowdown = 1.25;
  g.warm_overhead_ms = 0.032;
  g.instances.push_back(InstanceState{7, 4, now + 3ms});
  g.instances.push_back(InstanceState{9, 0, now - 1s});
  r.groups.push_back(g);
  return r;
}

double Ms(TimePoint::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

TEST(ClusterStateJsonTest, WorkerReportRoundTripsWithTimesRelativeToTheReader) {
  const TimePoint writer_now = somm::Clock::Real().Now();
  const std::string text = WorkerReportToJson(Sample(writer_now), writer_now);
  // The reader's clock is 10 s ahead (another process, another moment).
  const TimePoint reader_now = writer_now + 10s;
  auto r = WorkerReportFromJson(text, reader_now);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->worker, "w1");
  EXPECT_EQ(r->incarnation, "0000001700000000-ab12");
  EXPECT_EQ(r->address, "10.0.0.7:8101");
  EXPECT_EQ(r->sequence, 42);
  ASSERT_EQ(r->devices.size(), 1u);
  EXPECT_EQ(r->devices[0].worker, "w1");
  EXPECT_EQ(r->devices[0].budget_bytes, int64_t{8} << 30);
  ASSERT_EQ(r->groups.size(), 1u);
  const GroupState& g = r->groups[0];
  EXPECT_EQ(g.worker, "w1");
  EXPECT_EQ(GroupLabel(g), "digits-mlp:2:ts-int8@cpu2");
  EXPECT_EQ(g.replicas, 3);
  EXPECT_EQ(g.uses_total, 99);
  EXPECT_DOUBLE_EQ(g.observed_slowdown, 1.25);
  EXPECT_DOUBLE_EQ(g.warm_overhead_ms, 0.032);
  // Ages survive; absolute times move to the reader's clock.
  EXPECT_NEAR(Ms(reader_now - g.last_used), 2500, 1);
  ASSERT_EQ(g.instances.size(), 2u);
  EXPECT_EQ(g.instances[0].instance_id, 7);
  EXPECT_NEAR(Ms(g.instances[0].busy_until - reader_now), 3, 0.01);
  // An idle instance stays idle (busy_until not in the future).
  EXPECT_LE(g.instances[1].busy_until, reader_now);
}

TEST(ClusterStateJsonTest, BadReportNamesTheProblem) {
  auto r = WorkerReportFromJson(R"({"worker":"w"})", somm::Clock::Real().Now());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("incarnation"), std::string::npos) << r.status().message();
  EXPECT_FALSE(WorkerReportFromJson("not json", somm::Clock::Real().Now()).ok());
}

TEST(ClusterStateJsonTest, DemandRoundTrips) {
  std::vector<ModelDemand> rows(2);
  rows[0].model = "a";
  rows[0].arrivals_total = 10;
  rows[0].latency_slo_ms = 5;
  rows[0].min_accuracy = 0.9;
  rows[1].model = "b";
  rows[1].version = 3;
  rows[1].answered_total = 7;
  rows[1].failed_total = 2;
  rows[1].latency_ms_total = 12.5;
  rows[1].compared_total = 4;
  rows[1].disagreed_total = 1;
  auto back = DemandFromJson(DemandToJson(rows));
  ASSERT_TRUE(back.ok());
  ASSERT_EQ(back->size(), 2u);
  EXPECT_EQ((*back)[0].arrivals_total, 10);
  EXPECT_EQ((*back)[0].min_accuracy, 0.9);
  EXPECT_FALSE((*back)[1].min_accuracy.has_value());
  EXPECT_EQ((*back)[1].version, 3);
  EXPECT_EQ((*back)[0].answered_total, 0);
  EXPECT_EQ((*back)[1].answered_total, 7);
  EXPECT_EQ((*back)[1].failed_total, 2);
  EXPECT_DOUBLE_EQ((*back)[1].latency_ms_total, 12.5);
  EXPECT_EQ((*back)[1].compared_total, 4);
  EXPECT_EQ((*back)[1].disagreed_total, 1);
}

}  // namespace
}  // namespace somm::cluster
