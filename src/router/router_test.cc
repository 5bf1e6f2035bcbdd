// The router in process, against a fake worker stub (worker/testing/) that
// records what it is asked and finishes loads when the test says so, with a
// real controller (never started: nothing ticks) and registry records built
// here. Everything runs on the test's thread: the fake answers inside the
// calls, so a query that waits for a load is answered inside Complete().
#include "router/router.h"
#include "runtime/torch/torch_registration.h"

#include "common/clock.h"
#include "controller/controller.h"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cluster/in_memory_store.h"
#include "worker/testing/fake_worker_stub.h"

namespace somm {
namespace {

using ::somm::testing::FakeWorkerStub;
using namespace std::chrono_literals;

constexpr int64_t kMiB = int64_t{1} << 20;

// The registry's backend only serves registrations, which these tests do not make.
// These tests' models are torchscript's: their as-registered variant is
// torchscript's first (runtime/torch/torch_registration.h).
constexpr const char* kAsRegistered = kVariantFp32;

// Where the controller puts configured instances: cpu, one thread.
HardwareConfig Cpu1() { return {DeviceKind::kCpu, 0, 1}; }

// Version 1 of `name`: x FP32 [2] -> y FP32 [2], batching up to 4; with
// `profiled_mb`, its as-registered variant is profiled on cpu1 at that size.
VersionPtr Model(const std::string& name, std::optional<double> profiled_mb = {}) {
  auto v = std::make_shared<VersionRecord>();
  v->config.name = name;
  v->config.max_batch_size = 4;
  v->config.inputs = {{"x", DataType::kFp32, {2}}};
  v->config.outputs = {{"y", DataType::kFp32, {2}}};
  v->version = 1;
  v->version_str = "1";
  v->path = "/nonexistent/" + name + "/1/model.pt";
  if (profiled_mb) {
    VariantProfile p;
    p.model = name;
    p.variant = kAsRegistered;
    p.precision = "fp32";
    p.accuracy = 0.97;
    HardwareProfile hp;
    hp.hardware = Cpu1();
    hp.latency = LatencyCurve::Fit({{1, 1.0}, {4, 2.0}});
    hp.peak_memory_mb = *profiled_mb;
    hp.load_time_ms = 100;
    p.hardware = {hp};
    v->profiles = {p};
  }
  return v;
}

std::string Label(const std::string& model) {
  return cluster::GroupLabel(model, 1, kAsRegistered, Cpu1());
}

Tensor X(Shape shape = {1, 2}) {
  return Tensor{"x", DataType::kFp32, shape,
                std::string(static_cast<size_t>(ElementCount(shape)) * sizeof(float), '\1')};
}

// Keeps somm_inflight_queries' value, as the Prometheus gauge would, and
// counts somm_cost_over_max_total over every model.
class InflightMetrics : public NullServingMetrics {
 public:
  void AddInflightQueries(int64_t delta) override { inflight_ += delta; }
  int64_t inflight() const { return inflight_.load(); }
  ModelMetrics* ForModel(const std::string&, const std::string&) override { return &model_; }
  int64_t cost_over_max() const { return model_.cost_over_max.load(); }

 private:
  struct CountingModel : ModelMetrics {
    void RecordSuccess(double, double, double) override {}
    void RecordFailure(const std::string&) override {}
    void RecordBatch(int64_t) override {}
    void SetInstancesLoaded(int64_t) override {}
    void RecordCostOverCeiling() override { ++cost_over_max; }
    std::atomic<int64_t> cost_over_max{0};
  };
  std::atomic<int64_t> inflight_{0};
  CountingModel model_;
};

// One query's answer, once the router gives it.
struct Answer {
  std::optional<StatusOr<InferenceResponse>> result;
  bool answered() const { return result.has_value(); }
  StatusOr<InferenceResponse>& get() { return *result; }
};

class RouterTest : public ::testing::Test {
 protected:
  explicit RouterTest(int64_t budget_bytes = int64_t{1} << 40)
      : worker_(store_, WorkerOptions(budget_bytes)) {
    worker_.Publish();  // the device, before anything places on it
  }

  FakeWorkerStub::Options WorkerOptions(int64_t budget_bytes) {
    FakeWorkerStub::Options o;
    o.hold_loads = true;
    o.budget_bytes = budget_bytes;
    o.clock = &control_clock_;
    return o;
  }

  VersionPtr Publish(VersionPtr v) {
    catalog_.Publish(v->config.name, {v}, {});
    return v;
  }

  std::shared_ptr<Answer> Infer(const std::string& model, Tensor x = X(),
                                const std::string& version = "") {
    InferenceRequest r;
    r.model_name = model;
    r.model_version = version;
    r.id = "q";
    r.inputs.push_back(std::move(x));
    auto answer = std::make_shared<Answer>();
    router_.Infer(std::move(r), [answer](StatusOr<InferenceResponse> res) {
      ASSERT_FALSE(answer->answered()) << "answered twice";
      answer->result = std::move(res);
    });
    return answer;
  }

  // Arrivals the router has counted for `model` version 1, as published.
  int64_t Arrivals(const std::string& model) {
    router_.PublishDemand();
    const auto snapshot = store_.Read();
    for (const auto& d : snapshot->demand) {
      if (d.model == model && d.version == 1) return d.arrivals_total;
    }
    return 0;
  }

  // The controller's and the worker's clock.
  ManualClock control_clock_{cluster::TimePoint(100000s)};
  cluster::InMemoryClusterStateStore store_;
  FakeWorkerStub worker_;
  SingleWorkerDirectory workers_{worker_};
  ModelCatalog catalog_{""};
  InflightMetrics metrics_;
  DecisionLog log_{100};
  Controller controller_{[this] {
                           ControllerOptions o;
                           o.clock = &control_clock_;
                           return o;
                         }(),
                         catalog_, /*registrar=*/nullptr,
                         store_,
                         workers_,
                         metrics_,
                         log_};
  // The router's own clock: queries take no time unless a test moves it.
  ManualClock clock_;
  Router router_{[this] {
                   RouterOptions o;
                   o.clock = &clock_;
                   return o;
                 }(),
                 catalog_, /*registrar=*/nullptr, store_, workers_, controller_, metrics_, log_};
};

TEST_F(RouterTest, LoadedModelRunsOnItsGroupAndTheResponseSaysWhatRan) {
  VersionPtr v = Publish(Model("m"));
  worker_.AddGroup(v, kAsRegistered, Cpu1());
  auto a = Infer("m", X({2, 2}));
  ASSERT_TRUE(a->answered());
  ASSERT_TRUE(a->get().ok()) << a->get().status().ToString();
  const InferenceResponse& r = *a->get();
  EXPECT_EQ(r.model_name, "m");
  EXPECT_EQ(r.model_version, "1");
  EXPECT_EQ(r.id, "q");
  ASSERT_EQ(r.outputs.size(), 1u);
  EXPECT_EQ(r.outputs[0].name, "y");
  EXPECT_EQ(r.outputs[0].shape, (Shape{2, 2}));

  const auto executed = worker_.executed();
  ASSERT_EQ(executed.size(), 1u);
  EXPECT_EQ(executed[0].group, Label("m"));
  EXPECT_EQ(executed[0].instance_id, -1);  // the worker's least loaded
  ASSERT_EQ(executed[0].inputs.size(), 1u);
  EXPECT_EQ(executed[0].inputs[0].shape, (Shape{2, 2}));

  const Parameters& p = r.parameters;
  EXPECT_EQ(std::get<std::string>(p.at("somm_variant")), "m:1:ts-fp32");
  EXPECT_EQ(std::get<std::string>(p.at("somm_hardware")), "cpu1");
  EXPECT_EQ(std::get<std::string>(p.at("somm_device")), "cpu");
  EXPECT_EQ(std::get<std::string>(p.at("somm_decision")), "default");
  EXPECT_EQ(std::get<int64_t>(p.at("somm_instance")), 0);
  EXPECT_EQ(std::get<int64_t>(p.at("somm_batch_size")), 2);
  EXPECT_EQ(std::get<int64_t>(p.at("somm_queue_us")), 1);
  EXPECT_EQ(std::get<int64_t>(p.at("somm_compute_us")), 2);
  for (const char* key : {"somm_server_us", "somm_latency_ms", "somm_cost_usd",
                          "somm_predicted_latency_ms", "somm_reason"}) {
    EXPECT_TRUE(p.count(key)) << key;
  }
  EXPECT_TRUE(worker_.actions().empty());  // nothing to load
  EXPECT_EQ(Arrivals("m"), 1);
}

// A model whose model.yaml enables the response cache: the second identical
// query is answered from it (the worker runs nothing, somm_cache_hit), a
// different input runs, a reload (a new generation) misses, and a model
// without the setting never hits.
TEST_F(RouterTest, TheResponseCacheAnswersARepeatedQueryWithoutRunningTheModel) {
  auto cached = std::make_shared<VersionRecord>(*Model("c"));
  cached->config.response_cache.enable = true;
  cached->generation = NextVersionGeneration();
  VersionPtr v = Publish(cached);
  worker_.AddGroup(v, kAsRegistered, Cpu1());
  VersionPtr plain = Publish(Model("p"));
  worker_.AddGroup(plain, kAsRegistered, Cpu1());

  auto first = Infer("c", X({1, 2}));
  ASSERT_TRUE(first->get().ok()) << first->get().status().ToString();
  EXPECT_EQ(first->get()->parameters.count("somm_cache_hit"), 0u);
  ASSERT_EQ(worker_.executed().size(), 1u);
  auto second = Infer("c", X({1, 2}));
  ASSERT_TRUE(second->get().ok()) << second->get().status().ToString();
  EXPECT_EQ(worker_.executed().size(), 1u) << "a hit must not run the model";
  const InferenceResponse& hit = *second->get();
  EXPECT_TRUE(std::get<bool>(hit.parameters.at("somm_cache_hit")));
  EXPECT_EQ(std::get<std::string>(hit.parameters.at("somm_decision")), "cache");
  EXPECT_EQ(hit.model_name, "c");
  EXPECT_EQ(hit.model_version, "1");
  ASSERT_EQ(hit.outputs.size(), first->get()->outputs.size());
  EXPECT_EQ(hit.outputs[0].data, first->get()->outputs[0].data);
  EXPECT_EQ(hit.outputs[0].shape, first->get()->outputs[0].shape);

  Tensor other = X({1, 2});
  other.data[0] = '\2';
  ASSERT_TRUE(Infer("c", other)->get().ok());
  EXPECT_EQ(worker_.executed().size(), 2u) << "another input runs the model";

  // A reload publishes a new generation of version 1: its old answers are
  // never found again.
  auto reloaded = std::make_shared<VersionRecord>(*cached);
  reloaded->generation = NextVersionGeneration();
  Publish(reloaded);
  ASSERT_TRUE(Infer("c", X({1, 2}))->get().ok());
  EXPECT_EQ(worker_.executed().size(), 3u) << "a reload invalidates";

  for (int i = 0; i < 2; ++i) ASSERT_TRUE(Infer("p", X({1, 2}))->get().ok());
  EXPECT_EQ(worker_.executed().size(), 5u) << "a model without response_cache never hits";
}

// somm_explain "compact": the same facts as one parameter, and none of the
// per-fact ones; anything but "full" or "compact" is refused.
TEST_F(RouterTest, ACompactExplanationCarriesTheSameFactsInOneParameter) {
  VersionPtr v = Publish(Model("m"));
  worker_.AddGroup(v, kAsRegistered, Cpu1());
  auto ask = [&](Parameter explain) {
    InferenceRequest r;
    r.model_name = "m";
    r.id = "q";
    r.inputs.push_back(X({2, 2}));
    r.parameters["somm_explain"] = explain;
    auto answer = std::make_shared<Answer>();
    router_.Infer(std::move(r), [answer](StatusOr<InferenceResponse> res) { answer->result = std::move(res); });
    return answer;
  };
  auto compact = ask(std::string("compact"));
  ASSERT_TRUE(compact->answered());
  ASSERT_TRUE(compact->get().ok()) << compact->get().status().ToString();
  const Parameters& p = compact->get()->parameters;
  ASSERT_EQ(p.count("somm"), 1u);
  EXPECT_EQ(p.count("somm_variant"), 0u);
  EXPECT_EQ(p.count("somm_reason"), 0u);
  const std::string s = std::get<std::string>(p.at("somm"));
  for (const char* fact : {"decision=default ", "variant=m:1:ts-fp32 ", "hardware=cpu1 ",
                           "device=cpu ", "instance=0 ", "batch=2 ", "queue_us=1 ",
                           "compute_us=2 ", "server_us=", "predicted_ms=", "cost_usd=", "reason="}) {
    EXPECT_NE(s.find(fact), std::string::npos) << fact << " in " << s;
  }
  EXPECT_LT(s.find("cost_usd="), s.find("reason=")) << "the reason comes last: " << s;

  auto full = ask(std::string("full"));
  ASSERT_TRUE(full->get().ok());
  EXPECT_EQ(full->get()->parameters.count("somm"), 0u);
  EXPECT_EQ(std::get<std::string>(full->get()->parameters.at("somm_variant")), "m:1:ts-fp32");

  for (Parameter bad : {Parameter(std::string("short")), Parameter(true)}) {
    auto refused = ask(bad);
    ASSERT_TRUE(refused->answered());
    EXPECT_EQ(refused->get().status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(refused->get().status().message().find("somm_explain"), std::string::npos);
  }
}

TEST_F(RouterTest, MalformedQueryIsRefusedBeforeRoutingLoadsNothingAndIsNoDemand) {
  Publish(Model("m"));  // nothing loaded: a query that passed the checks would load it
  Tensor misnamed = X();
  misnamed.name = "z";
  struct Case {
    std::string model;
    Tensor x;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"m", misnamed, "missing input 'x'"},
      {"m", X({1, 3}), "has shape [1,3], expected [-1,2]"},
      {"m", X({5, 2}), "batch size 5, allowed 1..4"},
      {"m:1:ts-fp32", X({1, 3}), "has shape [1,3], expected [-1,2]"},  // an explicit variant
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.model + ": " + c.message);
    auto a = Infer(c.model, c.x);
    ASSERT_TRUE(a->answered());
    EXPECT_EQ(a->get().status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(a->get().status().message().find(c.message), std::string::npos)
        << a->get().status().message();
  }
  EXPECT_TRUE(worker_.actions().empty());
  EXPECT_TRUE(worker_.executed().empty());
  EXPECT_EQ(Arrivals("m"), 0);
}

TEST_F(RouterTest, UnknownModelOrVersionIsNotFound) {
  Publish(Model("m"));
  auto a = Infer("ghost");
  ASSERT_TRUE(a->answered());
  EXPECT_EQ(a->get().status().code(), StatusCode::kNotFound);
  EXPECT_EQ(a->get().status().message(), "unknown model 'ghost'");
  a = Infer("m", X(), "7");
  ASSERT_TRUE(a->answered());
  EXPECT_EQ(a->get().status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(worker_.actions().empty());
}

TEST_F(RouterTest, AnotherTenantsPrivateModelIsUnknownByNameAndNeverATaskCandidate) {
  auto owned = std::make_shared<VersionRecord>(*Model("p"));
  owned->config.owner_tenant = "a";
  owned->config.task = "classification/private";
  Publish(owned);
  auto ask = [&](const std::string& tenant, const std::string& model, const std::string& task) {
    InferenceRequest r;
    r.model_name = model;
    r.task = task;
    r.inputs.push_back(X());
    r.caller = Caller{true, "id", tenant, false};
    auto answer = std::make_shared<Answer>();
    router_.Infer(std::move(r), [answer](StatusOr<InferenceResponse> res) { answer->result = std::move(res); });
    return answer;
  };
  auto by_name = ask("b", "p", "");
  ASSERT_TRUE(by_name->answered());
  EXPECT_EQ(by_name->get().status().code(), StatusCode::kNotFound);
  EXPECT_EQ(by_name->get().status().message(), "unknown model 'p'");
  auto by_task = ask("b", "", "classification/private");
  ASSERT_TRUE(by_task->answered());
  EXPECT_EQ(by_task->get().status().message(),
            "no loaded model serves task 'classification/private'");
  // The owner's task query has the model as a candidate (and no profiles:
  // the selector, not the candidate filter, answers).
  auto own_task = ask("a", "", "classification/private");
  ASSERT_TRUE(own_task->answered());
  EXPECT_NE(own_task->get().status().message(),
            "no loaded model serves task 'classification/private'");
  bool logged_for_a = false;
  for (const DecisionRecord& d : router_.RecentDecisions(100)) {
    logged_for_a |= d.target == "task:classification/private" && d.tenant == "a";
  }
  EXPECT_TRUE(logged_for_a);
  EXPECT_TRUE(worker_.actions().empty());
}

TEST_F(RouterTest, ColdQueryAsksForOneLoadAndRunsOnceItIsUp) {
  Publish(Model("m"));
  auto a = Infer("m");
  EXPECT_FALSE(a->answered());  // Infer returned; the query waits for the load
  const auto actions = worker_.actions();
  ASSERT_EQ(actions.size(), 1u);
  EXPECT_EQ(actions[0].action.kind, cluster::Action::kLoad);
  EXPECT_EQ(cluster::GroupLabel(actions[0].action), Label("m"));
  EXPECT_EQ(actions[0].action.replicas, 1);  // the configured instance count
  EXPECT_TRUE(actions[0].urgent);            // a query waits on it
  EXPECT_EQ(worker_.Held(), std::vector<std::string>{Label("m")});
  EXPECT_TRUE(worker_.executed().empty());

  ASSERT_TRUE(worker_.Complete(Label("m")));
  ASSERT_TRUE(a->answered());
  ASSERT_TRUE(a->get().ok()) << a->get().status().ToString();
  EXPECT_NE(std::get<std::string>(a->get()->parameters.at("somm_reason")).find("cold start"),
            std::string::npos);
  ASSERT_EQ(worker_.executed().size(), 1u);
  EXPECT_EQ(worker_.executed()[0].group, Label("m"));
  EXPECT_EQ(worker_.actions().size(), 1u);
}

TEST_F(RouterTest, InflightQueriesRiseWhileQueriesWaitAndFallToZeroOnceAnswered) {
  Publish(Model("m"));
  EXPECT_EQ(metrics_.inflight(), 0);
  auto first = Infer("m");  // both wait for the load
  auto second = Infer("m");
  EXPECT_FALSE(first->answered());
  EXPECT_EQ(metrics_.inflight(), 2);
  auto refused = Infer("m", X({1, 3}));  // answered at once: in flight only inside Infer
  ASSERT_TRUE(refused->answered());
  EXPECT_EQ(metrics_.inflight(), 2);
  ASSERT_TRUE(worker_.Complete(Label("m")));
  ASSERT_TRUE(first->answered());
  ASSERT_TRUE(second->answered());
  EXPECT_EQ(metrics_.inflight(), 0);
  auto failed = Infer("ghost");  // a failure is an answer too
  ASSERT_TRUE(failed->answered());
  EXPECT_EQ(metrics_.inflight(), 0);
}

TEST_F(RouterTest, LatencyReportedIsTheRoutersClockFromArrivalToAnswer) {
  Publish(Model("m"));
  auto a = Infer("m");
  clock_.Advance(std::chrono::milliseconds(7));  // the load takes 7 ms of the router's clock
  ASSERT_TRUE(worker_.Complete(Label("m")));
  ASSERT_TRUE(a->answered());
  ASSERT_TRUE(a->get().ok()) << a->get().status().ToString();
  EXPECT_EQ(std::get<double>(a->get()->parameters.at("somm_latency_ms")), 7.0);
  EXPECT_EQ(std::get<int64_t>(a->get()->parameters.at("somm_server_us")), 7000);
}

TEST_F(RouterTest, TwoQueriesWaitingForTheSameLoadShareIt) {
  Publish(Model("m", 10));
  auto first = Infer("m");
  auto second = Infer("m");
  EXPECT_FALSE(first->answered());
  EXPECT_FALSE(second->answered());
  // The second query finds the group loading (the store counts it from the
  // moment its load starts): no second placement, no eviction, one load.
  // (Its kLoad still reaches the worker, which joins it to the load under way.)
  EXPECT_EQ(worker_.loads_started(), 1);
  EXPECT_EQ(worker_.Held(), std::vector<std::string>{Label("m")});
  ASSERT_FALSE(worker_.actions().empty());
  for (const std::string& action : worker_.ActionLog()) EXPECT_EQ(action, "load " + Label("m"));

  ASSERT_TRUE(worker_.Complete(Label("m")));
  ASSERT_TRUE(first->answered());
  ASSERT_TRUE(second->answered());
  EXPECT_TRUE(first->get().ok()) << first->get().status().ToString();
  EXPECT_TRUE(second->get().ok()) << second->get().status().ToString();
  EXPECT_EQ(worker_.executed().size(), 2u);
  EXPECT_EQ(worker_.loads_started(), 1);
}

TEST_F(RouterTest, FailedLoadFailsTheQueriesWaitingOnItWithItsError) {
  Publish(Model("m"));
  auto first = Infer("m");
  auto second = Infer("m");
  ASSERT_TRUE(worker_.Complete(Label("m"), InvalidArgument("model 'm': corrupt file")));
  for (const auto& a : {first, second}) {
    ASSERT_TRUE(a->answered());
    EXPECT_EQ(a->get().status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(a->get().status().message(), "model 'm': corrupt file");
  }
  EXPECT_TRUE(worker_.executed().empty());
  EXPECT_TRUE(store_.Read()->groups.empty());
}

// A router with no repository wrote a registered model into its working
// directory, and the controller then answered that it did not know it.
TEST_F(RouterTest, ARouterWithoutARepositoryRefusesRegistrationAndWritesNothing) {
  RegistrationRequest r;
  r.name = "registered-nowhere";
  r.task = "classification/digits";
  r.inputs = {{"x", DataType::kFp32, {2}}};
  r.outputs = {{"y", DataType::kFp32, {2}}};
  r.max_batch_size = 8;
  r.model_bytes = "not read";
  const Status s = router_.RegisterModel(std::move(r));
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s.ToString();
  EXPECT_NE(s.message().find("no model repository"), std::string::npos) << s.message();
  EXPECT_FALSE(std::filesystem::exists("registered-nowhere"));
  EXPECT_FALSE(catalog_.Resolve("registered-nowhere", "").ok());
}

TEST_F(RouterTest, GroupGoneAtDispatchIsLoadedAgainAndTheQueryRetried) {
  VersionPtr v = Publish(Model("m"));
  worker_.AddGroup(v, kAsRegistered, Cpu1());
  // Unloaded a moment ago: the store still shows it, the worker answers NotFound.
  worker_.DropSilently(Label("m"));
  auto a = Infer("m");
  EXPECT_FALSE(a->answered());
  EXPECT_EQ(worker_.ActionLog(), std::vector<std::string>{"load " + Label("m")});
  EXPECT_TRUE(worker_.executed().empty());
  ASSERT_TRUE(worker_.Complete(Label("m")));
  ASSERT_TRUE(a->answered());
  ASSERT_TRUE(a->get().ok()) << a->get().status().ToString();
  EXPECT_EQ(worker_.executed().size(), 1u);
}

// A budget that holds one of the two models.
class RouterEvictionTest : public RouterTest {
 protected:
  RouterEvictionTest() : RouterTest(100 * kMiB) {}
};

TEST_F(RouterEvictionTest, NeededLoadEvictsAnIdleGroupFirst) {
  VersionPtr a = Publish(Model("a", 60));
  Publish(Model("b", 60));
  worker_.AddGroup(a, kAsRegistered, Cpu1());
  auto q = Infer("b");
  EXPECT_FALSE(q->answered());
  EXPECT_EQ(worker_.ActionLog(),
            (std::vector<std::string>{"evict " + Label("a"), "load " + Label("b")}));
  const auto actions = worker_.actions();
  EXPECT_TRUE(actions[0].only_if_idle);  // never under a query in flight
  EXPECT_EQ(worker_.StateOf(Label("a")), "");
  ASSERT_TRUE(worker_.Complete(Label("b")));
  ASSERT_TRUE(q->answered());
  EXPECT_TRUE(q->get().ok()) << q->get().status().ToString();
}

// A router in zone "a" (cross-zone round trip 1.5 ms) in front of worker "a1"
// in zone a and worker "b1" in zone b.
class RouterZoneTest : public ::testing::Test {
 protected:
  RouterZoneTest() : a1_(store_, Worker("a1", "a")), b1_(store_, Worker("b1", "b")) {
    a1_.Publish();
    b1_.Publish();
  }

  static FakeWorkerStub::Options Worker(const std::string& id, const std::string& zone) {
    FakeWorkerStub::Options o;
    o.id = id;
    o.zone = zone;
    o.hold_loads = true;
    return o;
  }

  // m with the as-registered variant (1 ms at batch 1, 2 ms at batch 4) and
  // ts-fast (0.2 ms at any batch), both profiled on cpu1.
  VersionPtr PublishTwoVariants() {
    auto v = std::make_shared<VersionRecord>(*Model("m", 10));
    VariantProfile fast = v->profiles[0];
    fast.variant = "ts-fast";
    fast.hardware[0].latency = LatencyCurve::Fit({{1, 0.2}, {4, 0.2}});
    v->profiles.push_back(fast);
    catalog_.Publish("m", {v}, {});
    return v;
  }

  // Puts `worker`'s report into the store with `queued` queries waiting on
  // each of its groups (the fake itself reports none).
  void Queue(FakeWorkerStub& worker, int64_t queued) {
    cluster::WorkerReport r = worker.Report();
    for (auto& g : r.groups) g.queued = queued;
    store_.PutWorker(std::move(r));
  }

  StatusOr<InferenceResponse> Infer(const std::string& model, Parameters parameters = {}) {
    InferenceRequest r;
    r.model_name = model;
    r.id = "q";
    r.inputs.push_back(X());
    r.parameters = std::move(parameters);
    std::optional<StatusOr<InferenceResponse>> answer;
    router_.Infer(std::move(r), [&answer](StatusOr<InferenceResponse> res) { answer = std::move(res); });
    EXPECT_TRUE(answer.has_value()) << "not answered inside Infer";
    return answer.value_or(Unavailable("not answered"));
  }

  static std::string Param(const InferenceResponse& r, const std::string& key) {
    auto it = r.parameters.find(key);
    return it == r.parameters.end() ? "<absent>" : std::get<std::string>(it->second);
  }

  cluster::InMemoryClusterStateStore store_;
  FakeWorkerStub a1_;
  FakeWorkerStub b1_;
  ::somm::testing::FakeWorkerDirectory workers_{{&a1_, &b1_}};
  ModelCatalog catalog_{""};
  NullServingMetrics metrics_;
  DecisionLog log_{100};
  Controller controller_{ControllerOptions{}, catalog_, /*registrar=*/nullptr, store_, workers_, metrics_, log_};
  ManualClock clock_;
  Router router_{[this] {
                   RouterOptions o;
                   o.clock = &clock_;
                   o.zone = "a";
                   o.cross_zone_rtt_ms = 1.5;
                   return o;
                 }(),
                 catalog_, /*registrar=*/nullptr, store_, workers_, controller_, metrics_, log_};
};

TEST_F(RouterZoneTest, HolderInTheRoutersZoneIsPreferred) {
  VersionPtr v = PublishTwoVariants();
  a1_.AddGroup(v, kAsRegistered, Cpu1());
  b1_.AddGroup(v, kAsRegistered, Cpu1());
  for (int i = 0; i < 20; ++i) {
    auto r = Infer("m");
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(Param(*r, "somm_zone"), "a");
    EXPECT_EQ(Param(*r, "somm_zone_reason"), "same zone");
  }
  EXPECT_EQ(a1_.executed().size(), 20u);
  EXPECT_TRUE(b1_.executed().empty());
}

TEST_F(RouterZoneTest, AQueryARemoteWorkerRefusesGoesToAnotherHolderNeverBackNorToALoad) {
  VersionPtr v = PublishTwoVariants();
  a1_.SetRemote(true);
  b1_.SetRemote(true);
  a1_.AddGroup(v, kAsRegistered, Cpu1());
  b1_.AddGroup(v, kAsRegistered, Cpu1());
  a1_.Refuse(ResourceExhausted("cannot meet latency SLO on m:1#0: queue 3 queries"));
  // The router's zone holds it and refuses: zone b answers, with the inputs
  // the query kept.
  auto r = Infer("m");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Param(*r, "somm_zone"), "b");
  ASSERT_EQ(a1_.executed().size(), 1u);
  ASSERT_EQ(b1_.executed().size(), 1u);
  EXPECT_EQ(b1_.executed()[0].inputs.size(), 1u);
  EXPECT_EQ(r->outputs.at(0).data, X().data);
  // Both refuse: the answer is the refusal, each tried once, nothing loaded.
  b1_.Refuse(ResourceExhausted("queue is full (8 queries)"));
  r = Infer("m");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted) << r.status().ToString();
  EXPECT_EQ(a1_.executed().size(), 2u);
  EXPECT_EQ(b1_.executed().size(), 2u);
  EXPECT_TRUE(a1_.actions().empty());
  EXPECT_TRUE(b1_.actions().empty());
}

TEST_F(RouterZoneTest, HolderInAnotherZoneServesWhenNoneIsInTheZone) {
  VersionPtr v = PublishTwoVariants();
  b1_.AddGroup(v, kAsRegistered, Cpu1());
  auto r = Infer("m");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Param(*r, "somm_zone"), "b");
  EXPECT_EQ(Param(*r, "somm_zone_reason"), "no holder in zone a; cross-zone +1.5 ms");
  EXPECT_EQ(b1_.executed().size(), 1u);
  EXPECT_TRUE(a1_.actions().empty());  // nothing loaded in zone a for it
  // An explicit variant's decision log entry says where it went too.
  r = Infer("m:1:ts-fp32");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const auto logged = log_.Recent(1);
  ASSERT_EQ(logged.size(), 1u);
  EXPECT_NE(logged[0].reason.find("no holder in zone a; cross-zone +1.5 ms"), std::string::npos)
      << logged[0].reason;
}

TEST_F(RouterZoneTest, BusierZoneLosesOnlyByMoreThanTheRoundTrip) {
  VersionPtr v = PublishTwoVariants();
  a1_.AddGroup(v, kAsRegistered, Cpu1());
  b1_.AddGroup(v, kAsRegistered, Cpu1());
  // Two queries waiting in zone a predict a batch of two, 1.33 ms of queue:
  // less than the idle zone b's 0 ms plus the 1.5 ms round trip, so zone a
  // keeps it.
  Queue(a1_, 2);
  auto r = Infer("m");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Param(*r, "somm_zone"), "a");
  // Eight waiting predict two full batches, 4 ms: zone b serves sooner.
  Queue(a1_, 8);
  r = Infer("m");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Param(*r, "somm_zone"), "b");
  EXPECT_EQ(Param(*r, "somm_zone_reason"),
            "zone a busier: predicted queue 4.00 ms there, 0.00 ms in zone b; cross-zone +1.5 ms");
  EXPECT_EQ(a1_.executed().size(), 1u);
  EXPECT_EQ(b1_.executed().size(), 1u);
}

TEST_F(RouterZoneTest, RoundTripInThePredictionKeepsATightSloOffAGroupOnlyInAnotherZone) {
  VersionPtr v = PublishTwoVariants();
  a1_.AddGroup(v, kAsRegistered, Cpu1());  // 1 ms, here
  b1_.AddGroup(v, "ts-fast", Cpu1());      // 0.2 ms, plus 1.5 ms across zones
  // 1.1 ms: ts-fast would be 1.7 ms from zone a.
  auto r = Infer("m", {{"latency_slo_ms", 1.1}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Param(*r, "somm_variant"), "m:1:ts-fp32");
  EXPECT_EQ(Param(*r, "somm_zone"), "a");
  EXPECT_DOUBLE_EQ(std::get<double>(r->parameters.at("somm_predicted_latency_ms")), 1.0);
  // 2 ms leaves room for the round trip: the cheaper ts-fast, in zone b.
  r = Infer("m", {{"latency_slo_ms", 2.0}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Param(*r, "somm_variant"), "m:1:ts-fast");
  EXPECT_EQ(Param(*r, "somm_zone"), "b");
  EXPECT_DOUBLE_EQ(std::get<double>(r->parameters.at("somm_predicted_latency_ms")), 1.7);
  const auto logged = log_.Recent(1);
  ASSERT_EQ(logged.size(), 1u);
  EXPECT_NE(logged[0].reason.find("no holder in zone a"), std::string::npos) << logged[0].reason;
  EXPECT_EQ(a1_.executed().size(), 1u);
  EXPECT_EQ(b1_.executed().size(), 1u);
}

// ---- What a query pays (docs/selection.md) --------------------------------

// The model of Model(name, 1) whose profile says 1 us at any batch size:
// half what the fake worker's batches take (2 us), so the measured charge is
// twice the profiled one.
VersionPtr HalfAsFastAsMeasured(const std::string& name) {
  auto v = std::make_shared<VersionRecord>(*Model(name, 1.0));
  v->profiles[0].hardware[0].latency = LatencyCurve::Fit({{1, 0.001}, {4, 0.001}});
  return v;
}

std::shared_ptr<Answer> InferWithMaxCost(Router& router, const std::string& model, double max_cost) {
  InferenceRequest r;
  r.model_name = model;
  r.id = "q";
  r.inputs.push_back(X());
  r.parameters["max_cost"] = max_cost;
  auto answer = std::make_shared<Answer>();
  router.Infer(std::move(r), [answer](StatusOr<InferenceResponse> res) { answer->result = std::move(res); });
  return answer;
}

TEST_F(RouterTest, PredictedAndReportedCostFollowOneRuleAndTheCeilingBoundsTheReport) {
  VersionPtr v = Publish(HalfAsFastAsMeasured("m"));
  worker_.AddGroup(v, kAsRegistered, Cpu1());
  const double usd_per_s = PriceList().PerSecond(Cpu1());
  const double profiled = QueryChargeUsd(usd_per_s, 0.001, 1, 1);
  const double measured = QueryChargeUsd(usd_per_s, 0.002, 1, 1);
  auto cost = [](Answer& a, const char* key) { return std::get<double>(a.get()->parameters.at(key)); };

  // Nothing measured yet: admitted on the profile's charge, measured at twice
  // that, reported at the ceiling it agreed to.
  auto first = InferWithMaxCost(router_, "m", 1.5 * profiled);
  ASSERT_TRUE(first->answered());
  ASSERT_TRUE(first->get().ok()) << first->get().status().ToString();
  EXPECT_DOUBLE_EQ(cost(*first, "somm_predicted_cost_usd"), profiled);
  EXPECT_DOUBLE_EQ(cost(*first, "somm_cost_usd"), 1.5 * profiled);
  EXPECT_TRUE(std::get<bool>(first->get()->parameters.at("somm_cost_capped")));
  EXPECT_EQ(metrics_.cost_over_max(), 1);

  // Enough measured batches teach the prediction (CostCalibration): the
  // same ceiling is now refused.
  for (int i = 1; i < CostCalibration::Options().min_batches; ++i) {
    auto a = InferWithMaxCost(router_, "m", 1.0);
    ASSERT_TRUE(a->answered() && a->get().ok());
  }
  auto second = InferWithMaxCost(router_, "m", 1.5 * profiled);
  ASSERT_TRUE(second->answered());
  EXPECT_EQ(second->get().status().code(), StatusCode::kResourceExhausted)
      << second->get().status().ToString();

  // And a ceiling above it is predicted and reported at the same charge.
  auto third = InferWithMaxCost(router_, "m", 3 * profiled);
  ASSERT_TRUE(third->answered());
  ASSERT_TRUE(third->get().ok()) << third->get().status().ToString();
  EXPECT_DOUBLE_EQ(cost(*third, "somm_predicted_cost_usd"), measured);
  EXPECT_DOUBLE_EQ(cost(*third, "somm_cost_usd"), measured);
  EXPECT_EQ(third->get()->parameters.count("somm_cost_capped"), 0u);
  EXPECT_EQ(metrics_.cost_over_max(), 1);  // the first query's, no other
}

// Issue #43: the first queries after a load were predicted at the profile
// alone (the router had measured none of their batches yet) and reported at
// many times that. What the instances measured when they loaded is the prior.
TEST_F(RouterTest, FirstQueryAfterALoadIsPredictedAtWhatItsInstancesMeasuredLoading) {
  VersionPtr v = Publish(HalfAsFastAsMeasured("m"));
  worker_.AddGroup(v, kAsRegistered, Cpu1());
  worker_.SetWarmOverheadMs(0.001);  // 2 us a batch at load, against a 1 us profile
  const double measured = QueryChargeUsd(PriceList().PerSecond(Cpu1()), 0.002, 1, 1);
  auto a = InferWithMaxCost(router_, "m", 1.0);
  ASSERT_TRUE(a->answered());
  ASSERT_TRUE(a->get().ok()) << a->get().status().ToString();
  EXPECT_DOUBLE_EQ(std::get<double>(a->get()->parameters.at("somm_predicted_cost_usd")), measured);
  EXPECT_DOUBLE_EQ(std::get<double>(a->get()->parameters.at("somm_cost_usd")), measured);
}

TEST_F(RouterTest, AnAnswerWhoseMeasuredCostRanOverMaxCostSaysByHowMuchAndWhy) {
  VersionPtr v = Publish(HalfAsFastAsMeasured("m"));
  worker_.AddGroup(v, kAsRegistered, Cpu1());
  const double usd_per_s = PriceList().PerSecond(Cpu1());
  const double profiled = QueryChargeUsd(usd_per_s, 0.001, 1, 1);
  const double measured = QueryChargeUsd(usd_per_s, 0.002, 1, 1);
  auto a = InferWithMaxCost(router_, "m", 1.5 * profiled);
  ASSERT_TRUE(a->answered());
  ASSERT_TRUE(a->get().ok()) << a->get().status().ToString();
  const auto& p = a->get()->parameters;
  EXPECT_DOUBLE_EQ(std::get<double>(p.at("somm_cost_usd")), 1.5 * profiled);
  EXPECT_DOUBLE_EQ(std::get<double>(p.at("somm_measured_cost_usd")), measured);
  const std::string why = std::get<std::string>(p.at("somm_cost_over_reason"));
  EXPECT_NE(why.find("over max_cost"), std::string::npos) << why;
  EXPECT_NE(why.find("took 0.002 ms where 0.001 ms was predicted"), std::string::npos) << why;
  const auto logged = log_.Recent(1);
  ASSERT_EQ(logged.size(), 1u);
  EXPECT_EQ(logged[0].status, "OK; " + why);
  EXPECT_EQ(metrics_.cost_over_max(), 1);  // somm_cost_over_max_total
}

}  // namespace
}  // namespace somm
