// The controller's tick in process, against a fake worker stub
// (worker/testing/) that records the actions it receives and holds loads
// until the test finishes them, on a clock the test sets. Tick() waits for
// each action it sends, so a test that holds a load runs the tick on a
// thread of its own and looks at what was sent while the load is in flight.
#include "controller/controller.h"
#include "common/clock.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <future>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cluster/in_memory_store.h"
#include "worker/testing/fake_worker_stub.h"

namespace somm {
namespace {

using ::somm::testing::FakeWorkerStub;
using namespace std::chrono_literals;

// The registry's backend only serves registrations, which these tests do not make.

HardwareConfig Cpu(int threads) { return {DeviceKind::kCpu, 0, threads}; }

// A profile of `variant` on `hw`: `ms` per query at any batch, 100 MiB.
VariantProfile Profile(const std::string& variant, HardwareConfig hw, double accuracy, double ms) {
  VariantProfile p;
  p.model = "m";
  p.variant = variant;
  p.accuracy = accuracy;
  HardwareProfile hp;
  hp.hardware = hw;
  hp.latency.points = {{1, ms}};
  hp.latency.intercept_ms = ms;
  hp.peak_memory_mb = 100;
  hp.load_time_ms = 500;
  p.hardware = {hp};
  return p;
}

// fp32 on one thread: 10 ms a query, 100 q/s a replica.
VariantProfile Fp32() { return Profile("ts-fp32", Cpu(1), 0.97, 10); }
// int8 on one thread: 300 q/s, a little less accurate.
VariantProfile Int8() { return Profile("ts-int8", Cpu(1), 0.95, 10.0 / 3); }
// fp32 on four threads: 380 q/s.
VariantProfile Fp32Cpu4() { return Profile("ts-fp32", Cpu(4), 0.97, 1000.0 / 380); }

// Version 1 of "m" (no batching), with `profiles`.
VersionPtr Model(std::vector<VariantProfile> profiles) {
  auto v = std::make_shared<VersionRecord>();
  v->config.name = "m";
  v->config.inputs = {{"x", DataType::kFp32, {2}}};
  v->config.outputs = {{"y", DataType::kFp32, {2}}};
  v->version = 1;
  v->version_str = "1";
  v->path = "/nonexistent/m/1/model.pt";
  v->profiles = std::move(profiles);
  return v;
}

class ControllerTest : public ::testing::Test {
 protected:
  // A worker with `cores` cores that already serves `serving`x1 of `v`.
  void Start(int cores, VersionPtr v, const std::string& variant, HardwareConfig hw) {
    FakeWorkerStub::Options wo;
    wo.cores = cores;
    wo.hold_loads = true;
    wo.clock = &clock_;
    worker_ = std::make_unique<FakeWorkerStub>(store_, wo);
    workers_ = std::make_unique<SingleWorkerDirectory>(*worker_);
    ControllerOptions co;
    co.clock = &clock_;
    controller_ = std::make_unique<Controller>(co, catalog_, /*registrar=*/nullptr, store_, *workers_, metrics_, log_);
    catalog_.Publish("m", {v}, {});
    worker_->AddGroup(v, variant, hw);
  }

  // What the routers have counted for m:1 so far.
  void Arrivals(int64_t total) {
    cluster::ModelDemand d;
    d.model = "m";
    d.version = 1;
    d.arrivals_total = total;
    store_.PutDemand("router", {d});
  }

  // A first tick with no arrivals yet (rates come from differences), then,
  // a second later, `rate` arrivals.
  void DemandRises(int64_t rate) {
    Arrivals(0);
    controller_->Tick();
    ASSERT_TRUE(worker_->actions().empty()) << worker_->ActionLog()[0];
    clock_.Advance(1s);
    Arrivals(rate);
  }

  // The tick that follows, on its own thread (it waits for its actions).
  std::thread TickInTheBackground() {
    return std::thread([this] { controller_->Tick(); });
  }

  // Runs a tick that should replace `old_label` with `new_label` and checks
  // make before break: the load is sent and finished before the unload.
  void ExpectLoadThenUnload(const std::string& new_label, const std::string& old_label) {
    std::thread tick = TickInTheBackground();
    ASSERT_TRUE(worker_->WaitForActions(1));
    // The load is in flight: the old group still serves, and its unload
    // has not been sent.
    EXPECT_EQ(worker_->ActionLog(), std::vector<std::string>{"load " + new_label});
    EXPECT_EQ(worker_->Held(), std::vector<std::string>{new_label});
    EXPECT_FALSE(worker_->actions()[0].urgent);  // the controller's work: background
    EXPECT_EQ(worker_->StateOf(old_label), "loaded");

    ASSERT_TRUE(worker_->Complete(new_label));
    ASSERT_TRUE(worker_->WaitForActions(2));
    tick.join();
    EXPECT_EQ(worker_->ActionLog(),
              (std::vector<std::string>{"load " + new_label, "unload " + old_label}));
    EXPECT_EQ(worker_->actions()[1].action.cause, cluster::Action::Cause::kReplaced);
    EXPECT_FALSE(worker_->actions()[1].only_if_idle);  // its queries moved on
    EXPECT_EQ(worker_->StateOf(new_label), "loaded");
    EXPECT_EQ(worker_->StateOf(old_label), "");
  }

  ManualClock clock_{cluster::TimePoint(100000s)};
  cluster::InMemoryClusterStateStore store_;
  ModelCatalog catalog_{""};
  NullServingMetrics metrics_;
  DecisionLog log_{100};
  std::unique_ptr<FakeWorkerStub> worker_;
  std::unique_ptr<SingleWorkerDirectory> workers_;
  std::unique_ptr<Controller> controller_;
};

TEST_F(ControllerTest, UpgradeLoadsTheNewVariantBeforeItUnloadsTheOld) {
  // 250 q/s on two cores: fp32 would need 4 replicas, int8 needs 2.
  Start(/*cores=*/2, Model({Fp32(), Int8()}), "ts-fp32", Cpu(1));
  DemandRises(250);
  ExpectLoadThenUnload("m:1:ts-int8@cpu1", "m:1:ts-fp32@cpu1");
  EXPECT_EQ(worker_->actions()[0].action.replicas, 2);
}

TEST_F(ControllerTest, VerticalScalingLoadsTheWiderGroupBeforeItUnloadsTheNarrowOne) {
  // Four 1-thread fp32 replicas cost what one 4-thread one does, with four
  // copies of the weights.
  Start(/*cores=*/4, Model({Fp32(), Fp32Cpu4()}), "ts-fp32", Cpu(1));
  DemandRises(250);
  ExpectLoadThenUnload("m:1:ts-fp32@cpu4", "m:1:ts-fp32@cpu1");
}

TEST_F(ControllerTest, FailedReplacementLoadKeepsTheOldGroup) {
  Start(/*cores=*/2, Model({Fp32(), Int8()}), "ts-fp32", Cpu(1));
  DemandRises(250);
  std::thread tick = TickInTheBackground();
  ASSERT_TRUE(worker_->WaitForActions(1));
  ASSERT_TRUE(worker_->Complete("m:1:ts-int8@cpu1", Internal("out of memory")));
  tick.join();
  EXPECT_EQ(worker_->ActionLog(), std::vector<std::string>{"load m:1:ts-int8@cpu1"});
  EXPECT_EQ(worker_->StateOf("m:1:ts-fp32@cpu1"), "loaded");
  EXPECT_EQ(worker_->StateOf("m:1:ts-int8@cpu1"), "");
}

TEST_F(ControllerTest, ScaleUpWaitsForTheResizeAndUnloadsNothing) {
  // 150 q/s on one fp32 replica (100 q/s): 150 / 0.7 -> 3 replicas.
  Start(/*cores=*/8, Model({Fp32()}), "ts-fp32", Cpu(1));
  DemandRises(150);
  std::thread tick = TickInTheBackground();
  ASSERT_TRUE(worker_->WaitForActions(1));
  EXPECT_EQ(worker_->ActionLog(), std::vector<std::string>{"set-replicas m:1:ts-fp32@cpu1"});
  EXPECT_EQ(worker_->actions()[0].action.replicas, 3);
  EXPECT_EQ(worker_->Held(), std::vector<std::string>{"m:1:ts-fp32@cpu1"});
  ASSERT_TRUE(worker_->Complete("m:1:ts-fp32@cpu1"));
  tick.join();
  EXPECT_EQ(worker_->actions().size(), 1u);
  ASSERT_EQ(store_.Read()->groups.size(), 1u);
  EXPECT_EQ(store_.Read()->groups[0].replicas, 3);
}

TEST_F(ControllerTest, IdleGroupIsUnloadedOnceIdleLongEnough) {
  Start(/*cores=*/2, Model({Fp32()}), "ts-fp32", Cpu(1));
  Arrivals(0);
  controller_->Tick();
  EXPECT_TRUE(worker_->actions().empty());
  clock_.Advance(31s);  // past the autoscaler's default idle_unload_s (30 s)
  controller_->Tick();
  EXPECT_EQ(worker_->ActionLog(), std::vector<std::string>{"unload m:1:ts-fp32@cpu1"});
  EXPECT_TRUE(worker_->actions()[0].only_if_idle);  // never under a query in flight
  EXPECT_TRUE(store_.Read()->groups.empty());
}

// Two workers, w1 and w2, with 8 cores each; loads finish inside the call.
class ControllerSpreadTest : public ControllerTest {
 protected:
  ControllerSpreadTest() : w1_(store_, Worker("w1")), w2_(store_, Worker("w2")) {
    w1_.Publish();
    w2_.Publish();
    ControllerOptions co;
    co.clock = &clock_;
    controller_ = std::make_unique<Controller>(co, catalog_, /*registrar=*/nullptr, store_, directory_, metrics_, log_);
  }

  FakeWorkerStub::Options Worker(const std::string& id) {
    FakeWorkerStub::Options o;
    o.id = id;
    o.cores = 8;
    o.clock = &clock_;
    return o;
  }

  // Replicas of `label` per worker, as the store shows them.
  std::map<std::string, int> Shares(const std::string& label) {
    std::map<std::string, int> out;
    for (const auto& g : store_.Read()->groups) {
      if (cluster::GroupLabel(g) == label) out[g.worker] += g.replicas;
    }
    return out;
  }

  FakeWorkerStub w1_;
  FakeWorkerStub w2_;
  ::somm::testing::FakeWorkerDirectory directory_{{&w1_, &w2_}};
};

TEST_F(ControllerSpreadTest, ScaleUpPutsTheAddedReplicasOnTheOtherWorkerToo) {
  const std::string label = "m:1:ts-fp32@cpu1";
  VersionPtr v = Model({Fp32()});
  catalog_.Publish("m", {v}, {});
  w1_.AddGroup(v, "ts-fp32", Cpu(1));
  // 150 q/s on one fp32 replica (100 q/s): 3 replicas, spread 2 + 1.
  Arrivals(0);
  controller_->Tick();
  clock_.Advance(1s);
  Arrivals(150);
  controller_->Tick();
  EXPECT_EQ(Shares(label), (std::map<std::string, int>{{"w1", 2}, {"w2", 1}}));
  EXPECT_EQ(w1_.ActionLog(), std::vector<std::string>{"set-replicas " + label});
  EXPECT_EQ(w1_.actions()[0].action.replicas, 2);
  EXPECT_EQ(w2_.ActionLog(), std::vector<std::string>{"load " + label});
  EXPECT_EQ(w2_.actions()[0].action.replicas, 1);
  EXPECT_FALSE(w2_.actions()[0].urgent);  // the controller's work: background
}

TEST_F(ControllerSpreadTest, IdleGroupSpreadOverTwoWorkersLeavesBoth) {
  const std::string label = "m:1:ts-fp32@cpu1";
  VersionPtr v = Model({Fp32()});
  catalog_.Publish("m", {v}, {});
  w1_.AddGroup(v, "ts-fp32", Cpu(1));
  w2_.AddGroup(v, "ts-fp32", Cpu(1), 2);
  Arrivals(0);
  controller_->Tick();
  EXPECT_TRUE(w1_.actions().empty());
  EXPECT_TRUE(w2_.actions().empty());
  clock_.Advance(31s);  // past the autoscaler's default idle_unload_s (30 s)
  controller_->Tick();
  EXPECT_EQ(w1_.ActionLog(), std::vector<std::string>{"unload " + label});
  EXPECT_EQ(w2_.ActionLog(), std::vector<std::string>{"unload " + label});
  EXPECT_TRUE(Shares(label).empty());
}

TEST_F(ControllerSpreadTest, ScaleDownTakesAShareAwayAndKeepsTheOther) {
  const std::string label = "m:1:ts-fp32@cpu1";
  VersionPtr v = Model({Fp32()});
  catalog_.Publish("m", {v}, {});
  w1_.AddGroup(v, "ts-fp32", Cpu(1));
  w2_.AddGroup(v, "ts-fp32", Cpu(1));
  // 10 q/s, a tenth of one replica, tick after tick: once low long enough
  // the two replicas become one.
  int64_t arrivals = 0;
  for (int tick = 0; tick < 40 && Shares(label).size() == 2; ++tick) {
    Arrivals(arrivals);
    controller_->Tick();
    clock_.Advance(1s);
    arrivals += 10;
  }
  const auto shares = Shares(label);
  ASSERT_EQ(shares.size(), 1u);
  EXPECT_EQ(shares.begin()->second, 1);
  // The share that left was unloaded only once idle, and the other untouched.
  FakeWorkerStub& gone = shares.count("w1") ? w2_ : w1_;
  FakeWorkerStub& kept = shares.count("w1") ? w1_ : w2_;
  ASSERT_EQ(gone.ActionLog(), std::vector<std::string>{"unload " + label});
  EXPECT_TRUE(gone.actions()[0].only_if_idle);
  EXPECT_TRUE(kept.actions().empty());
}

// Version 1 of `name`, profiled as Fp32() (100 MiB).
VersionPtr Named(const std::string& name) {
  auto v = std::make_shared<VersionRecord>(*Model({Fp32()}));
  v->config.name = name;
  for (auto& p : v->profiles) p.model = name;
  return v;
}

// Regression: the load was sent whether or not its evictions were carried
// out, so a group busy at the worker (its report not showing it yet) stayed
// and the load took the worker over its budget.
TEST_F(ControllerTest, AnEvictionRefusedByABusyGroupHoldsBackTheLoadThatNeededItsRoom) {
  const std::string a = "a:1:ts-fp32@cpu1", b = "b:1:ts-fp32@cpu1";
  FakeWorkerStub::Options wo;
  wo.id = "w";
  wo.budget_bytes = 150 << 20;  // one 100 MiB group
  wo.clock = &clock_;
  wo.busy = {a};
  FakeWorkerStub worker(store_, wo);
  worker.Publish();
  SingleWorkerDirectory directory(worker);
  ControllerOptions co;
  co.clock = &clock_;
  Controller controller(co, catalog_, /*registrar=*/nullptr, store_, directory, metrics_, log_);
  VersionPtr va = Named("a"), vb = Named("b");
  catalog_.Publish("a", {va}, {});
  catalog_.Publish("b", {vb}, {});
  worker.AddGroup(va, "ts-fp32", Cpu(1));

  std::promise<Status> loaded;
  controller.EnsureLoaded(vb, "ts-fp32", Cpu(1), 1, "a query", /*urgent=*/true,
                          [&](const Status& s, const std::string&) { loaded.set_value(s); });
  const Status s = loaded.get_future().get();
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s.message();
  // The refused eviction, and no load: placed again, `a` counts as busy.
  EXPECT_EQ(worker.ActionLog(), std::vector<std::string>{"evict " + a});
  EXPECT_EQ(worker.StateOf(a), "loaded");
  EXPECT_EQ(worker.StateOf(b), "");
  // Both the refused eviction and the refused placement are shortfalls.
  EXPECT_EQ(controller.PlacementShortfalls().total, 2);
}

// A store whose readers see the state as it was at the last CatchUp(): a
// router's or controller's view trails the workers' reports, as a Redis
// watcher's does (and the simulator's store, by its view lag).
class LaggingStore : public cluster::ClusterStateStore {
 public:
  explicit LaggingStore(cluster::ClusterStateStore& live) : live_(live) { CatchUp(); }
  void CatchUp() { seen_ = live_.Read(); }
  void PutWorker(cluster::WorkerReport report) override { live_.PutWorker(std::move(report)); }
  void RemoveWorker(const std::string& worker) override { live_.RemoveWorker(worker); }
  void PutDemand(const std::string& router, std::vector<cluster::ModelDemand> demand) override {
    live_.PutDemand(router, std::move(demand));
  }
  std::shared_ptr<const cluster::ClusterState> Read() const override { return seen_; }
  uint64_t generation() const override { return live_.generation(); }

 private:
  cluster::ClusterStateStore& live_;
  std::shared_ptr<const cluster::ClusterState> seen_;
};

// Loads under way, and loads done that the view does not show yet, hold
// their memory for the placements after them, though the view the
// controller reads has not changed in between (the placement view is
// cached across placements and each reservation is added to it in place).
TEST_F(ControllerTest, ALoadUnderWayHoldsItsMemoryForTheLoadsAfterIt) {
  const std::string a = "a:1:ts-fp32@cpu1", b = "b:1:ts-fp32@cpu1", c = "c:1:ts-fp32@cpu1";
  auto options = [this](const std::string& id, int64_t budget_mib) {
    FakeWorkerStub::Options o;
    o.id = id;
    o.budget_bytes = budget_mib << 20;  // one 100 MiB group each
    o.hold_loads = true;
    o.clock = &clock_;
    return o;
  };
  FakeWorkerStub w1(store_, options("w1", 160));
  FakeWorkerStub w2(store_, options("w2", 150));
  w1.Publish();
  w2.Publish();
  LaggingStore view(store_);
  ::somm::testing::FakeWorkerDirectory directory{{&w1, &w2}};
  ControllerOptions co;
  co.clock = &clock_;
  Controller controller(co, catalog_, /*registrar=*/nullptr, view, directory, metrics_, log_);
  VersionPtr va = Named("a"), vb = Named("b"), vc = Named("c");
  for (const VersionPtr& v : {va, vb, vc}) catalog_.Publish(v->config.name, {v}, {});

  std::promise<std::string> at_a, at_b, at_c, refused_c;
  auto where = [](std::promise<std::string>& p) {
    return [&p](const Status& s, const std::string& worker) {
      p.set_value(s.ok() ? worker : "error: " + s.message());
    };
  };
  // `a` goes where the most memory is free; `b` then finds w1 short by
  // what `a` reserved.
  controller.EnsureLoaded(va, "ts-fp32", Cpu(1), 1, "a query", /*urgent=*/true, where(at_a));
  controller.EnsureLoaded(vb, "ts-fp32", Cpu(1), 1, "a query", /*urgent=*/true, where(at_b));
  EXPECT_EQ(w1.Held(), std::vector<std::string>{a});
  EXPECT_EQ(w2.Held(), std::vector<std::string>{b});
  ASSERT_TRUE(w1.Complete(a));
  ASSERT_TRUE(w2.Complete(b));
  EXPECT_EQ(at_a.get_future().get(), "w1");
  EXPECT_EQ(at_b.get_future().get(), "w2");
  // Both loaded, neither in the view yet: their memory is still taken, and
  // there is nothing the view knows to evict.
  controller.EnsureLoaded(vc, "ts-fp32", Cpu(1), 1, "a query", /*urgent=*/true,
                          where(refused_c));
  EXPECT_THAT(refused_c.get_future().get(), ::testing::StartsWith("error: cannot place " + c));
  EXPECT_TRUE(w1.Held().empty() && w2.Held().empty());
  // Once the view shows them, `c` makes room by an eviction.
  view.CatchUp();
  controller.EnsureLoaded(vc, "ts-fp32", Cpu(1), 1, "a query", /*urgent=*/true, where(at_c));
  FakeWorkerStub& to = w1.Held().empty() ? w2 : w1;
  ASSERT_EQ(to.Held(), std::vector<std::string>{c});
  ASSERT_TRUE(to.Complete(c));
  const std::string victim = &to == &w1 ? a : b;
  EXPECT_EQ(to.ActionLog(),
            (std::vector<std::string>{"load " + victim, "evict " + victim, "load " + c}));
  EXPECT_EQ(at_c.get_future().get(), &to == &w1 ? "w1" : "w2");
}

}  // namespace
}  // namespace somm
