#include "controller/placement.h"
#include "cluster/memory_budget.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <random>
#include <tuple>

namespace somm::control {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;
using ::testing::StartsWith;

const TimePoint kNow = TimePoint(100000s);
constexpr int64_t kMiB = int64_t{1} << 20;
constexpr int64_t kGiB = int64_t{1} << 30;

DeviceState Device(const std::string& name, int64_t budget, int64_t used) {
  return DeviceState{name, budget, used, 4};
}

// An idle, evictable group: `rate` q/s recently, last used `idle` ago.
GroupState Group(const std::string& model, int64_t mib, double rate, std::chrono::seconds idle,
                 double load_ms, const std::string& device = "cpu") {
  GroupState g;
  g.model = model;
  g.variant = "ts-fp32";
  g.device = device;
  g.replicas = 1;
  g.memory_bytes = mib * kMiB;
  g.recent_rate_qps = rate;
  g.last_used = kNow - idle;
  g.load_ms = load_ms;
  return g;
}

std::vector<std::string> VictimModels(const ClusterState& state, const PlacementDecision& d) {
  std::vector<std::string> models;
  for (const EvictionVictim& v : d.victims) models.push_back(state.groups[v.group].model);
  return models;
}

TEST(PlacementTest, DefaultMemoryBudgetIsAFractionOfFreeMemory) {
  using cluster::DefaultMemoryBudget;
  EXPECT_EQ(DefaultMemoryBudget(16 * kGiB, cluster::kDefaultCpuBudgetFraction), 8 * kGiB);
  EXPECT_EQ(DefaultMemoryBudget(10 * kGiB, cluster::kDefaultGpuBudgetFraction), 8 * kGiB);
  EXPECT_EQ(DefaultMemoryBudget(-5, 0.5), 0);
  EXPECT_EQ(DefaultMemoryBudget(100, 3.0), 100);
}

TEST(PlacementTest, DeviceMatchesKindOrExactName) {
  EXPECT_TRUE(DeviceMatches("cuda:1", "cuda"));
  EXPECT_TRUE(DeviceMatches("cuda:1", "cuda:1"));
  EXPECT_FALSE(DeviceMatches("cuda:1", "cuda:0"));
  EXPECT_FALSE(DeviceMatches("cpu", "cuda"));
  EXPECT_FALSE(DeviceMatches("cudax:0", "cuda"));
  EXPECT_TRUE(DeviceMatches("cpu", ""));
}

TEST(PlacementTest, BestFitPicksTheDeviceLeftWithTheLeastRoom) {
  ClusterState state;
  state.devices = {Device("cpu", 64 * kGiB, 0), Device("cuda:0", 8 * kGiB, 2 * kGiB),
                   Device("cuda:1", 8 * kGiB, 6 * kGiB + 512 * kMiB)};
  auto d = Place(state, kGiB, "cuda", kNow);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->device, "cuda:1");
  EXPECT_EQ(d->free_after, 512 * kMiB);
  EXPECT_TRUE(d->victims.empty());
  EXPECT_THAT(d->reason, StartsWith("best fit"));

  // cuda:1 has 1.5 GiB left: 2 GiB goes to cuda:0.
  d = Place(state, 2 * kGiB, "cuda", kNow);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->device, "cuda:0");

  d = Place(state, kGiB, "cuda:0", kNow);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->device, "cuda:0");
  d = Place(state, kGiB, "cpu", kNow);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->device, "cpu");
}

TEST(PlacementTest, NoMatchingDeviceIsNotFound) {
  ClusterState state;
  state.devices = {Device("cpu", kGiB, 0)};
  auto d = Place(state, kMiB, "cuda", kNow);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), StatusCode::kNotFound);
}

TEST(PlacementTest, EvictionValueWeighsUseAgainstReloadCostPerByte) {
  PlacementOptions o;  // H = 60 s
  // (0.5 x 60 + 60 / (60 + 60)) x 200 ms / 100 MiB = 30.5 x 2 = 61.
  EXPECT_DOUBLE_EQ(EvictionValue(Group("a", 100, 0.5, 60s, 200), kNow, o), 61.0);
  // Colder, cheaper to reload, or larger -> lower value.
  EXPECT_LT(EvictionValue(Group("a", 100, 0.0, 60s, 200), kNow, o),
            EvictionValue(Group("a", 100, 0.1, 60s, 200), kNow, o));
  EXPECT_LT(EvictionValue(Group("a", 100, 0.0, 600s, 200), kNow, o),
            EvictionValue(Group("a", 100, 0.0, 6s, 200), kNow, o));
  EXPECT_LT(EvictionValue(Group("a", 100, 0.0, 60s, 20), kNow, o),
            EvictionValue(Group("a", 100, 0.0, 60s, 200), kNow, o));
  EXPECT_LT(EvictionValue(Group("a", 400, 0.0, 60s, 200), kNow, o),
            EvictionValue(Group("a", 100, 0.0, 60s, 200), kNow, o));
}

TEST(PlacementTest, EvictsTheLowestValueFirstUntilItFits) {
  ClusterState state;
  state.devices = {Device("cpu", 1000 * kMiB, 1000 * kMiB)};
  state.groups = {
      Group("hot", 200, 5.0, 1s, 100),             // (300 + 0.98) x 100 / 200 = 150
      Group("cold", 200, 0.0, 600s, 100),          // (0 + 0.09) x 100 / 200 = 0.045
      Group("slow-reload", 200, 0.0, 600s, 5000),  // 0.09 x 5000 / 200 = 2.27
      Group("cheap", 200, 0.1, 10s, 20),           // (6 + 0.86) x 20 / 200 = 0.69
  };
  auto d = Place(state, 300 * kMiB, "cpu", kNow);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_THAT(VictimModels(state, *d), ::testing::ElementsAre("cold", "cheap"));
  EXPECT_EQ(d->free_after, 100 * kMiB);
  EXPECT_THAT(d->victims[0].reason,
              AllOf(StartsWith("evict: cold:1:ts-fp32@cpu1"), HasSubstr("idle 600 s"),
                    HasSubstr("reload 100 ms"), HasSubstr("200.0 MiB")));

  d = Place(state, 500 * kMiB, "cpu", kNow);
  ASSERT_TRUE(d.ok());
  EXPECT_THAT(VictimModels(state, *d), ::testing::ElementsAre("cold", "cheap", "slow-reload"));

  const std::vector<Action> actions = EvictionActions(state, *d);
  ASSERT_EQ(actions.size(), 3u);
  EXPECT_EQ(actions[0].kind, Action::kEvict);
  EXPECT_EQ(actions[0].model, "cold");
  EXPECT_THAT(actions[2].reason, StartsWith("evict: slow-reload"));
}

TEST(PlacementTest, DropsASmallVictimThatALargerOneMadeUnnecessary) {
  ClusterState state;
  state.devices = {Device("cpu", 1000 * kMiB, 1000 * kMiB)};
  state.groups = {Group("small", 100, 0.0, 600s, 1), Group("large", 400, 0.0, 600s, 100)};
  auto d = Place(state, 400 * kMiB, "cpu", kNow);
  ASSERT_TRUE(d.ok());
  EXPECT_THAT(VictimModels(state, *d), ::testing::ElementsAre("large"));
}

TEST(PlacementTest, NeverEvictsBusyPinnedOrLoadingGroups) {
  ClusterState state;
  state.devices = {Device("cpu", 1000 * kMiB, 1000 * kMiB)};
  GroupState queued = Group("queued", 200, 0.0, 600s, 1);
  queued.queued = 1;
  GroupState executing = Group("executing", 200, 0.0, 600s, 1);
  executing.executing = 1;
  GroupState pinned = Group("pinned", 200, 0.0, 600s, 1);
  pinned.pinned = true;
  GroupState loading = Group("loading", 200, 0.0, 600s, 1);
  loading.loading = true;
  state.groups = {queued, executing, pinned, loading, Group("hot", 200, 50.0, 0s, 1000)};

  auto d = Place(state, 150 * kMiB, "cpu", kNow);
  ASSERT_TRUE(d.ok());
  EXPECT_THAT(VictimModels(state, *d), ::testing::ElementsAre("hot"));

  d = Place(state, 250 * kMiB, "cpu", kNow);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), StatusCode::kResourceExhausted);
}

TEST(PlacementTest, CannotFitReasonNamesTheNumbers) {
  ClusterState state;
  state.devices = {Device("cuda:0", 1000 * kMiB, 900 * kMiB),
                   Device("cuda:1", 1000 * kMiB, 1000 * kMiB)};
  GroupState pinned = Group("pinned", 700, 0.0, 600s, 1, "cuda:0");
  pinned.pinned = true;
  state.groups = {pinned, Group("idle", 200, 0.0, 600s, 1, "cuda:0")};
  auto d = Place(state, 600 * kMiB, "cuda", kNow);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), StatusCode::kResourceExhausted);
  EXPECT_THAT(d.status().message(),
              AllOf(HasSubstr("cannot place 600.0 MiB on 'cuda'"),
                    HasSubstr("cuda:0: budget 1000.0 MiB, used 900.0 MiB, free 100.0 MiB, "
                              "evictable 200.0 MiB in 1 groups (not evictable: 0 busy, 1 pinned"),
                    HasSubstr("cuda:1: budget 1000.0 MiB, used 1000.0 MiB, free 0 B")));
}

TEST(PlacementTest, PrefersTheDeviceWhoseVictimsLoseTheLeastReloadTime) {
  ClusterState state;
  state.devices = {Device("cuda:0", 1000 * kMiB, 1000 * kMiB),
                   Device("cuda:1", 1000 * kMiB, 1000 * kMiB)};
  state.groups = {Group("warm", 300, 1.0, 1s, 500, "cuda:0"),
                  Group("cold", 300, 0.0, 900s, 500, "cuda:1")};
  auto d = Place(state, 200 * kMiB, "cuda", kNow);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->device, "cuda:1");
  EXPECT_THAT(VictimModels(state, *d), ::testing::ElementsAre("cold"));
}

// PoolWorkers finds a label's pooled group by its fields, not by the label
// string: it must pool exactly the groups whose labels are equal (a CUDA
// group's label names its device, not its threads; a CPU group's, its
// threads), in the order each label first appears.
TEST(PoolWorkersTest, PoolsExactlyTheGroupsWhoseLabelsAreEqual) {
  std::mt19937 rng(5);
  for (int round = 0; round < 200; ++round) {
    ClusterState s;
    const int n = static_cast<int>(rng() % 40);
    for (int i = 0; i < n; ++i) {
      GroupState g;
      g.worker = "w" + std::to_string(rng() % 4);
      g.model = "m" + std::to_string(rng() % 3);
      g.version = 1 + static_cast<int64_t>(rng() % 2);
      g.variant = rng() % 2 ? "ts-fp32" : "ts-int8";
      g.hardware.device = rng() % 3 == 0 ? DeviceKind::kCuda : DeviceKind::kCpu;
      g.hardware.device_index = static_cast<int>(rng() % 2);
      g.hardware.threads = 1 + static_cast<int>(rng() % 2);
      g.replicas = 1 + static_cast<int>(rng() % 3);
      s.groups.push_back(g);
    }
    std::vector<std::string> order;
    std::map<std::string, int> replicas;
    for (const GroupState& g : s.groups) {
      const std::string label = GroupLabel(g);
      if (replicas.count(label) == 0) order.push_back(label);
      replicas[label] += g.replicas;
    }
    const ClusterState p = PoolWorkers(s);
    ASSERT_EQ(p.groups.size(), order.size()) << "round " << round;
    for (size_t i = 0; i < order.size(); ++i) {
      EXPECT_EQ(GroupLabel(p.groups[i]), order[i]) << "round " << round;
      EXPECT_EQ(p.groups[i].replicas, replicas[order[i]]) << "round " << round;
    }
  }
}

}  // namespace
}  // namespace somm::control

namespace somm::control {
namespace {

// Two workers, each with one CPU device and its own groups.
ClusterState TwoWorkers(int64_t used_a, int64_t used_b) {
  ClusterState s;
  DeviceState a = Device("cpu", 4 * kGiB, used_a);
  a.worker = "a";
  DeviceState b = Device("cpu", 4 * kGiB, used_b);
  b.worker = "b";
  s.devices = {a, b};
  return s;
}

TEST(PlaceAcrossWorkersTest, PrefersAWorkerThatNeedsNoEviction) {
  ClusterState s = TwoWorkers(3900 * kMiB, 2 * kGiB);
  GroupState idle = Group("idle-on-a", 3900, 0, 3600s, 10);
  idle.worker = "a";
  s.groups = {idle};
  auto d = PlaceAcrossWorkers(s, 1 * kGiB, "cpu", "m:1:ts-fp32@cpu1", kNow);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->worker, "b");
  EXPECT_TRUE(d->victims.empty());
  EXPECT_THAT(d->reason, StartsWith("worker b (of 2)"));
}

TEST(PlaceAcrossWorkersTest, SpreadsToTheWorkerWithTheMostRoomAndMapsVictimsBack) {
  ClusterState s = TwoWorkers(1 * kGiB, 3 * kGiB);
  auto d = PlaceAcrossWorkers(s, 512 * kMiB, "cpu", "k", kNow);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->worker, "a");
  // Both full: the victim is worker b's only group, reported by its index in
  // the whole state (after a's group).
  ClusterState full = TwoWorkers(4 * kGiB, 4 * kGiB);
  GroupState on_a = Group("busy-on-a", 4096, 0, 0s, 10);
  on_a.worker = "a";
  on_a.executing = 1;  // not evictable
  GroupState on_b = Group("idle-on-b", 4096, 0, 3600s, 10);
  on_b.worker = "b";
  full.groups = {on_a, on_b};
  auto e = PlaceAcrossWorkers(full, 1 * kGiB, "cpu", "k", kNow);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(e->worker, "b");
  EXPECT_EQ(VictimModels(full, *e), std::vector<std::string>{"idle-on-b"});
  EXPECT_EQ(EvictionActions(full, *e)[0].worker, "b");
}

TEST(PlaceAcrossWorkersTest, TiesAreBrokenByTheKeyAndStayWhenAWorkerJoins) {
  ClusterState s = TwoWorkers(1 * kGiB, 1 * kGiB);
  auto first = PlaceAcrossWorkers(s, 1 * kGiB, "cpu", "some-group", kNow);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(PlaceAcrossWorkers(s, 1 * kGiB, "cpu", "some-group", kNow)->worker, first->worker);
  // A fuller third worker does not move the key.
  DeviceState c = Device("cpu", 4 * kGiB, 3 * kGiB);
  c.worker = "c";
  s.devices.push_back(c);
  EXPECT_EQ(PlaceAcrossWorkers(s, 1 * kGiB, "cpu", "some-group", kNow)->worker, first->worker);
}

TEST(PlaceAcrossWorkersTest, NoWorkerCanMakeRoomNamesEach) {
  ClusterState s = TwoWorkers(4 * kGiB, 4 * kGiB);
  auto d = PlaceAcrossWorkers(s, 1 * kGiB, "cpu", "k", kNow);
  EXPECT_EQ(d.status().code(), StatusCode::kResourceExhausted);
  EXPECT_THAT(d.status().message(), HasSubstr("worker a:"));
  EXPECT_THAT(d.status().message(), HasSubstr("worker b:"));
}


// The straightforward form PlaceAcrossWorkers() indexes: Place() on each
// worker's share (WorkerShare), victims mapped back to `state`, the same
// order of preference. Kept here as the reference.
StatusOr<PlacementDecision> PlaceAcrossWorkersByShares(const ClusterState& state,
                                                       int64_t bytes_needed,
                                                       const std::string& wanted,
                                                       const std::string& key) {
  std::vector<std::string> workers;
  for (const DeviceState& d : state.devices) {
    if (std::find(workers.begin(), workers.end(), d.worker) == workers.end()) {
      workers.push_back(d.worker);
    }
  }
  if (workers.size() <= 1) return Place(state, bytes_needed, wanted, kNow);
  std::optional<PlacementDecision> best;
  double best_lost = 0;
  uint64_t best_hash = 0;
  int refused = 0;
  for (const std::string& w : workers) {
    auto placed = Place(WorkerShare(state, w), bytes_needed, wanted, kNow);
    if (!placed.ok()) {
      ++refused;
      continue;
    }
    std::vector<size_t> index;
    for (size_t i = 0; i < state.groups.size(); ++i) {
      if (state.groups[i].worker == w) index.push_back(i);
    }
    double lost = 0;
    for (EvictionVictim& v : placed->victims) {
      lost += v.value * static_cast<double>(v.bytes) / kMiB;
      v.group = index[v.group];
    }
    const uint64_t hash = std::hash<std::string>{}(key + "@" + w);
    const bool better =
        !best || (placed->victims.empty() != best->victims.empty()
                      ? placed->victims.empty()
                      : lost != best_lost                              ? lost < best_lost
                        : placed->free_after != best->free_after ? placed->free_after >
                                                                         best->free_after
                                                                   : hash > best_hash);
    if (better) {
      best = *placed;
      best_lost = lost;
      best_hash = hash;
    }
  }
  if (!best) return ResourceExhausted(std::to_string(refused) + " workers refused");
  return *best;
}

TEST(PlaceAcrossWorkersTest, TheIndexedFormDecidesAsThePerShareForm) {
  std::mt19937 rng(7);
  auto uniform = [&rng](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int round = 0; round < 200; ++round) {
    ClusterState s;
    const int workers = uniform(1, 12);
    for (int w = 0; w < workers; ++w) {
      DeviceState cpu = Device("cpu", uniform(2, 8) * kGiB, 0);
      cpu.worker = "w" + std::to_string(w);
      s.devices.push_back(cpu);
      if (uniform(0, 3) == 0) {
        DeviceState gpu = Device("cuda:0", 4 * kGiB, 0);
        gpu.worker = cpu.worker;
        s.devices.push_back(gpu);
      }
    }
    const int groups = uniform(0, 40);
    for (int i = 0; i < groups; ++i) {
      DeviceState& dev = s.devices[static_cast<size_t>(uniform(0, static_cast<int>(s.devices.size()) - 1))];
      GroupState g = Group("m" + std::to_string(i), uniform(64, 1500), uniform(0, 20) / 4.0,
                           std::chrono::seconds(uniform(0, 600)), uniform(10, 3000), dev.name);
      g.worker = dev.worker;
      g.replicas = uniform(1, 3);
      g.pinned = uniform(0, 9) == 0;
      g.loading = uniform(0, 9) == 0;
      g.queued = uniform(0, 5) == 0 ? 1 : 0;
      if (dev.used_bytes + g.replicas * g.memory_bytes > dev.budget_bytes) continue;
      dev.used_bytes += g.replicas * g.memory_bytes;
      s.groups.push_back(g);
    }
    const int64_t need = uniform(1, 24) * 256 * kMiB;
    const std::string wanted = uniform(0, 4) == 0 ? "cuda" : "cpu";
    const std::string key = "m" + std::to_string(round);
    auto fast = PlaceAcrossWorkers(s, need, wanted, key, kNow);
    auto slow = PlaceAcrossWorkersByShares(s, need, wanted, key);
    ASSERT_EQ(fast.ok(), slow.ok()) << "round " << round << ": " << fast.status().message();
    if (!fast.ok()) continue;
    EXPECT_EQ(fast->worker, slow->worker) << "round " << round;
    EXPECT_EQ(fast->device, slow->device) << "round " << round;
    EXPECT_EQ(fast->free_after, slow->free_after) << "round " << round;
    ASSERT_EQ(fast->victims.size(), slow->victims.size()) << "round " << round;
    for (size_t v = 0; v < fast->victims.size(); ++v) {
      EXPECT_EQ(fast->victims[v].group, slow->victims[v].group) << "round " << round;
      EXPECT_EQ(fast->victims[v].reason, slow->victims[v].reason) << "round " << round;
    }
    EXPECT_THAT(fast->reason, HasSubstr(slow->reason)) << "round " << round;
  }
}
// ---- One group's replicas across workers ----------------------------------

// `replicas` of m (1 GiB each) on `worker`.
GroupState Share(const std::string& worker, int replicas) {
  GroupState g = Group("m", 1024, 1, 0s, 100);
  g.worker = worker;
  g.replicas = replicas;
  for (int i = 0; i < replicas; ++i) g.instances.push_back({i, 0, {}});
  return g;
}

// (worker, have, want) of each share, for comparing at a glance.
std::vector<std::tuple<std::string, int, int>> Shares(const SpreadDecision& d) {
  std::vector<std::tuple<std::string, int, int>> out;
  for (const ReplicaShare& s : d.shares) out.emplace_back(s.worker, s.have, s.want);
  return out;
}

using ShareList = std::vector<std::tuple<std::string, int, int>>;

TEST(SpreadReplicasTest, ASecondReplicaGoesToAnotherWorker) {
  ClusterState s = TwoWorkers(1 * kGiB, 0);
  s.groups = {Share("a", 1)};
  // a has the room too, but a dead a would take both.
  const SpreadDecision d = SpreadReplicas(s, GroupLabel(s.groups[0]), 2, kGiB, "cpu");
  EXPECT_EQ(Shares(d), (ShareList{{"a", 1, 1}, {"b", 0, 1}}));
  EXPECT_EQ(d.unplaced, 0);
  EXPECT_EQ(d.reason, "x1 -> x2 over 2 worker(s): +1 on b (new there)");
}

TEST(SpreadReplicasTest, GrowthEvensOutBeforeItStacks) {
  ClusterState s = TwoWorkers(2 * kGiB, 0);
  s.groups = {Share("a", 2)};
  SpreadDecision d = SpreadReplicas(s, GroupLabel(s.groups[0]), 4, kGiB, "cpu");
  EXPECT_EQ(Shares(d), (ShareList{{"a", 2, 2}, {"b", 0, 2}}));
  // A third worker: 1 -> 3 puts one on each.
  DeviceState c = Device("cpu", 4 * kGiB, 0);
  c.worker = "c";
  s.devices.push_back(c);
  s.devices[0].used_bytes = kGiB;
  s.groups = {Share("a", 1)};
  d = SpreadReplicas(s, GroupLabel(s.groups[0]), 3, kGiB, "cpu");
  EXPECT_EQ(Shares(d), (ShareList{{"a", 1, 1}, {"b", 0, 1}, {"c", 0, 1}}));
  // Nothing to do: nothing moves.
  s.groups = {Share("a", 1), Share("b", 1)};
  d = SpreadReplicas(s, GroupLabel(s.groups[0]), 2, kGiB, "cpu");
  EXPECT_EQ(Shares(d), (ShareList{{"a", 1, 1}, {"b", 1, 1}}));
}

TEST(SpreadReplicasTest, ReplicasNoWorkerHasFreeMemoryForAreLeftUnplaced) {
  // a has 0.5 GiB free, b 1.5 GiB: one more fits on b only.
  ClusterState s = TwoWorkers(3 * kGiB + 512 * kMiB, 2 * kGiB + 512 * kMiB);
  s.groups = {Share("a", 1)};
  const SpreadDecision d = SpreadReplicas(s, GroupLabel(s.groups[0]), 3, kGiB, "cpu");
  EXPECT_EQ(Shares(d), (ShareList{{"a", 1, 1}, {"b", 0, 1}}));
  EXPECT_EQ(d.unplaced, 1);
  EXPECT_THAT(d.reason, HasSubstr("1 fit no worker's free memory (1.0 GiB each)"));
}

TEST(SpreadReplicasTest, ShrinkingTakesFromTheWorkerWithTheMost) {
  ClusterState s = TwoWorkers(3 * kGiB, kGiB);
  s.groups = {Share("a", 3), Share("b", 1)};
  SpreadDecision d = SpreadReplicas(s, GroupLabel(s.groups[0]), 2, kGiB, "cpu");
  EXPECT_EQ(Shares(d), (ShareList{{"a", 3, 1}, {"b", 1, 1}}));
  // Even shares: the worker with less free memory gives its replica up, and
  // the group leaves it.
  s = TwoWorkers(3 * kGiB, kGiB);
  s.groups = {Share("a", 1), Share("b", 1)};
  d = SpreadReplicas(s, GroupLabel(s.groups[0]), 1, kGiB, "cpu");
  EXPECT_EQ(Shares(d), (ShareList{{"a", 1, 0}, {"b", 1, 1}}));
  EXPECT_THAT(d.reason, HasSubstr("-1 on a (leaves it)"));
}

TEST(PoolWorkersTest, OneLabelOnSeveralWorkersIsOneGroupAndDevicesArePooled) {
  ClusterState s = TwoWorkers(kGiB, 2 * kGiB);
  GroupState on_a = Share("a", 1);
  on_a.queued = 3;
  on_a.uses_total = 10;
  GroupState on_b = Share("b", 2);
  on_b.queued = 4;
  on_b.uses_total = 5;
  on_b.last_used = kNow;
  on_b.loading = true;
  GroupState other = Group("other", 512, 0, 60s, 10);
  other.worker = "b";
  s.groups = {on_a, other, on_b};
  const ClusterState p = PoolWorkers(s);
  ASSERT_EQ(p.groups.size(), 2u);
  EXPECT_EQ(p.groups[0].model, "m");
  EXPECT_EQ(p.groups[0].worker, "a");
  EXPECT_EQ(p.groups[0].replicas, 3);
  EXPECT_EQ(p.groups[0].queued, 7);
  EXPECT_EQ(p.groups[0].uses_total, 15);
  EXPECT_EQ(p.groups[0].instances.size(), 3u);
  EXPECT_EQ(p.groups[0].last_used, kNow);
  EXPECT_TRUE(p.groups[0].loading);  // a share still loading
  EXPECT_EQ(p.groups[1].model, "other");
  ASSERT_EQ(p.devices.size(), 1u);
  EXPECT_EQ(p.devices[0].budget_bytes, 8 * kGiB);
  EXPECT_EQ(p.devices[0].used_bytes, 3 * kGiB);
  EXPECT_EQ(p.devices[0].cores, 8);
  EXPECT_EQ(p.devices[0].worker, "");
  // One worker: as it was.
  const ClusterState one = PoolWorkers(WorkerShare(s, "b"));
  ASSERT_EQ(one.devices.size(), 1u);
  EXPECT_EQ(one.devices[0].worker, "b");
  EXPECT_EQ(one.groups.size(), 2u);
}

}  // namespace
}  // namespace somm::control
