// ControlService and GrpcControlClient over loopback gRPC, in front of a
// fake ControlClient: a registration's variant job is started on, and its
// progress read from, the leader controller.
#include <gtest/gtest.h>

#include <atomic>
#include <string>

#include "cluster_rpc/control_service.h"
#include "cluster_rpc/grpc_control_client.h"

namespace somm {
namespace {

// Records what reaches the controller and answers what a test sets.
class FakeControl : public ControlClient {
 public:
  void EnsureLoaded(VersionPtr, const std::string&, const HardwareConfig&, int,
                    const std::string&, bool, LoadDone done, bool) override {
    done(Unimplemented("not in this test"), "");
  }
  Status LoadModel(const std::string&, bool) override { return Unimplemented("not in this test"); }
  Status UnloadModel(const std::string&) override { return Unimplemented("not in this test"); }
  HardwareConfig BaseHardware(const VersionRecord&) const override { return {}; }
  Status StartVariantJob(const std::string& name, int64_t version) override {
    started_name = name;
    started_version = version;
    return start_answer;
  }
  StatusOr<RegistrationStatus> GetRegistrationStatus(const std::string& name) override {
    if (name != status.name) return NotFound("unknown model '" + name + "'");
    return status;
  }
  std::vector<DecisionRecord> RecentActions(size_t limit) override {
    asked_limit = limit;
    return actions;
  }

  std::vector<DecisionRecord> actions;
  size_t asked_limit = 0;
  Status start_answer = Status::Ok();
  std::string started_name;
  int64_t started_version = 0;
  RegistrationStatus status;
};

class ControlRpcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto service = ControlService::Start(
        fake_, [](const std::string& m, int64_t) -> StatusOr<VersionPtr> {
          return NotFound("no model '" + m + "' in this test");
        },
        [this] { return leader_.load(); });
    ASSERT_TRUE(service.ok()) << service.status().ToString();
    service_ = std::move(service).value();
    const std::string address = "127.0.0.1:" + std::to_string(service_->port());
    client_ = std::make_unique<GrpcControlClient>([address] { return address; }, Device{});
  }
  void TearDown() override {
    client_.reset();
    if (service_) service_->Shutdown(std::chrono::system_clock::now());
  }

  FakeControl fake_;
  std::atomic<bool> leader_{true};
  std::unique_ptr<ControlService> service_;
  std::unique_ptr<GrpcControlClient> client_;
};

TEST_F(ControlRpcTest, StartVariantJobReachesTheLeaderAndItsRefusalComesBack) {
  ASSERT_TRUE(client_->StartVariantJob("digits-mlp", 3).ok());
  EXPECT_EQ(fake_.started_name, "digits-mlp");
  EXPECT_EQ(fake_.started_version, 3);
  fake_.start_answer = NotFound("model 'gone' has no version 1 loaded");
  const Status s = client_->StartVariantJob("gone", 1);
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_NE(s.message().find("no version 1 loaded"), std::string::npos) << s.ToString();
}

TEST_F(ControlRpcTest, RegistrationStatusRoundTripsWithItsProfiles) {
  RegistrationStatus& st = fake_.status;
  st.name = "digits-mlp";
  st.state = "GENERATING";
  st.phase = "profiling ts-int8 on cpu1";
  st.done = 2;
  st.total = 4;
  st.message = "half way";
  st.skipped = {"ts-fp16-cuda: no CUDA hardware config"};
  VariantProfile p;
  p.model = "digits-mlp";
  p.variant = "ts-opt";
  p.precision = "fp32";
  p.accuracy = 0.97;
  p.usable = false;
  p.unusable_reason = "slower than ts-fp32";
  st.variants = {p};
  StatusOr<RegistrationStatus> got = client_->GetRegistrationStatus("digits-mlp");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->name, "digits-mlp");
  EXPECT_EQ(got->state, "GENERATING");
  EXPECT_EQ(got->phase, st.phase);
  EXPECT_EQ(got->done, 2);
  EXPECT_EQ(got->total, 4);
  EXPECT_EQ(got->message, "half way");
  EXPECT_EQ(got->skipped, st.skipped);
  ASSERT_EQ(got->variants.size(), 1u);
  EXPECT_EQ(got->variants[0].variant, "ts-opt");
  ASSERT_TRUE(got->variants[0].accuracy.has_value());
  EXPECT_DOUBLE_EQ(*got->variants[0].accuracy, 0.97);
  EXPECT_FALSE(got->variants[0].usable);
  EXPECT_EQ(got->variants[0].unusable_reason, "slower than ts-fp32");

  const auto unknown = client_->GetRegistrationStatus("nope");
  EXPECT_EQ(unknown.status().code(), StatusCode::kNotFound) << unknown.status().ToString();
}

// A router's GET /v2/somm/actions: the leader's control actions, in its
// order, with every field.
TEST_F(ControlRpcTest, RecentActionsComeFromTheLeaderInItsOrder) {
  DecisionRecord load;
  load.unix_ms = 2000;
  load.target = "digits-mlp";
  load.requirements = "controller";
  load.outcome = "control:load";
  load.variant = "digits-mlp:1:ts-int8 x1 on worker-a";
  load.hardware = "cpu1";
  load.reason = "a query waits";
  DecisionRecord scale = load;
  scale.unix_ms = 1000;
  scale.target = "workers";
  scale.outcome = "control:scale_out";
  scale.variant.clear();
  scale.hardware.clear();
  scale.reason = "memory: 1 -> 2 worker(s)";
  fake_.actions = {load, scale};
  const std::vector<DecisionRecord> got = client_->RecentActions(7);
  EXPECT_EQ(fake_.asked_limit, 7u);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].unix_ms, 2000);
  EXPECT_EQ(got[0].outcome, "control:load");
  EXPECT_EQ(got[0].variant, load.variant);
  EXPECT_EQ(got[0].hardware, "cpu1");
  EXPECT_EQ(got[0].reason, "a query waits");
  EXPECT_EQ(got[1].outcome, "control:scale_out");
  EXPECT_EQ(got[1].target, "workers");
  EXPECT_LT(got[1].actual_latency_ms, 0);  // an action has no latency
}

TEST_F(ControlRpcTest, AStandbyRefusesVariantJobsSoTheRouterAsksTheLeader) {
  leader_ = false;
  EXPECT_EQ(client_->StartVariantJob("digits-mlp", 1).code(), StatusCode::kUnavailable);
  EXPECT_EQ(client_->GetRegistrationStatus("digits-mlp").status().code(),
            StatusCode::kUnavailable);
  EXPECT_TRUE(fake_.started_name.empty());
  // A router that cannot reach the leader lists no actions (and says so in
  // its log), rather than failing the operator's page.
  fake_.actions = {DecisionRecord{}};
  EXPECT_TRUE(client_->RecentActions(10).empty());
}

}  // namespace
}  // namespace somm
