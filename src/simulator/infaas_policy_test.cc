// One test or more per mechanism of the INFaaS port (infaas_policy.h), each
// checked to fail with its mechanism taken out.
#include "simulator/infaas_policy.h"

#include <gtest/gtest.h>

#include <limits>

namespace somm::sim::infaas {
namespace {

Candidate Cand(const std::string& variant, double b1_ms, double load_ms = 500,
               std::optional<double> accuracy = std::nullopt, int threads = 1) {
  Candidate c;
  c.variant = variant;
  c.hardware.threads = threads;
  c.cores = threads;
  c.batch1_ms = b1_ms;
  c.capacity_qps = 1000 / b1_ms;
  c.usd_per_s = threads;
  c.load_ms = load_ms;
  c.accuracy = accuracy;
  c.memory_bytes = 1 << 20;
  return c;
}

// Seven variants of one model, 2 to 200 ms at batch 1.
std::vector<Candidate> Seven() {
  return {Cand("a", 40),  Cand("b", 2),  Cand("c", 8), Cand("d", 200),
          Cand("e", 120), Cand("f", 20), Cand("g", 4)};
}

std::vector<VariantState> States(size_t n, std::vector<size_t> running = {},
                                 std::vector<size_t> blacklisted = {}) {
  std::vector<VariantState> s(n);
  for (size_t c : running) s[c].running = true;
  for (size_t c : blacklisted) s[c].running = s[c].blacklisted = true;
  return s;
}

// ---- the master: which variant

TEST(InfaasVariant, FastCheckTriesTheFiveFastestWithinTheSlo) {
  const auto cands = Seven();
  // 50 ms: b, g, c, f, a (2, 4, 8, 20, 40 ms); e and d are too slow.
  EXPECT_EQ(FastestWithin(cands, 50.0, {}), (std::vector<size_t>{1, 6, 2, 5, 0}));
  InfaasOptions o;
  o.fast_check_variants = 3;
  EXPECT_EQ(FastestWithin(cands, 50.0, o), (std::vector<size_t>{1, 6, 2}));
  // Above 100 ms only the variants of at least 100 ms: e, d.
  EXPECT_EQ(FastestWithin(cands, 500.0, {}), (std::vector<size_t>{4, 3}));
}

TEST(InfaasVariant, FastCheckTakesTheFastestRunningVariantNotBlacklisted) {
  const auto cands = Seven();
  // c and f run; b is blacklisted: c (8 ms) is the fastest that may serve.
  const VariantChoice v = ChooseForModel(cands, States(7, {2, 5}, {1}), 50.0, 0.5, {});
  ASSERT_TRUE(v.ok);
  EXPECT_EQ(v.candidate, 2u);
  EXPECT_TRUE(v.running);
  EXPECT_EQ(v.why, "fast check");
}

TEST(InfaasVariant, GeneralSearchTakesTheRunningVariantWithTheLeastSlack) {
  const auto cands = Seven();
  InfaasOptions o;
  o.fast_check_variants = 2;  // b and g: neither runs
  // c (8 ms) and f (20 ms) run: f leaves the least of the 50 ms.
  const VariantChoice v = ChooseForModel(cands, States(7, {2, 5}), 50.0, 0.5, o);
  ASSERT_TRUE(v.ok);
  EXPECT_EQ(v.candidate, 5u);
  EXPECT_TRUE(v.running);
  EXPECT_EQ(v.why, "least slack");
}

TEST(InfaasVariant, NothingRunningLoadsTheFastest) {
  const auto cands = Seven();
  VariantChoice v = ChooseForModel(cands, States(7), 50.0, 0.5, {});
  ASSERT_TRUE(v.ok);
  EXPECT_EQ(v.candidate, 1u);
  EXPECT_FALSE(v.running);
  // A loose SLO: the fastest of those at least 100 ms.
  v = ChooseForModel(cands, States(7), 500.0, 0.5, {});
  EXPECT_EQ(v.candidate, 4u);
  // None within the SLO: refused.
  EXPECT_FALSE(ChooseForModel(cands, States(7), 1.0, 0.5, {}).ok);
}

TEST(InfaasVariant, ABlacklistedVariantStillGetsItsShareOfQueries) {
  const auto cands = Seven();
  // g (4 ms) alone runs, blacklisted.
  const auto states = States(7, {}, {6});
  InfaasOptions o;  // blacklisted_share 0.1
  VariantChoice v = ChooseForModel(cands, states, 50.0, 0.05, o);
  ASSERT_TRUE(v.ok);
  EXPECT_EQ(v.candidate, 6u);
  EXPECT_FALSE(v.running);  // to the least utilised worker
  v = ChooseForModel(cands, states, 50.0, 0.5, o);
  EXPECT_EQ(v.candidate, 1u);  // the rest: the fastest, elsewhere
  EXPECT_FALSE(v.running);
  o.blacklisted_share = 0;
  EXPECT_EQ(ChooseForModel(cands, states, 50.0, 0.0, o).candidate, 1u);
}

// Model-less: "lo" (0.7, 10 ms), "mid" (0.8, 30 ms), "hi" (0.9, 60 ms),
// "top" (0.95, 80 ms), each loaded in 300 ms.
std::vector<Candidate> Task() {
  return {Cand("top", 80, 300, 0.95), Cand("lo", 10, 300, 0.7), Cand("hi", 60, 300, 0.9),
          Cand("mid", 30, 300, 0.8)};
}

TEST(InfaasTask, RecentChoicesAreTriedFirst) {
  const auto cands = Task();
  // lo and hi run; hi leaves less slack, but lo was chosen last.
  const auto states = States(4, {1, 2});
  VariantChoice v = ChooseForTask(cands, states, 100.0, {1}, {});
  EXPECT_EQ(v.candidate, 1u);
  EXPECT_EQ(v.why, "recent");
  v = ChooseForTask(cands, states, 100.0, {}, {});
  EXPECT_EQ(v.candidate, 2u);
  EXPECT_EQ(v.why, "least slack");
}

TEST(InfaasTask, AVariantNotLoadedPaysThePenaltyAndItsLoad) {
  const auto cands = Task();
  InfaasOptions o;
  o.loose_slo_ms = std::numeric_limits<double>::infinity();
  // hi runs, with 1,140 ms of slack under 1,200; lo would take
  // 1,000 + 300 + 10 ms: the running one wins.
  const auto states = States(4, {2});
  VariantChoice v = ChooseForTask(cands, states, 1200.0, {}, o);
  EXPECT_EQ(v.candidate, 2u);
  EXPECT_TRUE(v.running);
  // Without the penalty, loading lo (310 ms) beats hi's slack.
  o.not_loaded_penalty_ms = 0;
  v = ChooseForTask(cands, states, 1200.0, {}, o);
  EXPECT_EQ(v.candidate, 1u);
  EXPECT_FALSE(v.running);
}

TEST(InfaasTask, AVariantNotLoadedCompetesOnlyWithABatchCapBelowThoseBeforeIt) {
  auto cands = Task();  // lo, mid, hi, top in accuracy order
  for (Candidate& c : cands) c.max_batch = 8;
  cands[3].load_ms = 10;  // mid: 1,000 + 10 + 30 ms, less than lo's 1,310
  InfaasOptions o;
  o.loose_slo_ms = std::numeric_limits<double>::infinity();
  // hi runs with 2,940 ms of slack; lo, first, competes and wins; mid,
  // quicker, has no smaller cap than lo's.
  VariantChoice v = ChooseForTask(cands, States(4, {2}), 3000.0, {}, o);
  EXPECT_EQ(v.candidate, 1u);
  EXPECT_FALSE(v.running);
  cands[3].max_batch = 4;
  v = ChooseForTask(cands, States(4, {2}), 3000.0, {}, o);
  EXPECT_EQ(v.candidate, 3u);
}

TEST(InfaasTask, SearchesTheLeastAccurateVariantsItsTimeAllows) {
  const auto cands = Task();
  // 10 ms a lookup: 0.15 x 100 / 10 rounds to 1, at least 3: lo, mid, hi.
  // Only top runs, outside them; lo is the quickest to load and serve.
  InfaasOptions o;
  o.metadata_lookup_ms = 10;
  VariantChoice v = ChooseForTask(cands, States(4, {0}), 100.0, {}, o);
  EXPECT_EQ(v.candidate, 1u);
  EXPECT_FALSE(v.running);
  o.min_search_variants = 4;
  v = ChooseForTask(cands, States(4, {0}), 100.0, {}, o);
  EXPECT_EQ(v.candidate, 0u);
  EXPECT_TRUE(v.running);
}

TEST(InfaasTask, ALooseSloLoadsTheSlowVariantQuickestToStart) {
  // Above 100 ms the search looks at variants of at least 100 ms.
  const std::vector<Candidate> cands = {Cand("fast", 10, 100, 0.9), Cand("slow", 150, 400, 0.9),
                                        Cand("slower", 180, 200, 0.9)};
  VariantChoice v = ChooseForTask(cands, States(3), 1000.0, {}, {});
  EXPECT_EQ(v.candidate, 2u);
  EXPECT_FALSE(v.running);
  // Only fast variants: the search falls back to them.
  v = ChooseForTask({Cand("fast", 10, 100, 0.9)}, States(1), 1000.0, {}, {});
  ASSERT_TRUE(v.ok);
  EXPECT_EQ(v.candidate, 0u);
}

TEST(InfaasTask, RemembersTheLastChoicesMostRecentFirst) {
  std::deque<std::string> recent;
  InfaasOptions o;
  o.recent_variants = 3;
  for (const char* id : {"a", "b", "c", "d"}) RememberChoice(recent, id, o);
  EXPECT_EQ(recent, (std::deque<std::string>{"d", "c", "b"}));
  RememberChoice(recent, "b", o);
  EXPECT_EQ(recent, (std::deque<std::string>{"b", "d", "c"}));
}

// ---- the master: which worker

TEST(InfaasWorker, ARunningVariantGoesToTheFirstWorkerNotBlacklisted) {
  // Workers 0, 2, 1 in the order drawn; 0 is blacklisted.
  EXPECT_EQ(PickServingWorker({0, 2, 1}, {true, false, false}), 2);
  EXPECT_EQ(PickServingWorker({0, 2, 1}, {true, true, false}), 1);
  EXPECT_EQ(PickServingWorker({0, 2, 1}, {true, true, true}), -1);
}

TEST(InfaasWorker, ALoadGoesToTheLeastUtilisedWorkerNotPickedLast) {
  const std::vector<double> util = {0.5, 0.1, 0.2, 0.0};
  std::vector<bool> can_hold = {true, true, true, false};
  EXPECT_EQ(PickLoadingWorker(util, can_hold, -1), 1);
  EXPECT_EQ(PickLoadingWorker(util, can_hold, 1), 2);
  can_hold = {false, true, false, false};
  EXPECT_EQ(PickLoadingWorker(util, can_hold, 1), 1);  // the only one
  can_hold = {false, false, false, false};
  EXPECT_EQ(PickLoadingWorker(util, can_hold, -1), -1);
}

TEST(InfaasWorker, ABurstOfQueriesBlacklistsTheWorker) {
  InfaasOptions o;
  o.burst_queries = 5;
  BurstState b;
  std::vector<int> blacklisted;
  // 10 queries 100 ms apart: the 5th of the window (its first opens it)
  // and, counting from it, 5 more.
  for (int k = 0; k < 10; ++k) {
    if (NoteQuery(b, 100.0 * k, o)) blacklisted.push_back(k);
  }
  EXPECT_EQ(blacklisted, (std::vector<int>{4, 9}));
  // One a second: never.
  BurstState slow;
  for (int k = 0; k < 20; ++k) EXPECT_FALSE(NoteQuery(slow, 1000.0 * k, o));
}

// ---- the worker: variant blacklist

MonitorSample Sample(int replicas, int64_t arrived, int64_t completed, double mean_ms,
                     int64_t outstanding) {
  MonitorSample s;
  s.replicas = replicas;
  s.arrived = arrived;
  s.completed = completed;
  s.latency_sum_ms = mean_ms * completed;
  s.outstanding = outstanding;
  s.profiled_ms = 10;  // 100 queries a second
  return s;
}

TEST(InfaasBlacklist, SlowAndBusyOrQueuedVariantsAreBlacklisted) {
  const InfaasOptions o;
  // Two replicas, 60 q/s each (over half their 100), 30 ms: over 2.5x.
  EXPECT_TRUE(JudgeVariant(Sample(2, 120, 120, 30, 0), false, 0, o).blacklisted);
  // As slow but idle-ish: not.
  EXPECT_FALSE(JudgeVariant(Sample(2, 40, 40, 30, 0), false, 0, o).blacklisted);
  // 170 waiting for two replicas: over 0.8 s of their throughput.
  EXPECT_TRUE(JudgeVariant(Sample(2, 10, 10, 10, 170), false, 0, o).blacklisted);
  // Lifted under 1.5x with no queue; kept between 1.5x and 2.5x.
  EXPECT_FALSE(JudgeVariant(Sample(2, 120, 120, 14, 0), true, 0, o).blacklisted);
  EXPECT_TRUE(JudgeVariant(Sample(2, 120, 120, 20, 0), true, 0, o).blacklisted);
}

TEST(InfaasBlacklist, OneReplicaHasLooserThresholds) {
  const InfaasOptions o;
  // 30 ms at 120 q/s: 2.5x would blacklist, 4x does not.
  EXPECT_FALSE(JudgeVariant(Sample(1, 120, 120, 30, 0), false, 0, o).blacklisted);
  EXPECT_TRUE(JudgeVariant(Sample(1, 120, 120, 45, 0), false, 0, o).blacklisted);
  // Without a completion the last latency decays.
  EXPECT_DOUBLE_EQ(JudgeVariant(Sample(1, 0, 0, 0, 0), true, 150, o).mean_latency_ms, 10);
}

// ---- the worker: autoscaler

TEST(InfaasScale, CountsReplicasFromTheProfiledThroughput) {
  const Candidate c = Cand("m", 10);  // 100 q/s a replica
  const InfaasOptions o;
  VariantLoad l{0, 1, 96};
  // 96 q/s is over 95% of one replica: one more.
  ScaleCount sc = CountReplicas(c, l, int64_t{1} << 30, 4, o);
  EXPECT_EQ(sc.count, 1);
  EXPECT_TRUE(sc.ok);
  l.rate_qps = 90;
  EXPECT_EQ(CountReplicas(c, l, int64_t{1} << 30, 4, o).count, 0);
  // Two replicas carrying what one could: one fewer.
  l = {0, 2, 90};
  EXPECT_EQ(CountReplicas(c, l, int64_t{1} << 30, 4, o).count, -1);
  // No cores left: the addition does not fit.
  l = {0, 1, 250};
  sc = CountReplicas(c, l, int64_t{1} << 30, 0, o);
  EXPECT_EQ(sc.count, 2);
  EXPECT_FALSE(sc.ok);
  // Still loading: nothing.
  EXPECT_EQ(CountReplicas(c, {0, 0, 500}, int64_t{1} << 30, 4, o).count, 0);
}

TEST(InfaasScale, AWorkerHoldsAtMostTwoReplicasOfAVariant) {
  const InfaasOptions o;
  int backlog = 0;
  EXPECT_EQ(CarryOut({0, 1}, 1, backlog, o), 2);
  EXPECT_EQ(CarryOut({0, 1}, 2, backlog, o), 2);
  EXPECT_EQ(CarryOut({0, 2}, 1, backlog, o), 1);  // 3 would pass the cap: refused whole
}

TEST(InfaasScale, ScalesDownOnlyOnceRequestsPileUp) {
  const InfaasOptions o;  // more than 10 requests
  int backlog = 0;
  int replicas = 2;
  for (int k = 0; k < 10; ++k) replicas = CarryOut({0, -1}, replicas, backlog, o);
  EXPECT_EQ(replicas, 2);
  replicas = CarryOut({0, -1}, replicas, backlog, o);
  EXPECT_EQ(replicas, 1);
  // A scale-up clears the pile.
  for (int k = 0; k < 10; ++k) replicas = CarryOut({0, -1}, replicas, backlog, o);
  replicas = CarryOut({0, 1}, replicas, backlog, o);
  EXPECT_EQ(replicas, 2);
  EXPECT_EQ(backlog, 0);
  // The last replica goes the same way: an idle variant is unloaded.
  replicas = 1;
  for (int k = 0; k < 11; ++k) replicas = CarryOut({0, -1}, replicas, backlog, o);
  EXPECT_EQ(replicas, 0);
}

TEST(InfaasScale, UpgradesWhenReplicatingCostsMoreLoadTime) {
  // "slow" (20 ms, loads in 200 ms) at 2 replicas and 150 q/s; "fast" (4
  // threads, 2 ms, 150 ms) is the fastest to start and serve.
  const std::vector<Candidate> cands = {Cand("slow", 20, 200), Cand("fast", 2, 150, {}, 4)};
  const std::vector<VariantLoad> here = {{0, 2, 150}};
  InfaasOptions o;
  // As released, a CPU variant is never upgraded: replicate (past the cap,
  // which the daemon then refuses).
  std::vector<ScaleRequest> r = ScaleModel(cands, here, int64_t{1} << 30, 8, o);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].candidate, 0u);
  EXPECT_GT(r[0].count, 0);
  // With upgrades: two more "slow" pass the cap (the load time of one more
  // x 1,000); one "fast" costs 150 ms of load.
  o.upgrade_cpu = true;
  r = ScaleModel(cands, here, int64_t{1} << 30, 8, o);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].candidate, 1u);
  EXPECT_EQ(r[0].count, 1);
  EXPECT_EQ(FastestCandidate(cands), 1u);
}

// ---- the VM daemon

TEST(InfaasVm, BlacklistsBusyWorkersAndAddsOneWhenAllAreBusy) {
  const InfaasOptions o;
  VmState s;
  VmDecision d = VmStep(s, {0.5, 0.9}, 2, 4, 2, o);
  EXPECT_EQ(d.blacklist, (std::vector<int>{1}));
  EXPECT_FALSE(d.add);
  d = VmStep(s, {0.85, 0.9}, 2, 4, 2, o);
  EXPECT_TRUE(d.add);
  // Backing off: 14 more periods without a change, then again.
  for (int k = 0; k < 14; ++k) EXPECT_FALSE(VmStep(s, {0.85, 0.9, 0.95}, 3, 4, 2, o).add);
  EXPECT_TRUE(VmStep(s, {0.85, 0.9, 0.95}, 3, 4, 2, o).add);
  // The fleet is full: none.
  VmState full;
  EXPECT_FALSE(VmStep(full, {0.9, 0.9}, 2, 2, 2, o).add);
}

TEST(InfaasVm, RemovesTheLeastUtilisedAfterFifteenIdlePeriods) {
  const InfaasOptions o;
  VmState s;
  for (int k = 0; k < 14; ++k) EXPECT_EQ(VmStep(s, {0.2, 0.01, 0.3}, 3, 3, 1, o).remove, -1);
  EXPECT_EQ(VmStep(s, {0.2, 0.01, 0.3}, 3, 3, 1, o).remove, 1);
  // Not below the workers it started with.
  VmState floor;
  for (int k = 0; k < 30; ++k) EXPECT_EQ(VmStep(floor, {0.2, 0.01}, 2, 3, 2, o).remove, -1);
  // A busy period in between starts the count again.
  VmState busy;
  for (int k = 0; k < 10; ++k) VmStep(busy, {0.2, 0.01, 0.3}, 3, 3, 1, o);
  VmStep(busy, {0.5, 0.6, 0.7}, 3, 3, 1, o);
  for (int k = 0; k < 14; ++k) EXPECT_EQ(VmStep(busy, {0.2, 0.01, 0.3}, 3, 3, 1, o).remove, -1);
}

// ---- options

TEST(InfaasOptionsTest, SetsEveryKindOfOptionByName) {
  InfaasOptions o;
  ASSERT_TRUE(SetOption(o, "blacklist_latency_factor", "4").ok());
  EXPECT_DOUBLE_EQ(o.blacklist_latency_factor, 4);
  ASSERT_TRUE(SetOption(o, "max_replicas", "3").ok());
  EXPECT_EQ(o.max_replicas, 3);
  ASSERT_TRUE(SetOption(o, "upgrade_cpu", "true").ok());
  EXPECT_TRUE(o.upgrade_cpu);
  EXPECT_FALSE(SetOption(o, "max_replicas", "3.5").ok());
  EXPECT_FALSE(SetOption(o, "no_such_option", "1").ok());
  EXPECT_EQ(OptionNames().size(), 37u);
}

}  // namespace
}  // namespace somm::sim::infaas
