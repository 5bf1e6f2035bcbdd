// The worker on a machine of the test's making (common/env.h): its default
// memory budget and what it measures for an unprofiled load come from its
// Env, not from the machine the test runs on.
#include "worker/worker.h"
#include "runtime/testing/no_backend.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <map>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "metrics/serving_metrics.h"

namespace somm {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

class FixedEnv : public Env {
 public:
  const Clock& clock() const override { return Clock::Real(); }
  int64_t AvailableMemoryBytes() const override { return 8 * kGiB; }
  int64_t ResidentBytes() const override { return resident; }
  CpuFeatures DetectCpuFeatures() const override { return {}; }
  StatusOr<ProcessResult> RunProcess(const std::vector<std::string>&) const override {
    return Unimplemented("no processes here");
  }
  int64_t resident = kGiB;
};

using ::somm::testing::NoBackend;

TEST(WorkerEnvTest, DefaultBudgetIsHalfOfWhatItsEnvSaysIsAvailable) {
  FixedEnv env;
  NoBackend backend;
  NullServingMetrics metrics;
  WorkerOptions o;
  o.id = "w";
  o.env = &env;
  Worker worker(o, backend, metrics);
  EXPECT_EQ(worker.memory_budget_bytes(), 4 * kGiB);
  const cluster::WorkerReport report = worker.Report();
  ASSERT_EQ(report.devices.size(), 1u);
  EXPECT_EQ(report.devices[0].budget_bytes, 4 * kGiB);
  EXPECT_EQ(report.devices[0].worker, "w");
}

TEST(WorkerEnvTest, AnExplicitBudgetWins) {
  FixedEnv env;
  NoBackend backend;
  NullServingMetrics metrics;
  WorkerOptions o;
  o.env = &env;
  o.memory_budget_bytes = kGiB;
  Worker worker(o, backend, metrics);
  EXPECT_EQ(worker.memory_budget_bytes(), kGiB);
}

// A model whose first four runs take 20 ms and the rest 1 ms, as a fresh
// TorchScript module's profiling runs and cold caches make its first ones.
class SlowFirstRunsModel : public ExecutableModel {
 public:
  Status Execute(const std::vector<Tensor>& inputs, std::vector<Tensor>* outputs) override {
    std::this_thread::sleep_for(runs_++ < 4 ? std::chrono::milliseconds(20)
                                            : std::chrono::milliseconds(1));
    *outputs = inputs;
    (*outputs)[0].name = "y";
    return Status::Ok();
  }

 private:
  std::atomic<int> runs_{0};
};

class SlowFirstRunsBackend : public Backend {
 public:
  std::string Name() const override { return "slow-first-runs"; }
  std::vector<Device> Devices() const override { return {Device{}}; }
  StatusOr<std::unique_ptr<ExecutableModel>> Load(const LoadOptions&) override {
    return std::unique_ptr<ExecutableModel>(std::make_unique<SlowFirstRunsModel>());
  }
};

// Issue #43: the first query after a load paid for the model's first runs
// (reported at many times its predicted cost); the instance now runs them
// before it takes queries, and reports what a settled batch took beyond its
// profile for the router's first predictions.
TEST(WorkerLoadTest, FirstQueryAfterALoadDoesNotPayForTheModelsFirstRuns) {
  FixedEnv env;
  SlowFirstRunsBackend backend;
  NullServingMetrics metrics;
  WorkerOptions o;
  o.id = "w";
  o.env = &env;
  Worker worker(o, backend, metrics);
  const HardwareConfig cpu1{DeviceKind::kCpu, 0, 1};
  auto v = std::make_shared<VersionRecord>();
  v->config.name = "m";
  v->config.max_batch_size = 4;
  v->config.inputs = {{"x", DataType::kFp32, {2}}};
  v->config.outputs = {{"y", DataType::kFp32, {2}}};
  v->version = 1;
  v->version_str = "1";
  VariantProfile profile;
  profile.model = "m";
  profile.variant = "ts-fp32";
  HardwareProfile hp;
  hp.hardware = cpu1;
  hp.latency = LatencyCurve::Fit({{1, 0.5}, {4, 0.5}});
  profile.hardware = {hp};
  v->profiles = {profile};

  WorkerAction load;
  load.action.kind = cluster::Action::kLoad;
  load.action.model = "m";
  load.action.variant = "ts-fp32";
  load.action.hardware = cpu1;
  load.action.replicas = 1;
  load.version = v;
  load.urgent = true;
  std::promise<Status> loaded;
  worker.Apply(load, [&loaded](Status s) { loaded.set_value(std::move(s)); });
  const Status s = loaded.get_future().get();
  ASSERT_TRUE(s.ok()) << s.ToString();

  ExecuteRequest request;
  request.group = cluster::GroupLabel("m", 1, "ts-fp32", cpu1);
  Tensor x;
  x.name = "x";
  x.datatype = DataType::kFp32;
  x.shape = {1, 2};
  x.data.assign(8, '\0');
  request.inputs.push_back(std::move(x));
  std::promise<StatusOr<ExecuteResult>> answered;
  ASSERT_TRUE(worker.Execute(request, [&answered](StatusOr<ExecuteResult> r) {
                      answered.set_value(std::move(r));
                    }).ok());
  StatusOr<ExecuteResult> r = answered.get_future().get();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_LT(r->stats.compute_ns, 15'000'000) << "the first query ran one of the slow first runs";

  const cluster::WorkerReport report = worker.Report();
  ASSERT_EQ(report.groups.size(), 1u);
  // A settled run took 1 ms (and what sleeping adds), the profile says 0.5.
  EXPECT_GE(report.groups[0].warm_overhead_ms, 0.45);
  EXPECT_LT(report.groups[0].warm_overhead_ms, 15);
}

// A model that TorchScript-like specialises on each batch size it meets:
// the first two runs at a size take 20 ms, later ones 1 ms. It notes the
// thread and the size of every run, and the warm-up the backend was asked
// for on the loading thread.
class SlowFirstRunsPerSizeModel : public ExecutableModel {
 public:
  struct Log {
    std::mutex mu;
    std::map<int64_t, int> runs_by_size;
    std::vector<std::pair<std::thread::id, int64_t>> runs;  // thread, batch size
  };
  explicit SlowFirstRunsPerSizeModel(std::shared_ptr<Log> log) : log_(std::move(log)) {}
  Status Execute(const std::vector<Tensor>& inputs, std::vector<Tensor>* outputs) override {
    const int64_t size = inputs[0].shape[0];
    int before = 0;
    {
      std::lock_guard<std::mutex> lock(log_->mu);
      before = log_->runs_by_size[size]++;
      log_->runs.emplace_back(std::this_thread::get_id(), size);
    }
    std::this_thread::sleep_for(before < 2 ? std::chrono::milliseconds(20)
                                           : std::chrono::milliseconds(1));
    *outputs = inputs;
    (*outputs)[0].name = "y";
    return Status::Ok();
  }

 private:
  std::shared_ptr<Log> log_;
};

class SlowFirstRunsPerSizeBackend : public Backend {
 public:
  std::string Name() const override { return "slow-first-runs-per-size"; }
  std::vector<Device> Devices() const override { return {Device{}}; }
  StatusOr<std::unique_ptr<ExecutableModel>> Load(const LoadOptions& o) override {
    backend_runs = o.warmup_runs;
    backend_sizes = o.warmup_batch_sizes;
    return std::unique_ptr<ExecutableModel>(std::make_unique<SlowFirstRunsPerSizeModel>(log));
  }
  std::shared_ptr<SlowFirstRunsPerSizeModel::Log> log =
      std::make_shared<SlowFirstRunsPerSizeModel::Log>();
  int backend_runs = -2;
  std::vector<int64_t> backend_sizes{-1};
};

// Issue #43: model.yaml's `warmup` (Triton's model_warmup) did not govern
// the warm-up on the serving thread (eight runs at batch 1 whatever it
// said), so a query at a larger batch size still met the model's first,
// slow runs at that size. Its runs now happen there, at batch 1 and at each
// of its sizes, and the backend only checks the signature on the loading
// thread (the block is not run twice).
TEST(WorkerLoadTest, ModelYamlWarmupRunsOnTheServingThreadAtItsBatchSizes) {
  FixedEnv env;
  SlowFirstRunsPerSizeBackend backend;
  NullServingMetrics metrics;
  WorkerOptions o;
  o.id = "w";
  o.env = &env;
  Worker worker(o, backend, metrics);
  const HardwareConfig cpu1{DeviceKind::kCpu, 0, 1};
  auto v = std::make_shared<VersionRecord>();
  v->config.name = "m";
  v->config.max_batch_size = 4;
  v->config.inputs = {{"x", DataType::kFp32, {2}}};
  v->config.outputs = {{"y", DataType::kFp32, {2}}};
  v->config.warmup.runs = 3;
  v->config.warmup.batch_sizes = {1, 4, 16};  // 16: above max_batch_size, skipped
  v->version = 1;
  v->version_str = "1";
  VariantProfile profile;
  profile.model = "m";
  profile.variant = "ts-fp32";
  HardwareProfile hp;
  hp.hardware = cpu1;
  hp.latency = LatencyCurve::Fit({{1, 0.5}, {4, 0.5}});
  profile.hardware = {hp};
  v->profiles = {profile};

  WorkerAction load;
  load.action.kind = cluster::Action::kLoad;
  load.action.model = "m";
  load.action.variant = "ts-fp32";
  load.action.hardware = cpu1;
  load.action.replicas = 1;
  load.version = v;
  load.urgent = true;
  std::promise<Status> loaded;
  worker.Apply(load, [&loaded](Status s) { loaded.set_value(std::move(s)); });
  const Status s = loaded.get_future().get();
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(backend.backend_runs, 0) << "the backend runs only its signature check";
  EXPECT_TRUE(backend.backend_sizes.empty());
  {
    std::lock_guard<std::mutex> lock(backend.log->mu);
    EXPECT_EQ(backend.log->runs_by_size[1], 3);
    EXPECT_EQ(backend.log->runs_by_size[4], 3);
    EXPECT_EQ(backend.log->runs_by_size.count(16), 0u);
  }

  // A query of four samples, the size model.yaml named: warm.
  ExecuteRequest request;
  request.group = cluster::GroupLabel("m", 1, "ts-fp32", cpu1);
  Tensor x;
  x.name = "x";
  x.datatype = DataType::kFp32;
  x.shape = {4, 2};
  x.data.assign(32, '\0');
  request.inputs.push_back(std::move(x));
  std::promise<StatusOr<ExecuteResult>> answered;
  ASSERT_TRUE(worker.Execute(request, [&answered](StatusOr<ExecuteResult> r) {
                      answered.set_value(std::move(r));
                    }).ok());
  StatusOr<ExecuteResult> r = answered.get_future().get();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_LT(r->stats.compute_ns, 15'000'000) << "the query at batch 4 ran a first run at that size";
  std::lock_guard<std::mutex> lock(backend.log->mu);
  ASSERT_EQ(backend.log->runs.size(), 7u);
  for (const auto& [thread, size] : backend.log->runs) {
    EXPECT_EQ(thread, backend.log->runs.back().first) << "a warm-up run at batch " << size
                                                      << " ran off the serving thread";
  }
}

}  // namespace
}  // namespace somm
