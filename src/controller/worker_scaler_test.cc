#include "controller/worker_scaler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace somm::control {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;
using Kind = WorkerScaleDecision::Kind;

const TimePoint kT0 = TimePoint(100000s);
constexpr int64_t kMiB = int64_t{1} << 20;

// A cluster of workers with a 100 MiB, 4-core CPU each; groups of 40 MiB on
// one thread.
struct Cluster {
  ClusterState state;
  WorkerScalerInput input;
  WorkerScalerMemory memory;
  WorkerScalerOptions options;
  TimePoint now = kT0;

  Cluster() {
    options.min_workers = 1;
    options.max_workers = 3;
    options.scale_in_after_s = 30;
    options.cooldown_s = 60;
  }
  void AddWorker(const std::string& id, bool removable = true) {
    state.devices.push_back(DeviceState{"cpu", 100 * kMiB, 0, 4, id});
    if (removable) input.removable.insert(id);
  }
  void RemoveWorker(const std::string& id) {
    std::erase_if(state.devices, [&](const DeviceState& d) { return d.worker == id; });
    std::erase_if(state.groups, [&](const GroupState& g) { return g.worker == id; });
  }
  // A group on `worker`, last used `idle` ago (never used when `used` is false).
  void AddGroup(const std::string& worker, const std::string& model, bool used = true,
                std::chrono::seconds idle = 0s, int64_t mib = 40) {
    GroupState g;
    g.worker = worker;
    g.model = model;
    g.device = "cpu";
    g.hardware = {DeviceKind::kCpu, 0, 1};
    g.memory_bytes = mib * kMiB;
    g.uses_total = used ? 100 : 0;
    g.last_used = now - idle;
    state.groups.push_back(g);
  }
  void TouchAll() {
    for (GroupState& g : state.groups) {
      if (g.uses_total > 0) g.last_used = now;
    }
  }
  WorkerScaleDecision Tick(std::chrono::seconds step = 1s) {
    WorkerScaleDecision d = DecideWorkers(state, input, memory, now, options);
    memory = d.memory;
    now += step;
    return d;
  }
};

TEST(WorkerScalerTest, RefusedPlacementScalesOutAtOnceThenWaitsForTheNewWorker) {
  Cluster c;
  c.AddWorker("w0", false);
  c.AddWorker("w1", false);
  EXPECT_EQ(c.Tick().kind, Kind::kHold);  // the first tick only learns the count
  c.input.shortfalls_total = 1;
  c.input.last_shortfall = "cannot place m:1";
  WorkerScaleDecision d = c.Tick();
  ASSERT_EQ(d.kind, Kind::kScaleOut);
  EXPECT_EQ(d.cause, "placement");
  EXPECT_EQ(d.workers, 2);
  EXPECT_EQ(d.desired, 3);
  EXPECT_THAT(d.reason, HasSubstr("cannot place m:1"));
  // More refusals while the worker starts: it is already on its way.
  c.input.pending = 1;
  c.input.shortfalls_total = 5;
  d = c.Tick();
  EXPECT_EQ(d.kind, Kind::kHold);
  EXPECT_THAT(d.reason, HasSubstr("being started"));
}

TEST(WorkerScalerTest, ShortfallsAlreadyCountedBeforeTheFirstTickDoNotScaleOut) {
  Cluster c;
  c.AddWorker("w0");
  c.input.shortfalls_total = 7;  // a controller that ran before this scaler
  EXPECT_EQ(c.Tick().kind, Kind::kHold);
  EXPECT_EQ(c.Tick().kind, Kind::kHold);
}

TEST(WorkerScalerTest, NeverAboveMaxWorkers) {
  Cluster c;
  c.options.max_workers = 2;
  c.AddWorker("w0");
  c.AddWorker("w1");
  c.Tick();
  c.input.shortfalls_total = 3;
  const WorkerScaleDecision d = c.Tick();
  EXPECT_EQ(d.kind, Kind::kHold);
  EXPECT_THAT(d.reason, HasSubstr("at --max-workers 2"));
}

TEST(WorkerScalerTest, MemoryInUseScalesOutOnlyAfterConsecutiveShortTicks) {
  Cluster c;
  c.options.scale_out_ticks = 3;
  c.AddWorker("w0");
  c.AddGroup("w0", "a");
  c.AddGroup("w0", "b", true, 0s, 55);  // 95 of 100 MiB in use
  EXPECT_EQ(c.Tick().kind, Kind::kHold);
  EXPECT_EQ(c.Tick().kind, Kind::kHold);
  // One quiet tick resets the count: a burst is not a trend.
  c.state.groups.back().uses_total = 0;
  EXPECT_EQ(c.Tick().kind, Kind::kHold);
  c.state.groups.back().uses_total = 100;
  c.TouchAll();
  EXPECT_EQ(c.Tick().kind, Kind::kHold);
  c.TouchAll();
  EXPECT_EQ(c.Tick().kind, Kind::kHold);
  c.TouchAll();
  const WorkerScaleDecision d = c.Tick();
  ASSERT_EQ(d.kind, Kind::kScaleOut);
  EXPECT_EQ(d.cause, "memory");
  EXPECT_THAT(d.reason, HasSubstr("95.0 MiB of 100.0 MiB"));
}

TEST(WorkerScalerTest, ThreadsInUseAboveTheCoresScaleOut) {
  Cluster c;
  c.options.scale_out_ticks = 1;
  c.AddWorker("w0");
  for (const char* m : {"a", "b", "c", "d", "e"}) c.AddGroup("w0", m, true, 0s, 10);
  const WorkerScaleDecision d = c.Tick();
  ASSERT_EQ(d.kind, Kind::kScaleOut);
  EXPECT_EQ(d.cause, "compute");
}

TEST(WorkerScalerTest, BelowMinWorkersScalesOut) {
  Cluster c;
  c.options.min_workers = 2;
  c.AddWorker("w0");
  const WorkerScaleDecision d = c.Tick();
  ASSERT_EQ(d.kind, Kind::kScaleOut);
  EXPECT_EQ(d.cause, "min_workers");
}

TEST(WorkerScalerTest, DrainsTheLeastUsefulSpareWorkerOnlyAfterTheWindowAndCooldown) {
  Cluster c;
  c.AddWorker("w0", false);
  c.AddWorker("w1");
  c.AddWorker("w2");
  c.AddGroup("w0", "a");
  c.AddGroup("w1", "b");         // in use: reloading it elsewhere costs
  c.AddGroup("w2", "c", false);  // never used
  c.memory.last_step = c.now;    // w2 was just started
  for (int i = 0; i < 60; ++i) {
    c.TouchAll();
    const WorkerScaleDecision d = c.Tick();
    ASSERT_EQ(d.kind, Kind::kHold) << i << ": " << d.reason;  // the cooldown holds it
  }
  c.TouchAll();
  const WorkerScaleDecision d = c.Tick();
  ASSERT_EQ(d.kind, Kind::kScaleIn) << d.reason;
  EXPECT_EQ(d.cause, "spare");
  EXPECT_EQ(d.drain, "w2");  // fewest groups in use; w0 is not removable
  EXPECT_EQ(d.desired, 2);
}

TEST(WorkerScalerTest, SpareMustLastTheWholeWindow) {
  Cluster c;
  c.AddWorker("w0");
  c.AddWorker("w1");
  c.AddGroup("w0", "a");
  for (int i = 0; i < 20; ++i) ASSERT_EQ(c.Tick().kind, Kind::kHold);
  // A shortage interrupts the window; it starts again afterwards.
  c.input.pending = 1;
  ASSERT_EQ(c.Tick().kind, Kind::kHold);
  c.input.pending = 0;
  for (int i = 0; i < 30; ++i) ASSERT_EQ(c.Tick().kind, Kind::kHold) << i;
  EXPECT_EQ(c.Tick().kind, Kind::kScaleIn);
}

TEST(WorkerScalerTest, NoDrainWhenTheGroupsInUseWouldCrowdTheOthers) {
  // Hysteresis: two workers, each 60% used by groups in use. One worker
  // could not hold both at scale_in_fill of its budget, so both stay.
  Cluster c;
  c.AddWorker("w0");
  c.AddWorker("w1");
  c.AddGroup("w0", "a", true, 0s, 60);
  c.AddGroup("w1", "b", true, 0s, 60);
  for (int i = 0; i < 200; ++i) {
    c.TouchAll();
    ASSERT_EQ(c.Tick().kind, Kind::kHold) << i;
  }
  // Once b falls idle (past the in-use window), w1 is spare.
  c.state.groups.back().uses_total = 0;
  WorkerScaleDecision d;
  for (int i = 0; i < 100 && d.kind == Kind::kHold; ++i) {
    c.TouchAll();
    d = c.Tick();
  }
  ASSERT_EQ(d.kind, Kind::kScaleIn);
  EXPECT_EQ(d.drain, "w1");
}

TEST(WorkerScalerTest, NeverBelowMinWorkers) {
  Cluster c;
  c.options.min_workers = 2;
  c.AddWorker("w0");
  c.AddWorker("w1");
  for (int i = 0; i < 200; ++i) ASSERT_EQ(c.Tick().kind, Kind::kHold) << i;
}

TEST(WorkerScalerTest, AboveMaxWorkersDrainsOne) {
  Cluster c;
  c.options.max_workers = 1;
  c.AddWorker("w0", false);
  c.AddWorker("w1");
  const WorkerScaleDecision d = c.Tick();
  ASSERT_EQ(d.kind, Kind::kScaleIn);
  EXPECT_EQ(d.cause, "max_workers");
  EXPECT_EQ(d.drain, "w1");
}

TEST(WorkerScalerTest, ScaleOutThenInDoesNotOscillate) {
  // After a drain the rest are at most scale_in_fill full, below memory_high:
  // the next ticks hold instead of asking for the worker back.
  Cluster c;
  c.AddWorker("w0");
  c.AddWorker("w1");
  c.AddGroup("w0", "a", true, 0s, 30);
  c.AddGroup("w1", "b", true, 0s, 30);
  WorkerScaleDecision d;
  for (int i = 0; i < 100 && d.kind == Kind::kHold; ++i) {
    c.TouchAll();
    d = c.Tick();
  }
  ASSERT_EQ(d.kind, Kind::kScaleIn);
  // The drained worker's group moves to the other one.
  for (GroupState& g : c.state.groups) g.worker = d.drain == "w0" ? "w1" : "w0";
  c.RemoveWorker(d.drain);
  for (int i = 0; i < 300; ++i) {
    c.TouchAll();
    ASSERT_EQ(c.Tick().kind, Kind::kHold) << i;
  }
}

}  // namespace
}  // namespace somm::control
