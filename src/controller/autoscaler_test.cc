#include "controller/autoscaler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

namespace somm::control {
namespace {

using namespace std::chrono_literals;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::StartsWith;

const TimePoint kT0 = TimePoint(100000s);
constexpr int64_t kMiB = int64_t{1} << 20;

HardwareConfig Cpu(int threads) { return {DeviceKind::kCpu, 0, threads}; }
HardwareConfig Cuda() { return {DeviceKind::kCuda, 0, 1}; }

// An option of model "m" version 1 with latency(b) = intercept + slope * b.
VariantOption Opt(const std::string& variant, HardwareConfig hw, std::optional<double> accuracy,
                  double intercept_ms, double slope_ms = 0, int64_t max_batch = 1,
                  double load_ms = 500, const std::string& model = "m") {
  VariantOption o;
  o.model = model;
  o.version = 1;
  o.variant = variant;
  o.hardware = hw;
  o.device = hw.device == DeviceKind::kCuda ? "cuda:0" : "cpu";
  o.accuracy = accuracy;
  o.latency.intercept_ms = intercept_ms;
  o.latency.slope_ms = slope_ms;
  o.max_batch = max_batch;
  o.memory_bytes = 100 * kMiB;
  o.load_ms = load_ms;
  return o;
}

// fp32 on one thread: 10 ms per query = 100 q/s per replica.
VariantOption Fp32() { return Opt("ts-fp32", Cpu(1), 0.97, 10); }
// int8 on one thread: 300 q/s, a little less accurate.
VariantOption Int8() { return Opt("ts-int8", Cpu(1), 0.95, 10.0 / 3); }

// A cluster driven tick by tick: Decide, then carry the actions out at once
// (the executor's job live), then advance the clock one tick.
struct Sim {
  ClusterState state;
  AutoscalerMemory memory;
  AutoscalerConfig config;
  TimePoint now = kT0;
  std::chrono::milliseconds tick{1000};  // how far each Step advances the clock
  std::vector<Action> all;
  std::vector<std::string> notes;

  explicit Sim(int cores = 8, int64_t budget = 10000 * kMiB) {
    state.devices = {DeviceState{"cpu", budget, 0, cores}};
  }
  DeviceState& Dev(const std::string& name) {
    for (DeviceState& d : state.devices) {
      if (d.name == name) return d;
    }
    ADD_FAILURE() << "no device " << name;
    return state.devices[0];
  }
  void AddGroup(const VariantOption& o, int replicas) {
    state.groups.push_back(GroupFor(o, replicas, now));
    Dev(o.device).used_bytes += replicas * o.memory_bytes;
  }
  GroupState* Find(const Action& a) {
    for (GroupState& g : state.groups) {
      if (g.model == a.model && g.variant == a.variant && g.hardware == a.hardware) return &g;
    }
    return nullptr;
  }
  // One tick with model m at `rate` q/s.
  std::vector<Action> Step(double rate, double slo_ms = 0, std::optional<double> min_acc = {}) {
    state.demand = {ModelDemand{"m", 1, rate, slo_ms, min_acc}};
    AutoscalerDecision d = Decide(state, memory, now, config);
    memory = d.memory;
    notes.insert(notes.end(), d.notes.begin(), d.notes.end());
    for (const Action& a : d.actions) Execute(a);
    all.insert(all.end(), d.actions.begin(), d.actions.end());
    for (GroupState& g : state.groups) {
      if (g.model == "m" && rate > 0) g.last_used = now;
    }
    now += tick;
    return d.actions;
  }
  void Execute(const Action& a) {
    GroupState* g = Find(a);
    if (a.kind == Action::kLoad) {
      ASSERT_EQ(g, nullptr) << ToString(a);
      VariantOption* o = nullptr;
      for (VariantOption& opt : state.options) {
        if (opt.model == a.model && opt.variant == a.variant && opt.hardware == a.hardware)
          o = &opt;
      }
      ASSERT_NE(o, nullptr) << ToString(a);
      AddGroup(*o, a.replicas);
      return;
    }
    ASSERT_NE(g, nullptr) << ToString(a);
    const int replicas = a.kind == Action::kUnload ? 0 : a.replicas;
    Dev(g->device).used_bytes += (replicas - g->replicas) * g->memory_bytes;
    g->replicas = replicas;
    if (replicas == 0) {
      state.groups.erase(state.groups.begin() + (g - state.groups.data()));
    }
  }
  // The group of model m serving now, as "variant@hw xN" (or "" / "many").
  std::string Serving() const {
    std::string s;
    for (const GroupState& g : state.groups) {
      if (g.model != "m") continue;
      if (!s.empty()) return "many";
      s = g.variant + "@" + g.hardware.Name() + " x" + std::to_string(g.replicas);
    }
    return s;
  }
};

TEST(AutoscalerTest, ReplicaCapacityUsesTheLargestBatchWithinHalfTheSlo) {
  // latency(b) = 2 + b ms, max batch 32.
  VariantOption o = Opt("ts-fp32", Cpu(1), 0.9, 2, 1, 32);
  auto c = CapacityOf(o, 0, 0.5);  // no SLO: max batch
  ASSERT_TRUE(c);
  EXPECT_EQ(c->batch, 32);
  EXPECT_NEAR(c->qps, 32 * 1000.0 / 34, 1e-9);
  c = CapacityOf(o, 20, 0.5);  // room 10 ms -> batch 8 in 10 ms
  ASSERT_TRUE(c);
  EXPECT_EQ(c->batch, 8);
  EXPECT_NEAR(c->qps, 800, 1e-9);
  c = CapacityOf(o, 4, 0.5);  // even batch 1 (3 ms) is above 2 ms: batch 1
  ASSERT_TRUE(c);
  EXPECT_EQ(c->batch, 1);
  EXPECT_NEAR(c->qps, 1000.0 / 3, 1e-9);
  EXPECT_FALSE(CapacityOf(Opt("x", Cpu(1), 0.9, 0), 0, 0.5));  // unprofiled
}

TEST(AutoscalerTest, LoadsOnDemandTheCheapestOptionThatCarriesTheRate) {
  Sim sim;
  sim.state.options = {Opt("ts-fp32", Cpu(4), 0.97, 2.6), Fp32()};
  std::vector<Action> a = sim.Step(50);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].kind, Action::kLoad);
  EXPECT_EQ(a[0].variant, "ts-fp32");
  EXPECT_EQ(a[0].hardware, Cpu(1));
  EXPECT_EQ(a[0].replicas, 1);
  EXPECT_THAT(a[0].reason, AllOf(StartsWith("load on demand: observed 50.0 q/s"),
                                 HasSubstr("x1 carries 100.0 q/s")));
  EXPECT_THAT(ToString(a[0]), StartsWith("load m:1:ts-fp32@cpu1 on cpu x1: load on demand"));
  // Nothing more while the load holds.
  for (int i = 0; i < 20; ++i) EXPECT_TRUE(sim.Step(50).empty());
}

TEST(AutoscalerTest, AddsReplicasUnderRisingLoad) {
  Sim sim;
  sim.state.options = {Fp32()};
  sim.AddGroup(Fp32(), 1);
  EXPECT_TRUE(sim.Step(60).empty());  // 60% busy: between the watermarks
  // 150 q/s on 100 q/s: 150 / 0.7 = 214 -> 3 replicas.
  std::vector<Action> a = sim.Step(150);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].kind, Action::kSetReplicas);
  EXPECT_EQ(a[0].replicas, 3);
  EXPECT_THAT(a[0].reason,
              AllOf(StartsWith("scale up: demand"), HasSubstr("above high watermark 80%")));
  a = sim.Step(300);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].kind, Action::kSetReplicas);
  EXPECT_GE(a[0].replicas, 5);  // 300 / 0.7 = 429, plus the forecast's trend
  EXPECT_LE(a[0].replicas, 6);
}

TEST(AutoscalerTest, RemovesReplicasOnlyOnceThePeakLeavesTheWindowWhenLoadFalls) {
  Sim sim;
  // Holds as for a slow load (scale_down_hold_per_load_s would cap them at
  // 20 x the options' 0.5-s load: see AFastLoadShedsASpikeAfterItsHold...).
  sim.config.scale_down_hold_per_load_s = 1000;
  sim.state.options = {Fp32()};
  sim.AddGroup(Fp32(), 1);
  ASSERT_EQ(sim.Step(300).size(), 1u);  // up to x5 at t = 0
  ASSERT_EQ(sim.Serving(), "ts-fp32@cpu1 x5");
  // 50 q/s on 500: low at once, but the 300 q/s peak stays in the 60 s window.
  for (int t = 1; t < 60; ++t) EXPECT_TRUE(sim.Step(50).empty()) << "t = " << t;
  std::vector<Action> a = sim.Step(50);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].kind, Action::kSetReplicas);
  EXPECT_EQ(a[0].replicas, 1);
  EXPECT_THAT(a[0].reason,
              AllOf(StartsWith("scale down: demand 50.0 q/s"),
                    HasSubstr("is 10% of capacity 500.0 q/s (ts-fp32@cpu1 x5), below low "
                              "watermark 50% for 60 ticks, 60 s since the last change (cooldown "
                              "30 s), peak 50.0 q/s in the last 60 s")));
  for (int t = 0; t < 60; ++t) EXPECT_TRUE(sim.Step(50).empty());
}

TEST(AutoscalerTest, RemovesReplicasOnlyAfterTheCooldown) {
  Sim sim;
  // Holds as for a slow load (scale_down_hold_per_load_s would cap them at
  // 20 x the options' 0.5-s load: see AFastLoadShedsASpikeAfterItsHold...).
  sim.config.scale_down_hold_per_load_s = 1000;
  sim.config.scale_down_window_s = 0;  // the cooldown alone
  sim.state.options = {Fp32()};
  sim.AddGroup(Fp32(), 1);
  ASSERT_EQ(sim.Step(300).size(), 1u);  // x5 at t = 0
  for (int t = 1; t < 30; ++t) EXPECT_TRUE(sim.Step(150).empty()) << "t = " << t;
  std::vector<Action> a = sim.Step(150);  // 30% of 500 for 29 ticks; 30 s since the change
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].replicas, 3);
  // The next step down waits another 30 s.
  for (int t = 1; t < 30; ++t) EXPECT_TRUE(sim.Step(20).empty()) << "t = " << t;
  a = sim.Step(20);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].replicas, 1);
  EXPECT_THAT(a[0].reason, HasSubstr("30 s since the last change (cooldown 30 s)"));
}

TEST(AutoscalerTest, UpgradesToInt8WhenFp32CannotCarryTheLoadWithinTheCoresAndDowngradesLater) {
  Sim sim(/*cores=*/2);
  // Holds as for a slow load (scale_down_hold_per_load_s would cap them at
  // 20 x the options' 0.5-s load: see AFastLoadShedsASpikeAfterItsHold...).
  sim.config.scale_down_hold_per_load_s = 1000;
  sim.state.options = {Fp32(), Int8()};
  sim.AddGroup(Fp32(), 1);
  EXPECT_TRUE(sim.Step(50).empty());
  // 250 q/s: fp32 needs 4 replicas, 2 cores; int8 needs 2.
  std::vector<Action> a = sim.Step(250);
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].kind, Action::kLoad);
  EXPECT_EQ(a[0].variant, "ts-int8");
  EXPECT_EQ(a[0].replicas, 2);
  EXPECT_THAT(a[0].reason, StartsWith("upgrade: demand"));
  EXPECT_EQ(a[1].kind, Action::kUnload);
  EXPECT_EQ(a[1].variant, "ts-fp32");
  EXPECT_EQ(a[1].reason, "replaced by m:1:ts-int8@cpu1 (upgrade)");
  // The ordering is in the types, not the text: the load names what it
  // replaces, and the unload says it is a replacement.
  EXPECT_EQ(a[0].replaces, (std::vector<std::string>{"m:1:ts-fp32@cpu1"}));
  EXPECT_EQ(a[1].cause, Action::Cause::kReplaced);
  // Load falls to 50: fp32 x1 and int8 x1 both cost one core; fp32 is more
  // accurate. One move, once the peak has left the window, straight back to fp32.
  int moved_at = -1;
  for (int t = 1; t <= 90; ++t) {
    a = sim.Step(50);
    if (a.empty()) continue;
    ASSERT_EQ(moved_at, -1) << ToString(a[0]);
    moved_at = t;
    ASSERT_EQ(a.size(), 2u);
    EXPECT_EQ(a[0].kind, Action::kLoad);
    EXPECT_EQ(a[0].variant, "ts-fp32");
    EXPECT_EQ(a[0].replicas, 1);
    EXPECT_THAT(a[0].reason, StartsWith("downgrade: demand"));
    EXPECT_THAT(a[1].reason, StartsWith("replaced by m:1:ts-fp32@cpu1 (downgrade)"));
  }
  EXPECT_EQ(moved_at, 60);  // when the 250 q/s sample leaves the 60 s window
  EXPECT_EQ(sim.Serving(), "ts-fp32@cpu1 x1");
}

TEST(AutoscalerTest, ScalesVerticallyWhenMoreThreadsCostTheSameAndUseLessMemory) {
  Sim sim(/*cores=*/4);
  // fp32 on 4 threads: 380 q/s; four 1-thread replicas (400 q/s) cost as much
  // but hold four copies of the weights.
  sim.state.options = {Fp32(), Opt("ts-fp32", Cpu(4), 0.97, 1000.0 / 380)};
  sim.AddGroup(Fp32(), 1);
  std::vector<Action> a = sim.Step(250);
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].kind, Action::kLoad);
  EXPECT_EQ(a[0].hardware, Cpu(4));
  EXPECT_EQ(a[0].replicas, 1);
  EXPECT_THAT(a[0].reason, StartsWith("vertical: cpu1 -> cpu4; demand"));
  EXPECT_EQ(a[1].reason, "replaced by m:1:ts-fp32@cpu4 (vertical: cpu1 -> cpu4)");
}

TEST(AutoscalerTest, PreloadsTheGpuBeforeTheForecastRiseArrives) {
  Sim sim(/*cores=*/1);
  sim.state.devices.push_back(DeviceState{"cuda:0", 8000 * kMiB, 0, 4});
  // The GPU carries 5000 q/s but takes 5 s to load and costs ~12 cores.
  sim.state.options = {Fp32(), Opt("ts-fp32", Cuda(), 0.97, 0.2, 0, 1, 5000)};
  sim.AddGroup(Fp32(), 1);
  // 10 q/s rising by 5 q/s a second. One fp32 core is 80% busy at 80 q/s.
  for (int t = 0; t < 20; ++t) {
    const double rate = 10 + 5 * t;
    std::vector<Action> a = sim.Step(rate);
    if (a.empty()) continue;
    EXPECT_LT(rate, 80) << "the GPU was loaded only when the rise had arrived";
    ASSERT_EQ(a.size(), 2u);
    EXPECT_EQ(a[0].kind, Action::kLoad);
    EXPECT_EQ(a[0].device, "cuda:0");
    EXPECT_THAT(a[0].reason, StartsWith("preload upgrade: demand"));
    EXPECT_EQ(a[1].kind, Action::kUnload);
    return;
  }
  FAIL() << "no preload";
}

TEST(AutoscalerTest, UnloadsIdleModelsButNotPinnedOrBusyOnes) {
  Sim sim;
  sim.state.options = {Fp32()};
  VariantOption other = Opt("ts-fp32", Cpu(1), 0.9, 10, 0, 1, 500, "other");
  VariantOption pinned = Opt("ts-fp32", Cpu(1), 0.9, 10, 0, 1, 500, "pinned");
  VariantOption busy = Opt("ts-fp32", Cpu(1), 0.9, 10, 0, 1, 500, "busy");
  VariantOption recent = Opt("ts-fp32", Cpu(1), 0.9, 10, 0, 1, 500, "recent");
  for (const VariantOption& o : {other, pinned, busy, recent}) {
    sim.state.options.push_back(o);
    sim.state.groups.push_back(GroupFor(o, 1, kT0 - 40s));
  }
  sim.state.groups[1].pinned = true;
  sim.state.groups[2].queued = 3;
  sim.state.groups[3].last_used = kT0 - 10s;
  AutoscalerDecision d = Decide(sim.state, {}, kT0, sim.config);  // no demand at all
  ASSERT_EQ(d.actions.size(), 1u);
  EXPECT_EQ(d.actions[0].kind, Action::kUnload);
  EXPECT_EQ(d.actions[0].model, "other");
  EXPECT_THAT(d.actions[0].reason,
              StartsWith("idle 40 s: no queries for 40.0 s (idle_unload_s 30 s)"));
  EXPECT_THAT(d.notes, ::testing::Contains(HasSubstr("busy:1:ts-fp32@cpu1: idle 40 s but")));
}

// Configured instances (model.yaml instance_count) were unloaded after 30 s
// idle, and the next query paid a cold start; now they are a floor.
TEST(AutoscalerTest, IdleUnloadingKeepsConfiguredInstancesAndTrimsReplicasAboveThem) {
  Sim sim;
  VariantOption kept = Opt("ts-fp32", Cpu(1), 0.9, 10, 0, 1, 500, "configured");
  kept.floor_replicas = 2;
  VariantOption trimmed = Opt("ts-fp32", Cpu(1), 0.9, 10, 0, 1, 500, "scaled");
  trimmed.floor_replicas = 1;
  VariantOption gone = Opt("ts-fp32", Cpu(1), 0.9, 10, 0, 1, 500, "unconfigured");
  sim.state.options = {kept, trimmed, gone};
  sim.state.groups = {GroupFor(kept, 2, kT0 - 600s), GroupFor(trimmed, 3, kT0 - 600s),
                      GroupFor(gone, 1, kT0 - 600s)};
  AutoscalerDecision d = Decide(sim.state, {}, kT0, sim.config);
  ASSERT_EQ(d.actions.size(), 2u);
  EXPECT_EQ(d.actions[0].kind, Action::kSetReplicas);
  EXPECT_EQ(d.actions[0].model, "scaled");
  EXPECT_EQ(d.actions[0].replicas, 1);
  EXPECT_THAT(d.actions[0].reason, HasSubstr("configured instance"));
  EXPECT_EQ(d.actions[1].kind, Action::kUnload);
  EXPECT_EQ(d.actions[1].model, "unconfigured");
}

TEST(AutoscalerTest, UnloadsABusyModelsIdleGroupOnlyWhileAnotherOfItsGroupsServes) {
  // The selector put model m's queries on int8; the fp32 group sat unused.
  Sim sim;
  sim.state.options = {Fp32(), Int8()};
  sim.state.groups = {GroupFor(Fp32(), 1, kT0 - 40s), GroupFor(Int8(), 1, kT0 - 1s)};
  sim.state.demand = {ModelDemand{"m", 1, 50, 0, {}}};
  AutoscalerDecision d = Decide(sim.state, {}, kT0, sim.config);
  ASSERT_FALSE(d.actions.empty());
  EXPECT_EQ(d.actions[0].kind, Action::kUnload);
  EXPECT_EQ(d.actions[0].variant, "ts-fp32");
  EXPECT_THAT(d.actions[0].reason,
              AllOf(StartsWith("redundant: no queries for 40.0 s"),
                    HasSubstr("while m:1:ts-int8@cpu1 serves the model's 50.0 q/s")));
  for (const Action& a : d.actions) EXPECT_NE(a.variant, "ts-int8") << ToString(a);

  // Not while it is the only group used lately, nor before idle_unload_s.
  sim.state.groups[1].last_used = kT0 - 40s;
  for (const Action& a : Decide(sim.state, {}, kT0, sim.config).actions) {
    EXPECT_NE(a.kind, Action::kUnload) << ToString(a);
  }
  sim.state.groups[0].last_used = kT0 - 20s;
  sim.state.groups[1].last_used = kT0 - 1s;
  for (const Action& a : Decide(sim.state, {}, kT0, sim.config).actions) {
    EXPECT_NE(a.kind, Action::kUnload) << ToString(a);
  }
}

TEST(AutoscalerTest, RespectsTheCoreCap) {
  Sim sim(/*cores=*/4);
  sim.state.options = {Fp32(), Opt("ts-fp32", Cpu(1), 0.9, 10, 0, 1, 500, "other")};
  sim.state.groups.push_back(GroupFor(sim.state.options[1], 1, kT0));  // 1 thread, another model
  sim.state.groups.back().executing = 1;  // in use: not evicted for its core
  sim.AddGroup(Fp32(), 1);
  std::vector<Action> a = sim.Step(1000);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].kind, Action::kSetReplicas);
  EXPECT_EQ(a[0].replicas, 3);  // 4 cores - 1 thread of "other"
  EXPECT_THAT(a[0].reason,
              HasSubstr("short of demand: at most x3 ts-fp32@cpu1 fits on cpu: cores 4"));
  // Once at the cap, no more actions, only a note.
  EXPECT_TRUE(sim.Step(1000).empty());
  EXPECT_THAT(sim.notes, ::testing::Contains(HasSubstr("no larger configuration fits")));

  Sim over(/*cores=*/4);
  over.config.max_oversubscription = 1.5;
  over.state.options = {Fp32()};
  over.AddGroup(Fp32(), 1);
  a = over.Step(1000);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].replicas, 6);
}

// A private model's memory is charged to its owner's quota per configured
// instance; load on it used to replicate it past that, on others' memory.
TEST(AutoscalerTest, APrivateModelRunsAtMostItsChargedInstancesWhateverItsLoad) {
  Sim sim(/*cores=*/8);
  VariantOption charged = Fp32();
  charged.max_replicas = 2;
  sim.state.options = {charged};
  sim.AddGroup(charged, 1);
  std::vector<Action> a = sim.Step(1000);  // 1000 q/s on 100 q/s replicas
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].kind, Action::kSetReplicas);
  EXPECT_EQ(a[0].replicas, 2);
  EXPECT_THAT(a[0].reason, HasSubstr("short of demand: at most x2 ts-fp32@cpu1: a private model "
                                     "runs at most its instance_count replicas"));
  EXPECT_TRUE(sim.Step(1000).empty());

  // The same load on a public model takes every core.
  Sim open(/*cores=*/8);
  open.state.options = {Fp32()};
  open.AddGroup(Fp32(), 1);
  a = open.Step(1000);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].replicas, 8);
}

TEST(AutoscalerTest, RespectsTheMemoryBudget) {
  Sim sim(/*cores=*/8, /*budget=*/350 * kMiB);  // 100 MiB per replica
  sim.state.options = {Fp32()};
  sim.AddGroup(Fp32(), 1);
  std::vector<Action> a = sim.Step(1000);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].replicas, 3);
  EXPECT_THAT(a[0].reason,
              HasSubstr("memory free 250.0 MiB + evictable 0 B, 100.0 MiB per replica"));
  EXPECT_LE(sim.state.devices[0].used_bytes, sim.state.devices[0].budget_bytes);
}

// One tick of model m (fp32 x1) at 250 q/s beside a group of model "idle"
// on `idle_hw`, used 5 s ago (not idle long enough to unload), and one of
// model "busy" on one thread with 5 q/s of its own.
AutoscalerDecision DecideBesideIdleAndBusy(Sim& sim, HardwareConfig idle_hw) {
  VariantOption idle = Opt("ts-fp32", idle_hw, 0.9, 10, 0, 1, 50, "idle");
  VariantOption busy = Opt("ts-fp32", Cpu(1), 0.9, 10, 0, 1, 50, "busy");
  sim.state.options = {Fp32(), idle, busy};
  sim.AddGroup(Fp32(), 1);
  sim.AddGroup(idle, 1);
  sim.AddGroup(busy, 1);
  sim.state.groups[1].last_used = kT0 - 5s;
  sim.state.demand = {ModelDemand{"m", 1, 250, 0, {}}, ModelDemand{"busy", 1, 5, 0, {}}};
  return Decide(sim.state, {}, kT0, sim.config);
}

TEST(AutoscalerTest, EvictsAnotherModelsIdleGroupToMakeRoomButNeverABusyModels) {
  Sim sim(/*cores=*/8, /*budget=*/400 * kMiB);
  AutoscalerDecision d = DecideBesideIdleAndBusy(sim, Cpu(1));
  ASSERT_EQ(d.actions.size(), 2u);
  EXPECT_EQ(d.actions[0].kind, Action::kEvict);
  EXPECT_EQ(d.actions[0].model, "idle");
  EXPECT_THAT(d.actions[0].reason, AllOf(StartsWith("evict: idle:1:ts-fp32@cpu1: value"),
                                         HasSubstr("(room for m:1:ts-fp32@cpu1)")));
  EXPECT_EQ(d.actions[1].kind, Action::kSetReplicas);
  EXPECT_EQ(d.actions[1].model, "m");
  EXPECT_EQ(d.actions[1].replicas, 3);  // 400 MiB - busy's 100 MiB
}

TEST(AutoscalerTest, EvictsOtherModelsIdleGroupsForCoresButNeverABusyModels) {
  // At scale the long tail's idle replicas held every core of the cluster,
  // and a surge on a busy model found none to grow into.
  Sim sim(/*cores=*/4);
  AutoscalerDecision d = DecideBesideIdleAndBusy(sim, Cpu(2));  // idle holds 2 threads
  ASSERT_EQ(d.actions.size(), 2u);
  EXPECT_EQ(d.actions[0].kind, Action::kEvict);
  EXPECT_EQ(d.actions[0].model, "idle");
  EXPECT_THAT(d.actions[0].reason,
              AllOf(StartsWith("evict: idle 5 s, frees 2 thread(s) of cpu"),
                    HasSubstr("(cores for m:1:ts-fp32@cpu1)")));
  EXPECT_EQ(d.actions[1].kind, Action::kSetReplicas);
  EXPECT_EQ(d.actions[1].model, "m");
  EXPECT_EQ(d.actions[1].replicas, 3);  // 4 cores - busy's 1
  EXPECT_THAT(d.actions[1].reason, HasSubstr("- 3 threads of other groups + 2 evictable"));
}

TEST(AutoscalerTest, WaitTailIsTheMdcTailPastTheSlack) {
  // One replica of 100 q/s (10-ms batches of 1) at 50 q/s, SLO 30 ms: 20 ms
  // of slack; M/D/1 waits with probability rho = 0.5, decaying at 2 (mu - lambda).
  const ReplicaCapacity r{1, 10, 100};
  EXPECT_NEAR(WaitTail(50, r, 30, 1), 0.5 * std::exp(-2.0 * 50 * 0.020), 1e-12);
  EXPECT_EQ(WaitTail(50, r, 0, 1), 0);    // no SLO
  EXPECT_EQ(WaitTail(50, r, 10, 1), 0);   // no slack: best effort
  EXPECT_EQ(WaitTail(100, r, 30, 1), 1);  // saturated
  double last = 1;
  for (int c = 2; c <= 6; ++c) {  // each replica added cuts it
    const double tail = WaitTail(150, r, 30, c);
    EXPECT_LT(tail, last) << c;
    last = tail;
  }
  // A 25-ms model (40 q/s per replica) at 30 q/s under a 60-ms SLO: two
  // replicas carry it at 38% busy, yet 0.6% of its queries would wait past
  // the 35 ms of slack; three bring that to 0.008%.
  const ReplicaCapacity slow{1, 25, 40};
  EXPECT_NEAR(WaitTail(30, slow, 60, 2), 0.00618, 1e-5);
  EXPECT_EQ(ReplicasForWaitTail(30, slow, 60, 0.005, 1), 3);
  EXPECT_EQ(ReplicasForWaitTail(30, slow, 60, 0.005, 4), 4);  // never fewer than asked
  EXPECT_EQ(ReplicasForWaitTail(30, slow, 60, 0, 1), 1);      // the rule off
}

// ReplicasForWaitTail carries Erlang B's recursion from one count to the
// next: it must give what asking WaitTail for each count in turn gives.
TEST(AutoscalerTest, ReplicasForWaitTailIsTheFirstCountWhoseTailIsWithinTheTarget) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> unit(0, 1);
  for (int i = 0; i < 3000; ++i) {
    const ReplicaCapacity r{1 + static_cast<int64_t>(unit(rng) * 8), 1 + unit(rng) * 40,
                            5 + unit(rng) * 400};
    const double rate = unit(rng) * 4000;
    const double slo = unit(rng) * 200;
    const double target = i % 50 == 0 ? 1.0 : unit(rng) * 0.05;
    const int at_least = 1 + static_cast<int>(unit(rng) * 10);
    int naive = at_least;
    const int most = naive + 64 + static_cast<int>(rate / r.qps);
    while (naive < most && WaitTail(rate, r, slo, naive) > target) ++naive;
    ASSERT_EQ(ReplicasForWaitTail(rate, r, slo, target, at_least), naive)
        << "rate " << rate << " slo " << slo << " target " << target << " at least " << at_least;
  }
}

TEST(AutoscalerTest, SizesASlowModelForItsWaitTailNotOnlyItsThroughput) {
  Sim sim;
  VariantOption slow = Opt("ts-fp32", Cpu(1), 0.97, 25);  // 40 q/s per replica
  sim.state.options = {slow};
  std::vector<Action> a = sim.Step(30, 60);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].kind, Action::kLoad);
  EXPECT_EQ(a[0].replicas, 3);  // 30 / 0.7 / 40 asks 2
  EXPECT_THAT(a[0].reason, HasSubstr("of queries wait past the SLO's slack (at most 0.5%)"));
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(sim.Step(30, 60).empty());

  // Sized by throughput alone (the rule off), the same model runs two; with
  // the rule back on, that group scales up though it is only 38% busy.
  Sim before;
  before.config.queueing_miss_target = 0;
  before.state.options = {slow};
  ASSERT_EQ(before.Step(30, 60).at(0).replicas, 2);
  before.config.queueing_miss_target = 0.001;  // 0.6% > 4 x 0.1%
  a = before.Step(30, 60);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].kind, Action::kSetReplicas);
  EXPECT_EQ(a[0].replicas, 3);
  EXPECT_THAT(a[0].reason, AllOf(StartsWith("scale up: demand"),
                                 HasSubstr("of queries would wait past the SLO's slack")));
}

TEST(AutoscalerTest, ReplacesAGroupBelowARaisedAccuracyFloor) {
  Sim sim;
  sim.state.options = {Fp32(), Int8()};
  sim.AddGroup(Int8(), 1);
  EXPECT_TRUE(sim.Step(50).empty());
  std::vector<Action> a = sim.Step(50, 0, 0.96);
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].kind, Action::kLoad);
  EXPECT_EQ(a[0].variant, "ts-fp32");
  EXPECT_THAT(a[0].reason, StartsWith("upgrade:"));
  EXPECT_EQ(a[1].variant, "ts-int8");
}

TEST(AutoscalerTest, TighterSloShrinksCapacityAndScalesUp) {
  Sim sim;
  // latency(b) = 2 + b ms, max batch 32: 941 q/s unconstrained; under a 10 ms
  // SLO the batch may take 5 ms -> batch 3 -> 600 q/s.
  VariantOption o = Opt("ts-fp32", Cpu(1), 0.97, 2, 1, 32);
  sim.state.options = {o};
  sim.AddGroup(o, 1);
  EXPECT_TRUE(sim.Step(600).empty());  // 64% of 941
  std::vector<Action> a = sim.Step(600, 10);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].replicas, 2);
  EXPECT_THAT(a[0].reason, HasSubstr("600.0 per replica at batch 3 in 5.00 ms"));
}

TEST(AutoscalerTest, DoesNotFlapWhenDemandOscillatesAroundTheHighWatermark) {
  Sim sim;
  sim.state.options = {Fp32()};
  sim.AddGroup(Fp32(), 1);
  for (int t = 0; t < 200; ++t) sim.Step(t % 2 == 0 ? 85 : 75);
  EXPECT_LE(sim.all.size(), 2u);
  EXPECT_EQ(sim.Serving(), "ts-fp32@cpu1 x2");
}

TEST(AutoscalerTest, DoesNotFlapWhenDemandOscillatesAroundTheLowWatermark) {
  Sim sim;
  sim.state.options = {Fp32()};
  sim.AddGroup(Fp32(), 2);
  for (int t = 0; t < 200; ++t) sim.Step(t % 2 == 0 ? 95 : 105);
  EXPECT_TRUE(sim.all.empty()) << ToString(sim.all[0]);
}

TEST(AutoscalerTest, AFastLoadShedsASpikeAfterItsHoldNotTheWholeWindow) {
  // Rebuilding takes a 0.5-s load: idle capacity is held 20 x that, 10 s,
  // not the minute a slow load's would be.
  Sim sim;
  sim.state.options = {Fp32()};
  sim.AddGroup(Fp32(), 1);
  ASSERT_EQ(sim.Step(300).size(), 1u);  // a spike: up to x5 at t = 0
  ASSERT_EQ(sim.Serving(), "ts-fp32@cpu1 x5");
  for (int t = 1; t < 10; ++t) EXPECT_TRUE(sim.Step(50).empty()) << "t = " << t;
  std::vector<Action> a = sim.Step(50);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].replicas, 1);
  EXPECT_THAT(a[0].reason, AllOf(HasSubstr("for 10 ticks, 10 s since the last change (cooldown "
                                           "10 s), peak 50.0 q/s in the last 10 s")));
  // A slow load (3 s) keeps the whole minute.
  Sim slow;
  const VariantOption fp32_slow = Opt("ts-fp32", Cpu(1), 0.97, 10, 0, 1, /*load_ms=*/3000);
  slow.state.options = {fp32_slow};
  slow.AddGroup(fp32_slow, 1);
  ASSERT_EQ(slow.Step(300).size(), 1u);
  for (int t = 1; t < 60; ++t) EXPECT_TRUE(slow.Step(50).empty()) << "t = " << t;
  EXPECT_EQ(slow.Step(50).size(), 1u);
}

TEST(AutoscalerTest, SwingsFasterThanTheWindowKeepThePeaksCapacity) {
  Sim sim;
  // Holds as for a slow load (scale_down_hold_per_load_s would cap them at
  // 20 x the options' 0.5-s load: see AFastLoadShedsASpikeAfterItsHold...).
  sim.config.scale_down_hold_per_load_s = 1000;
  sim.state.options = {Fp32()};
  sim.AddGroup(Fp32(), 1);
  // 10 s at 150 q/s, 10 s at 40 q/s, 300 s in all: each low phase is long
  // enough for scale_down_ticks, but the peaks stay in the window.
  std::vector<TimePoint> changes;
  for (int t = 0; t < 300; ++t) {
    if (!sim.Step((t / 10) % 2 == 0 ? 150 : 40).empty()) changes.push_back(sim.now - 1s);
  }
  EXPECT_EQ(changes.size(), 1u) << ToString(sim.all.back());
  EXPECT_EQ(sim.Serving(), "ts-fp32@cpu1 x3");
}

TEST(AutoscalerTest, RateForTickIsTheWindowsRateUnlessTheTickRisesPastItsNoise) {
  AutoscalerConfig config;  // a 1-s window, 3 deviations
  std::vector<TickCount> recent;
  TimePoint now = kT0;
  auto tick = [&](double arrivals) {
    now += 250ms;
    return RateForTick(recent, arrivals, 0.25, now, config);
  };
  EXPECT_DOUBLE_EQ(tick(20), 80);
  EXPECT_DOUBLE_EQ(tick(30), 100);
  EXPECT_DOUBLE_EQ(tick(25), 100);
  EXPECT_DOUBLE_EQ(tick(25), 100);
  EXPECT_EQ(recent.size(), 4u);
  // 38 against the 25 expected (deviation 5): noise, the window's rate.
  EXPECT_DOUBLE_EQ(tick(38), (30 + 25 + 25 + 38) / 1.0);
  EXPECT_EQ(recent.size(), 4u);  // the oldest tick left the window
  // 100 is a rise: planned for at its own 400 q/s at once.
  EXPECT_DOUBLE_EQ(tick(100), 400);
  // One-second ticks: each tick's own rate, as before the window.
  std::vector<TickCount> slow;
  EXPECT_DOUBLE_EQ(RateForTick(slow, 100, 1.0, kT0 + 1s, config), 100);
  EXPECT_DOUBLE_EQ(RateForTick(slow, 60, 1.0, kT0 + 2s, config), 60);
  EXPECT_DOUBLE_EQ(RateForTick(slow, 400, 1.0, kT0 + 3s, config), 400);
  EXPECT_EQ(slow.size(), 1u);
}

TEST(AutoscalerTest, ShortTicksDoNotScaleUpOnTheNoiseOfTheirCounts) {
  // 250-ms ticks at a steady 120 q/s (30 queries a tick) whose counts then
  // swing 18 / 42 (72 and 168 q/s a tick; 42 is 2.2 deviations of 30): two
  // fp32 replicas (200 q/s) carry it at 60%. Planned on each tick's own
  // count, the 168-q/s ticks crossed the high watermark and a third replica
  // was loaded, then kept by the window's noisy peak.
  Sim sim;
  sim.tick = 250ms;
  sim.config.tick_s = 0.25;
  sim.state.options = {Fp32()};
  sim.AddGroup(Fp32(), 2);
  for (int t = 0; t < 8; ++t) sim.Step(120);
  for (int t = 0; t < 400; ++t) sim.Step(t % 2 == 0 ? 72 : 168);
  EXPECT_TRUE(sim.all.empty()) << ToString(sim.all[0]);
  EXPECT_EQ(sim.Serving(), "ts-fp32@cpu1 x2");
}

TEST(AutoscalerTest, ShortTicksStillScaleUpWithinATickOfABurst) {
  Sim sim;
  sim.tick = 250ms;
  sim.config.tick_s = 0.25;
  sim.state.options = {Fp32()};
  sim.AddGroup(Fp32(), 2);
  for (int t = 0; t < 40; ++t) ASSERT_TRUE(sim.Step(100).empty()) << "t = " << t;
  // 100 queries in a quarter second: 400 q/s, planned for in this tick.
  std::vector<Action> a = sim.Step(400);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(sim.Serving(), "ts-fp32@cpu1 x6");  // 400 q/s at 70% of 100 q/s each
}

TEST(AutoscalerTest, LowLoadTicksDoNotCarryOverAnIdleUnloadToTheNextColdStart) {
  // Seen live: a model idle from start counted 30 low ticks, was unloaded,
  // and when a query loaded it again minutes later the very next tick
  // downgraded it on those stale ticks.
  Sim sim;
  const VariantOption fp32_cpu2 = Opt("ts-fp32", Cpu(2), 0.97, 10);
  sim.state.options = {fp32_cpu2, Int8()};
  sim.AddGroup(fp32_cpu2, 1);
  for (int i = 0; i < 100; ++i) sim.Step(0);
  ASSERT_EQ(sim.Serving(), "");  // idle-unloaded
  sim.AddGroup(fp32_cpu2, 1);    // a query's cold start
  for (int i = 0; i < 5; ++i) {
    EXPECT_TRUE(sim.Step(4).empty()) << "tick " << i;
  }
  // The low load still counts from the cold start on: later, it downgrades.
  for (int i = 0; i < 30; ++i) sim.Step(4);
  EXPECT_EQ(sim.Serving(), "ts-int8@cpu1 x1");
}

TEST(AutoscalerTest, ForgetsModelsWithNeitherDemandNorGroups) {
  Sim sim;
  sim.state.options = {Fp32()};
  sim.Step(50);
  EXPECT_EQ(sim.memory.models.count("m:1"), 1u);
  sim.state.groups.clear();
  sim.state.demand.clear();
  AutoscalerDecision d = Decide(sim.state, sim.memory, sim.now, sim.config);
  EXPECT_TRUE(d.actions.empty());
  EXPECT_EQ(d.memory.models.count("m:1"), 0u);
}

}  // namespace
}  // namespace somm::control
