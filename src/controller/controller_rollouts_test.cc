// The controller's rollouts in process: the record set on the registry, the
// routers' counters put in the store as demand rows, and a clock the test
// sets; each tick runs the rollout policy and carries its decision out
// (saved, set on the registry, logged).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <memory>

#include "cluster/in_memory_store.h"
#include "common/clock.h"
#include "runtime/torch/torch_registration.h"
#include "controller/controller.h"
#include "worker/testing/fake_worker_stub.h"

namespace somm {
namespace {

using ::somm::testing::FakeWorkerStub;
using namespace std::chrono_literals;

// These tests' models are torchscript's: their as-registered variant is
// torchscript's first (runtime/torch/torch_registration.h).
constexpr const char* kAsRegistered = kVariantFp32;

VersionPtr Version(int64_t n, double accuracy) {
  auto v = std::make_shared<VersionRecord>();
  v->config.name = "m";
  v->config.inputs = {{"x", DataType::kFp32, {2}}};
  v->config.outputs = {{"y", DataType::kFp32, {2}}};
  v->version = n;
  v->version_str = std::to_string(n);
  v->path = "/nonexistent/m/" + v->version_str + "/model.pt";
  VariantProfile p;
  p.model = "m";
  p.version = n;
  p.variant = kAsRegistered;
  p.accuracy = accuracy;
  HardwareProfile hp;
  hp.hardware = {DeviceKind::kCpu, 0, 1};
  hp.latency.points = {{1, 1.0}};
  hp.latency.intercept_ms = 1.0;
  hp.peak_memory_mb = 10;
  p.hardware = {hp};
  v->profiles = {p};
  return v;
}

class ControllerRolloutsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::remove_all(repo_);
    std::filesystem::create_directories(repo_);
    FakeWorkerStub::Options wo;
    wo.clock = &clock_;
    worker_ = std::make_unique<FakeWorkerStub>(store_, wo);
    workers_ = std::make_unique<SingleWorkerDirectory>(*worker_);
    ControllerOptions co;
    co.clock = &clock_;
    controller_ = std::make_unique<Controller>(co, catalog_, /*registrar=*/nullptr, store_, *workers_, metrics_, log_);
  }
  void TearDown() override { std::filesystem::remove_all(repo_); }

  // v1 and v2 served, v2 a canary at `percent` with short steps.
  void Canary(double v2_accuracy, int percent = 10) {
    catalog_.Publish("m", {Version(1, 0.97), Version(2, v2_accuracy)}, {});
    Rollout r;
    r.model = "m";
    r.stable_version = 1;
    r.canary_version = 2;
    r.percent = percent;
    r.bounds.min_queries_per_step = 20;
    r.bounds.min_queries_to_judge = 10;
    r.bounds.min_step_s = 1;
    r.step_started_unix_ms = 1;
    catalog_.SetRollout("m", r);
  }
  // The routers' counters so far: answers and their summed latency.
  void Counted(int64_t v1_answered, double v1_ms, int64_t v2_answered, double v2_ms) {
    std::vector<cluster::ModelDemand> rows(2);
    rows[0].model = rows[1].model = "m";
    rows[0].version = 1;
    rows[0].answered_total = v1_answered;
    rows[0].latency_ms_total = v1_ms * static_cast<double>(v1_answered);
    rows[1].version = 2;
    rows[1].answered_total = v2_answered;
    rows[1].latency_ms_total = v2_ms * static_cast<double>(v2_answered);
    store_.PutDemand("router", rows);
  }
  bool Logged(const std::string& outcome) {
    for (const DecisionRecord& r : log_.RecentActions(100)) {
      if (r.outcome == outcome) return true;
    }
    return false;
  }

  const std::string repo_ =
      (std::filesystem::temp_directory_path() / ("controller_rollouts_" + std::to_string(getpid())))
          .string();
  ManualClock clock_{cluster::TimePoint(100000s)};
  cluster::InMemoryClusterStateStore store_;
  ModelCatalog catalog_{repo_};
  NullServingMetrics metrics_;
  DecisionLog log_{100};
  std::unique_ptr<FakeWorkerStub> worker_;
  std::unique_ptr<SingleWorkerDirectory> workers_;
  std::unique_ptr<Controller> controller_;
};

TEST_F(ControllerRolloutsTest, AGoodCanaryAdvancesOnceItsStepHasEnoughAndIsSaved) {
  Canary(0.97);
  Counted(100, 2.0, 10, 2.0);
  controller_->Tick();  // the step's window starts here
  EXPECT_EQ(catalog_.RolloutOf("m")->percent, 10);
  clock_.Advance(2s);
  Counted(300, 2.0, 40, 2.1);
  controller_->Tick();
  auto r = catalog_.RolloutOf("m");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->percent, 25) << r->reason;
  EXPECT_TRUE(r->Active());
  EXPECT_TRUE(Logged("control:canary_advanced"));
  auto saved = LoadRollout(repo_, "m");
  ASSERT_TRUE(saved.ok() && saved->has_value());
  EXPECT_EQ((*saved)->percent, 25);
  auto view = controller_->GetRollout("m");
  ASSERT_TRUE(view.ok()) << view.status().message();
  EXPECT_EQ(view->canary.answered, 0) << "a new step, a new window";
}

TEST_F(ControllerRolloutsTest, ASlowCanaryIsRolledBackAndTheStableVersionServesAgain) {
  Canary(0.97);
  Counted(100, 2.0, 0, 0);
  controller_->Tick();
  clock_.Advance(1s);
  Counted(200, 2.0, 12, 30.0);
  controller_->Tick();
  auto r = catalog_.RolloutOf("m");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->state, Rollout::State::kRolledBack);
  EXPECT_NE(r->reason.find("mean latency"), std::string::npos) << r->reason;
  EXPECT_TRUE(Logged("control:canary_rolled_back"));
  EXPECT_EQ(catalog_.Resolve("m", "").value()->version, 1) << "unversioned queries go to v1";
}

TEST_F(ControllerRolloutsTest, LowerHeldOutAccuracyRollsBackBeforeAnyQuery) {
  Canary(0.50);
  controller_->Tick();
  auto r = catalog_.RolloutOf("m");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->state, Rollout::State::kRolledBack);
  EXPECT_NE(r->reason.find("held-out top-1 0.5000"), std::string::npos) << r->reason;
}

TEST_F(ControllerRolloutsTest, OperatorChangesNeedARunningCanary) {
  catalog_.Publish("m", {Version(1, 0.97)}, {});
  RolloutChange promote;
  promote.kind = RolloutChange::Kind::kPromote;
  promote.model = "m";
  auto s = controller_->ChangeRollout(promote);
  EXPECT_EQ(s.status().code(), StatusCode::kFailedPrecondition);
  Canary(0.97);
  s = controller_->ChangeRollout(promote);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->rollout.state, Rollout::State::kPromoted);
  EXPECT_EQ(catalog_.Resolve("m", "").value()->version, 2);
  RolloutChange start;
  start.model = "m";
  start.version = 7;
  s = controller_->ChangeRollout(start);
  EXPECT_EQ(s.status().code(), StatusCode::kNotFound) << s.status().message();
}

}  // namespace
}  // namespace somm
