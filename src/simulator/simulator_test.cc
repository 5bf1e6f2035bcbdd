// The simulator's pieces on their own (the event loop, one simulated
// worker), whole runs of `somm simulate`'s core on a repository written
// here, and the claim the simulator rests on: the policy code is the live
// code, so a change of the autoscaler's config changes the live controller
// (against a fake worker stub) and the simulation alike.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cluster/in_memory_store.h"
#include "controller/controller.h"
#include "simulator/event_loop.h"
#include "simulator/simulated_store.h"
#include "simulator/simulated_worker.h"
#include "simulator/simulation.h"
#include "simulator/testing/test_repository.h"
#include "worker/testing/fake_worker_stub.h"

namespace somm::sim {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

HardwareConfig Cpu1() { return {DeviceKind::kCpu, 0, 1}; }

// ts-fp32 of "m" on one thread: 10 ms at batch 1, 12 at 2, 16 at 4, 24 at 8;
// 100 MiB a replica, loaded in 500 ms (the test repository's default model).
VariantProfile Fp32() { return TestProfile(TestModel{}); }

ModelConfig Config() {
  ModelConfig c;
  c.name = "m";
  c.max_batch_size = 8;
  c.inputs = {{"x", DataType::kFp32, {4}}};
  c.outputs = {{"y", DataType::kFp32, {2}}};
  c.instance_count = 1;
  c.intra_op_threads = 1;
  return c;
}

VersionPtr Version() {
  auto v = std::make_shared<VersionRecord>();
  v->config = Config();
  v->version = 1;
  v->version_str = "1";
  v->path = "/nonexistent/m/1/model.pt";
  v->profiles = {Fp32()};
  return v;
}

// A repository holding "m" (Config()) with its persisted profile, in a
// fresh temporary folder.
std::string WriteRepository(const std::string& name) { return WriteTestRepository(name); }

// ---- the store

// A snapshot as a string of what identifies each device and group, for
// comparing two merges field by field.
std::string Describe(const cluster::ClusterState& s) {
  std::string out;
  for (const auto& d : s.devices) {
    out += d.worker + "/" + d.name + " " + std::to_string(d.used_bytes) + "\n";
  }
  for (const auto& g : s.groups) {
    out += g.worker + "@" + g.zone + " " + cluster::GroupLabel(g) + " x" +
           std::to_string(g.replicas) + " q" + std::to_string(g.queued) + " i" +
           std::to_string(g.instances.size()) + "\n";
  }
  for (const auto& d : s.demand) out += d.model + " " + std::to_string(d.arrivals_total) + "\n";
  return out;
}

// The store rebuilds over retired snapshots and copies only the workers
// whose reports changed: whatever the order of changes, and whichever
// snapshots readers still hold, what it hands out is the full merge.
TEST(SimulatedStoreTest, IncrementalRebuildsEqualTheFullMerge) {
  EventLoop loop;
  SimulatedStore store(loop, {});
  std::map<std::string, cluster::WorkerReport> reports;
  std::map<std::string, std::vector<cluster::ModelDemand>> demand;
  std::mt19937 rng(7);
  std::vector<std::shared_ptr<const cluster::ClusterState>> held;
  int64_t sequence = 0;
  for (int step = 0; step < 400; ++step) {
    const std::string worker = "w" + std::to_string(rng() % 6);
    const int kind = static_cast<int>(rng() % 10);
    if (kind == 0) {
      store.RemoveWorker(worker);
      reports.erase(worker);
    } else if (kind == 1) {
      cluster::ModelDemand d;
      d.model = "m" + std::to_string(rng() % 3);
      d.arrivals_total = step;
      demand["r"] = {d};
      store.PutDemand("r", demand["r"]);
    } else {
      cluster::WorkerReport r;
      r.worker = worker;
      r.incarnation = "i";
      r.zone = "z" + std::to_string(rng() % 2);
      r.sequence = ++sequence;
      cluster::DeviceState cpu;
      cpu.name = "cpu";
      cpu.worker = worker;
      cpu.used_bytes = step;
      r.devices.push_back(cpu);
      const int groups = static_cast<int>(rng() % 4);
      for (int i = 0; i < groups; ++i) {
        cluster::GroupState g;
        g.worker = worker;
        g.model = "m" + std::to_string(rng() % 3);
        g.variant = "v" + std::to_string(i);
        g.replicas = 1 + static_cast<int>(rng() % 3);
        g.queued = step;
        g.instances.resize(static_cast<size_t>(g.replicas));
        r.groups.push_back(g);
      }
      reports[worker] = r;
      store.PutWorker(r);
    }
    auto snapshot = store.Read();
    ASSERT_EQ(Describe(*snapshot), Describe(cluster::MergeClusterState(reports, demand)))
        << "step " << step;
    // Readers hold some snapshots for a while, so the spares rebuilt over
    // are of different ages.
    if (rng() % 2) held.push_back(snapshot);
    if (!held.empty() && (held.size() > 3 || rng() % 3 == 0)) held.erase(held.begin());
  }
}

// ---- the event loop

TEST(SimulatedStoreTest, WorkerReportsWaitOutTheLagButDemandIsReadAtOnce) {
  EventLoop loop;
  SimulatedStore store(loop, {FromMs(5)});
  auto report = [](int64_t sequence, int64_t queued) {
    cluster::WorkerReport r;
    r.worker = "w";
    r.incarnation = "i";
    r.sequence = sequence;
    cluster::GroupState g;
    g.worker = "w";
    g.model = "m";
    g.queued = queued;
    r.groups = {g};
    return r;
  };
  store.PutWorker(report(1, 1));
  ASSERT_EQ(store.Read()->groups.at(0).queued, 1);  // the first view is built at once
  store.PutWorker(report(2, 2));
  EXPECT_EQ(store.Read()->groups.at(0).queued, 1);  // within the lag: the old view
  // The controller publishes the routers' demand and reads it back in one
  // tick: held back, it differenced the same counters twice (a rate of 0).
  store.PutDemand("router", {cluster::ModelDemand{"m", 1, 0, 0, {}, 7}});
  auto state = store.Read();
  ASSERT_EQ(state->demand.size(), 1u);
  EXPECT_EQ(state->demand[0].arrivals_total, 7);
  EXPECT_EQ(state->groups.at(0).queued, 2);  // rebuilt whole
  store.PutWorker(report(3, 3));
  EXPECT_EQ(store.Read()->groups.at(0).queued, 2);
  loop.RunUntil(loop.Now() + FromMs(5));
  EXPECT_EQ(store.Read()->groups.at(0).queued, 3);  // the lag passed
  EXPECT_EQ(store.rebuilds(), 3);
}

TEST(EventLoopTest, RunsEventsInTimeOrderAndTiesInSchedulingOrder) {
  EventLoop loop;
  std::vector<std::string> order;
  const auto t = loop.Now();
  loop.At(t + 2ms, [&] { order.push_back("b@2"); });
  loop.At(t + 1ms, [&] {
    order.push_back("a@1");
    loop.At(t + 2ms, [&] { order.push_back("c@2 (scheduled later)"); });
    loop.At(t, [&] { order.push_back("d (in the past: now)"); });
  });
  loop.Run();
  EXPECT_EQ(order, (std::vector<std::string>{"a@1", "d (in the past: now)", "b@2",
                                             "c@2 (scheduled later)"}));
  EXPECT_EQ(loop.Now(), t + 2ms);
}

// ---- one simulated worker

class SimulatedWorkerTest : public ::testing::Test {
 protected:
  void Make(int64_t budget_mb) {
    SimulatedWorkerOptions o;
    o.budget_bytes = budget_mb << 20;
    o.latency_noise_sigma = 0;  // exact profiles
    worker_ = std::make_unique<SimulatedWorker>(loop_, store_, o);
  }
  Status Apply(cluster::Action::Kind kind, int replicas) {
    WorkerAction w;
    w.action.kind = kind;
    w.action.model = "m";
    w.action.variant = "ts-fp32";
    w.action.hardware = Cpu1();
    w.action.replicas = replicas;
    w.version = Version();
    Status out = Internal("no answer");
    worker_->Apply(w, [&out](Status s) { out = s; });
    return out;
  }
  // Sends one query of one sample; its answer lands in `results_`.
  void Query() {
    ExecuteRequest r;
    r.group = cluster::GroupLabel("m", 1, "ts-fp32", Cpu1());
    Tensor x;
    x.shape = {1, 4};
    r.inputs = {x};
    const auto sent = loop_.Now();
    ASSERT_TRUE(worker_
                    ->Execute(r,
                              [this, sent](StatusOr<ExecuteResult> res) {
                                ASSERT_TRUE(res.ok()) << res.status().ToString();
                                results_.push_back({sent, loop_.Now(), res->stats.batch_size,
                                                    res->stats.compute_ns});
                              })
                    .ok());
  }
  struct Answer {
    EventLoop::TimePoint sent, done;
    int64_t batch, compute_ns;
  };
  EventLoop loop_;
  cluster::InMemoryClusterStateStore store_;
  std::unique_ptr<SimulatedWorker> worker_;
  std::vector<Answer> results_;
};

TEST_F(SimulatedWorkerTest, BatchesTakeTheProfiledLatencyAndLoadsTheProfiledLoadTime) {
  Make(1024);
  const auto t0 = loop_.Now();
  ASSERT_TRUE(Apply(cluster::Action::kLoad, 1).ok());
  // Sent while the replica loads: it waits for the load, then runs alone.
  Query();
  loop_.Run();
  ASSERT_EQ(results_.size(), 1u);
  EXPECT_EQ(results_[0].done, t0 + 500ms + 10ms);
  EXPECT_EQ(results_[0].batch, 1);
  EXPECT_EQ(results_[0].compute_ns, 10'000'000);
  EXPECT_EQ(worker_->queries_waited_for_load(), 1);

  // Three at once on an idle replica: the first runs alone, the two queued
  // behind it form a batch of two (12 ms) when it ends.
  results_.clear();
  const auto t1 = loop_.Now();
  Query();
  Query();
  Query();
  loop_.Run();
  ASSERT_EQ(results_.size(), 3u);
  EXPECT_EQ(results_[0].done, t1 + 10ms);
  EXPECT_EQ(results_[1].done, t1 + 10ms + 12ms);
  EXPECT_EQ(results_[2].done, t1 + 10ms + 12ms);
  EXPECT_EQ(results_[1].batch, 2);
  // Between measured points the latency is interpolated: 3 -> 14 ms.
  results_.clear();
  Query();
  Query();
  Query();
  Query();  // 1 alone, then 3 together
  loop_.Run();
  ASSERT_EQ(results_.size(), 4u);
  EXPECT_EQ(results_[3].batch, 3);
  EXPECT_EQ(results_[3].compute_ns, 14'000'000);
  // One replica for 500 ms + 10 + 22 + 24 ms.
  EXPECT_DOUBLE_EQ(worker_->ReplicaSeconds(), 0.556);
}

TEST_F(SimulatedWorkerTest, MemoryBudgetIsEnforced) {
  Make(250);  // two replicas of 100 MiB fit, three do not
  ASSERT_TRUE(Apply(cluster::Action::kLoad, 2).ok());
  Status grow = Apply(cluster::Action::kSetReplicas, 3);
  EXPECT_EQ(grow.code(), StatusCode::kResourceExhausted) << grow.ToString();
  cluster::WorkerReport r = worker_->Report();
  ASSERT_EQ(r.groups.size(), 1u);
  EXPECT_EQ(r.groups[0].replicas, 2);
  EXPECT_EQ(r.devices[0].used_bytes, int64_t{200} << 20);
  EXPECT_LE(r.devices[0].used_bytes, r.devices[0].budget_bytes);
  EXPECT_EQ(worker_->actions_refused(), 1);
  // Shrinking frees the memory for the growth.
  ASSERT_TRUE(Apply(cluster::Action::kSetReplicas, 1).ok());
  EXPECT_TRUE(Apply(cluster::Action::kSetReplicas, 2).ok());
  EXPECT_EQ(worker_->Report().groups[0].replicas, 2);
  // The store sees what the worker reports.
  EXPECT_EQ(store_.Read()->groups.at(0).replicas, 2);
}

// ---- whole runs

TEST(SimulationTest, SameSeedSameResults) {
  SimulationOptions o;
  o.repository = WriteRepository("determinism");
  o.workers = 2;
  o.seed = 7;
  // A rise past one replica's capacity: the autoscaler acts, and the
  // router draws between two workers' replicas.
  loadgen::Trace trace = SteadyTrace(100, 10);
  for (auto& q : SteadyTrace(500, 10).queries) {
    q.timestamp_ms += 10000;
    trace.queries.push_back(q);
  }
  auto run = [&] {
    std::vector<PolicyResult> results;
    for (Policy p : {Policy::kSomm, Policy::kStaticPeak, Policy::kStaticAvg}) {
      auto r = RunPolicy(o, trace, p);
      EXPECT_TRUE(r.ok()) << r.status().ToString();
      if (r.ok()) results.push_back(*r);
    }
    return ResultsToJson(results);
  };
  const std::string first = run();
  EXPECT_EQ(run(), first);
  auto somm = RunPolicy(o, trace, Policy::kSomm);
  ASSERT_TRUE(somm.ok());
  EXPECT_EQ(somm->queries, 6000);
  EXPECT_GT(somm->control_actions, 0) << first;
  EXPECT_GT(somm->answered, 0);
}

// Every query with an SLO is chosen by the selector, which predicts its
// cost; its answer reports what it was charged. The run says how far the
// two differ, for every answered query.
TEST(SimulationTest, ReportsHowFarReportedCostIsFromPredicted) {
  SimulationOptions o;
  o.repository = WriteRepository("cost-agreement");
  o.workers = 2;
  loadgen::Trace trace = SteadyTrace(200, 5);
  auto free = RunPolicy(o, trace, Policy::kSomm);
  ASSERT_TRUE(free.ok()) << free.status().ToString();
  EXPECT_EQ(free->cost.queries, free->answered);
  // The prediction is for the query's batch run alone; at 200 q/s queries
  // share batches and each pays its share, so less (about half here), but
  // never many times more than predicted.
  EXPECT_GT(free->cost.median, 0.1);
  EXPECT_LT(free->cost.median, 1.5);
  EXPECT_LE(free->cost.p10, free->cost.median);
  EXPECT_LE(free->cost.median, free->cost.p90);
  EXPECT_LE(free->cost.p99, free->cost.max);
  EXPECT_EQ(free->cost.capped, 0);
  EXPECT_NE(ResultsToJson({*free}).find("\"cost_reported_over_predicted\""), std::string::npos);
}

TEST(SimulationTest, InfaasScalesOutAndTheOracleProvisionsAheadForLess) {
  SimulationOptions o;
  o.repository = WriteRepository("infaas-oracle");
  o.workers = 2;
  o.worker_cores = 4;
  o.latency_noise_sigma = 0;
  // 10 s at 100 q/s, then 20 s at 900: past two replicas' capacity
  // (333 q/s each at batch 8), and back.
  loadgen::Trace trace = SteadyTrace(100, 10);
  for (auto& q : SteadyTrace(900, 20).queries) {
    q.timestamp_ms += 10000;
    trace.queries.push_back(q);
  }
  for (auto& q : SteadyTrace(100, 30).queries) {
    q.timestamp_ms += 30000;
    trace.queries.push_back(q);
  }
  for (auto& q : trace.queries) q.latency_slo_ms = 100;
  auto infaas = RunPolicy(o, trace, Policy::kInfaas);
  auto oracle = RunPolicy(o, trace, Policy::kClairvoyant);
  auto peak = RunPolicy(o, trace, Policy::kStaticPeak);
  ASSERT_TRUE(infaas.ok()) << infaas.status().ToString();
  ASSERT_TRUE(oracle.ok()) << oracle.status().ToString();
  ASSERT_TRUE(peak.ok()) << peak.status().ToString();
  const std::string json = ResultsToJson({*infaas, *oracle, *peak});
  // INFaaS replicates under the rise (reacting to it: some queries of its
  // first second miss) and scales back, one replica per delay, after it.
  // Past two replicas a worker it replicates by loading the variant on the
  // other worker (a load, not a resize: infaas_policy.h, max_replicas).
  EXPECT_GE(infaas->control_actions_by_kind["resize"] + infaas->control_actions_by_kind["load"], 3)
      << json;
  EXPECT_GT(infaas->mean_replicas, 1.5) << json;
  EXPECT_LT(infaas->attainment, oracle->attainment) << json;
  // The oracle's loads are ready before the rise: no query waits for one.
  EXPECT_EQ(oracle->cold_starts, 0) << json;
  EXPECT_GE(oracle->attainment, 0.99) << json;
  EXPECT_LT(oracle->usd, peak->usd) << json;
  // One thread per replica: dollars are instance-seconds at its price.
  EXPECT_NEAR(peak->usd, peak->instance_seconds * PriceList().cpu_thread_usd_per_s, 1e-9);
  // Attainment per SLO value, as the report's classes need it.
  EXPECT_EQ(oracle->models.at("m").slos.at("100").queries, 22000);
  // Same seed, same run.
  auto again = RunPolicy(o, trace, Policy::kInfaas);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(ResultsToJson({*again}), ResultsToJson({*infaas}));
}

// The oracle loads the next interval's new instances a load time ahead; the
// queries of the interval still running must not be sent to them while they
// load (they were, as the least busy instances: cold starts in an oracle).
TEST(SimulationTest, OracleSendsNoQueryToTheNextIntervalsLoadingInstances) {
  SimulationOptions o;
  o.repository = WriteRepository("oracle-ahead");
  o.workers = 4;
  o.worker_cores = 1;  // one replica per worker: a rise needs new instances
  o.latency_noise_sigma = 0;
  // 150 q/s of 10-ms batches: the one replica is often busy, so a loading
  // instance with nothing in flight looks less busy than it.
  loadgen::Trace trace = SteadyTrace(150, 10);
  for (auto& q : SteadyTrace(700, 10).queries) {
    q.timestamp_ms += 10000;
    trace.queries.push_back(q);
  }
  for (auto& q : trace.queries) q.latency_slo_ms = 100;
  auto r = RunPolicy(o, trace, Policy::kClairvoyant);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_GE(r->control_actions_by_kind["load"], 1) << ResultsToJson({*r});
  EXPECT_EQ(r->cold_starts, 0) << ResultsToJson({*r});
  EXPECT_EQ(r->met, r->feasible) << ResultsToJson({*r});
}

TEST(SimulationTest, StaticReplicasAreSizedForThePeakAndTheMeanAtProfiledCapacity) {
  SimulationOptions o;
  o.repository = WriteRepository("static");
  o.worker_cores = 4;
  // One replica carries 8 / 24 ms = 333 q/s at best. 9 s at 100 q/s, then
  // one second of 700: peak 700 -> 3 replicas, mean 160 q/s -> 1.
  loadgen::Trace trace = SteadyTrace(100, 9);
  for (auto& q : SteadyTrace(700, 1).queries) {
    q.timestamp_ms += 9000;
    trace.queries.push_back(q);
  }
  auto peak = StaticReplicas(o, trace, Policy::kStaticPeak);
  auto avg = StaticReplicas(o, trace, Policy::kStaticAvg);
  ASSERT_TRUE(peak.ok()) << peak.status().ToString();
  ASSERT_TRUE(avg.ok()) << avg.status().ToString();
  EXPECT_EQ(peak->at("m"), 3);
  EXPECT_EQ(avg->at("m"), 1);
  // A peak beyond the cluster's cores is cut to them: 2 one-thread replicas.
  o.worker_cores = 2;
  peak = StaticReplicas(o, trace, Policy::kStaticPeak);
  ASSERT_TRUE(peak.ok()) << peak.status().ToString();
  EXPECT_EQ(peak->at("m"), 2);
  o.worker_cores = 4;
  // A plan given model by model (as a live run calibrated it) wins.
  o.static_peak_replicas["m"] = 5;
  peak = StaticReplicas(o, trace, Policy::kStaticPeak);
  ASSERT_TRUE(peak.ok()) << peak.status().ToString();
  EXPECT_EQ(peak->at("m"), 5);
  auto run = RunPolicy(o, trace, Policy::kStaticPeak);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_NEAR(run->mean_replicas, 5, 1e-9);
  EXPECT_EQ(run->control_actions, 0);
}

TEST(SimulationTest, AKilledWorkerIsDetectedAfterTheLeaseAndReplacedAfterTheDelay) {
  SimulationOptions o;
  o.repository = WriteRepository("failure");
  o.latency_noise_sigma = 0;
  // Two zones of two workers; zone b dies 5 s in (a correlated failure).
  o.zones = {{"a", 2, 2, int64_t{1} << 30}, {"b", 2, 2, int64_t{1} << 30}};
  o.fail_at_s = 5;
  o.fail_fraction = 1.0;
  o.fail_zone = "b";
  o.lease_s = 3;
  o.provision_delay_s = 10;
  // Enough load for replicas on several workers (one carries about 330 q/s).
  const loadgen::Trace trace = SteadyTrace(600, 30);
  auto r = RunPolicy(o, trace, Policy::kSomm);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->workers_killed, 2);
  EXPECT_EQ(r->workers_replaced, 2);
  ASSERT_GE(r->timeline.size(), 30u);
  EXPECT_EQ(r->timeline[2].workers, 4);
  EXPECT_EQ(r->timeline[6].workers, 2);  // dead from 5 s
  // Asked for at 8 s (the lease), joined at 18 s.
  EXPECT_EQ(r->timeline[16].workers, 2);
  EXPECT_EQ(r->timeline[19].workers, 4);
  // Worker-seconds: two for 30 s, two for 5 s, and the replacements from
  // their request (8 s) to the end (the last arrival, just under 30 s).
  EXPECT_NEAR(r->worker_seconds, 2 * r->duration_s + 2 * 5 + 2 * (r->duration_s - 8), 0.01);
  EXPECT_EQ(r->queries, 18000);
  EXPECT_EQ(r->failed, 0) << ResultsToJson({*r});
  // The survivors carry the load again after the failure.
  const auto& late = r->timeline[25];
  EXPECT_EQ(late.met, late.feasible) << ResultsToJson({*r});

  // Without the failure: every worker for the whole replay.
  o.fail_at_s = -1;
  auto calm = RunPolicy(o, trace, Policy::kSomm);
  ASSERT_TRUE(calm.ok());
  EXPECT_EQ(calm->workers_killed, 0);
  EXPECT_NEAR(calm->worker_seconds, 4 * calm->duration_s, 0.01);
}

// The leader controller dies 15 s in, and the load steps from 50 to 600
// q/s at 20 s: more than one replica carries. The standby takes the lease
// once it lapses (3 s, renewed every second) and scales for the step as the
// leader would have. With a lease of 30 s no controller acts until after
// the replay's end, and the step is met by one replica: fewer met.
TEST(SimulationTest, TheStandbyControllerTakesOverAfterTheLeaseAndScalesForTheStep) {
  SimulationOptions o;
  o.repository = WriteRepository("leader");
  o.latency_noise_sigma = 0;
  o.workers = 2;
  o.worker_memory_bytes = int64_t{1} << 30;
  loadgen::Trace trace = SteadyTrace(50, 20);
  for (auto& q : SteadyTrace(600, 20).queries) {
    q.timestamp_ms += 20000;
    trace.queries.push_back(q);
  }
  auto calm = RunPolicy(o, trace, Policy::kSomm);
  ASSERT_TRUE(calm.ok()) << calm.status().ToString();
  EXPECT_EQ(calm->leader_takeover_s, -1);

  o.kill_leader_at_s = 15;
  o.leader_lease_s = 3;
  auto killed = RunPolicy(o, trace, Policy::kSomm);
  ASSERT_TRUE(killed.ok()) << killed.status().ToString();
  // The lease lapses 3 s after the dead leader's last renewal (up to 1 s
  // before the kill); the standby asks every second.
  EXPECT_GE(killed->leader_takeover_s, 2.0 - 1e-9);
  EXPECT_LE(killed->leader_takeover_s, 4.0 + 1e-9);
  EXPECT_GE(killed->timeline[35].replicas, 2) << ResultsToJson({*killed});
  EXPECT_NEAR(killed->attainment, calm->attainment, 0.01);

  o.leader_lease_s = 30;
  auto headless = RunPolicy(o, trace, Policy::kSomm);
  ASSERT_TRUE(headless.ok()) << headless.status().ToString();
  EXPECT_GE(headless->leader_takeover_s, 20.0);  // after most of the step
  EXPECT_EQ(headless->timeline[30].replicas, 1) << ResultsToJson({*headless});
  EXPECT_LT(headless->attainment, killed->attainment - 0.2);
  std::printf("[sim leader kill] attainment: no kill %.4f, kill with a 3-s lease %.4f "
              "(standby leads %.1f s after), kill with a 30-s lease %.4f\n",
              calm->attainment, killed->attainment, killed->leader_takeover_s,
              headless->attainment);
}

TEST(SimulationTest, ReadsAClusterDescription) {
  const fs::path path = fs::path(::testing::TempDir()) / "somm-sim-cluster.json";
  std::ofstream(path) << R"({"zones": [{"name": "a", "workers": 3, "cores": 4, "memory_mb": 2048},
                                      {"name": "b", "workers": 1}]})";
  auto zones = ReadClusterFile(path.string());
  ASSERT_TRUE(zones.ok()) << zones.status().ToString();
  ASSERT_EQ(zones->size(), 2u);
  EXPECT_EQ((*zones)[0].name, "a");
  EXPECT_EQ((*zones)[0].workers, 3);
  EXPECT_EQ((*zones)[0].cores, 4);
  EXPECT_EQ((*zones)[0].memory_bytes, int64_t{2048} << 20);
  EXPECT_EQ((*zones)[1].workers, 1);
  std::ofstream(path) << R"({"zones": [{"name": "a"}]})";
  EXPECT_EQ(ReadClusterFile(path.string()).status().code(), StatusCode::kInvalidArgument);
  fs::remove(path);
}

TEST(SimulationTest, SommUnloadsAnIdleModelAndLoadsItAgainOnDemand) {
  SimulationOptions o;
  o.repository = WriteRepository("cold");
  o.latency_noise_sigma = 0;
  // 5 s of queries, 60 s of nothing (idle_unload_s is 30), 5 s more.
  auto trace = [](double slo_ms) {
    loadgen::Trace t = SteadyTrace(50, 5);
    for (auto& q : SteadyTrace(50, 5).queries) {
      q.timestamp_ms += 65000;
      t.queries.push_back(q);
    }
    for (auto& q : t.queries) q.latency_slo_ms = slo_ms;
    return t;
  };
  // A 1-s SLO leaves room for the 500-ms load: the first query after the
  // gap has the router load the model and waits for it (a cold start).
  auto waits = RunPolicy(o, trace(1000), Policy::kSomm);
  auto peak = RunPolicy(o, trace(1000), Policy::kStaticPeak);
  ASSERT_TRUE(waits.ok()) << waits.status().ToString();
  ASSERT_TRUE(peak.ok()) << peak.status().ToString();
  EXPECT_EQ(waits->cold_starts, 1) << ResultsToJson({*waits});
  EXPECT_EQ(waits->control_actions_by_kind["unload"], 1);
  EXPECT_EQ(waits->control_actions_by_kind["load"], 1);
  EXPECT_EQ(waits->met, waits->feasible);
  // The queries that waited for the load (about 25 of 500, up to 510 ms)
  // set the tail; without it no query takes more than a batch of 8 (24 ms).
  EXPECT_GT(waits->p99_ms, 100);
  EXPECT_LT(peak->p99_ms, 25);
  EXPECT_LT(waits->instance_seconds, peak->instance_seconds);
  EXPECT_EQ(peak->cold_starts, 0);
  EXPECT_EQ(peak->met, peak->feasible);

  // A 200-ms SLO does not: the selector refuses those queries rather than
  // load on their critical path, and the autoscaler loads the model at its
  // next tick (load on demand), which is no query's cold start.
  auto refuses = RunPolicy(o, trace(200), Policy::kSomm);
  ASSERT_TRUE(refuses.ok()) << refuses.status().ToString();
  EXPECT_EQ(refuses->cold_starts, 0) << ResultsToJson({*refuses});
  EXPECT_EQ(refuses->control_actions_by_kind["load"], 1);
  EXPECT_GT(refuses->rejections, 0);
  EXPECT_LT(refuses->met, refuses->feasible);
}

// ---- the policy is shared

// 240 q/s against one replica that carries 333 q/s within half of a 200-ms
// SLO (batch 8 in 24 ms): 72% busy, more than one replica carries at the
// 70% target. With a high watermark of 0.7 the autoscaler scales up to two;
// with 0.95 it holds (0.95, not the default 0.8: the forecast overshoots a
// step from 0 to 240 q/s by up to 27%, to 92% busy, as Holt's trend does).
// Both the live controller and the simulator must show it, because both
// run control::Decide.

// The live controller against a fake worker that already serves m x1.
int LiveReplicasAfterTwoTicks(double high_watermark) {
  ManualClock clock{cluster::TimePoint(100000s)};
  cluster::InMemoryClusterStateStore store;
  testing::FakeWorkerStub::Options wo;
  wo.cores = 2;
  wo.clock = &clock;
  testing::FakeWorkerStub worker(store, wo);
  SingleWorkerDirectory workers(worker);
  ModelCatalog registry("");
  NullServingMetrics metrics;
  DecisionLog log(10);
  ControllerOptions co;
  co.clock = &clock;
  co.autoscaler.high_watermark = high_watermark;
  Controller controller(co, registry, /*registrar=*/nullptr, store, workers, metrics, log);
  VersionPtr v = Version();
  registry.Publish("m", {v}, {});
  worker.AddGroup(v, "ts-fp32", Cpu1());
  auto arrivals = [&store](int64_t total) {
    cluster::ModelDemand d;
    d.model = "m";
    d.version = 1;
    d.arrivals_total = total;
    d.latency_slo_ms = 200;
    store.PutDemand("router", {d});
  };
  arrivals(0);
  controller.Tick();
  clock.Advance(1s);
  arrivals(240);
  controller.Tick();
  int replicas = 0;
  for (const auto& g : worker.Report().groups) replicas += g.replicas;
  return replicas;
}

TEST(PolicySharedTest, HighWatermarkChangesTheLiveControllerAndTheSimulationAlike) {
  EXPECT_EQ(LiveReplicasAfterTwoTicks(0.95), 1);
  EXPECT_EQ(LiveReplicasAfterTwoTicks(0.7), 2);

  SimulationOptions o;
  o.repository = WriteRepository("shared");
  o.worker_cores = 2;
  o.latency_noise_sigma = 0;
  const loadgen::Trace trace = SteadyTrace(240, 20);
  o.autoscaler.high_watermark = 0.95;
  auto held = RunPolicy(o, trace, Policy::kSomm);
  o.autoscaler.high_watermark = 0.7;
  auto scaled = RunPolicy(o, trace, Policy::kSomm);
  ASSERT_TRUE(held.ok()) << held.status().ToString();
  ASSERT_TRUE(scaled.ok()) << scaled.status().ToString();
  EXPECT_EQ(held->control_actions, 0) << ResultsToJson({*held});
  EXPECT_LT(held->mean_replicas, 1.01);
  EXPECT_GE(
      scaled->control_actions_by_kind["set_replicas"] + scaled->control_actions_by_kind["load"], 1)
      << ResultsToJson({*scaled});
  EXPECT_GT(scaled->mean_replicas, 1.5);
}

}  // namespace
}  // namespace somm::sim
