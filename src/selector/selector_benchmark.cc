// Per-decision cost of SelectVariant on a cluster-sized state.
//
// The state: `candidates` (variant, hardware) pairs spread over models of 20
// pairs each (5 variants x cpu1/cpu2/cpu4/cuda0), 10 models per task, with
// curves, load times and accuracies drawn from a fixed seed; about 5% are
// unusable and 5% have no accuracy data. `instances` loaded instances are
// spread over the usable candidates with random backlogs (0-20 ms busy, 0-64
// queued samples). Requirement shapes: model-level with an SLO and a floor,
// task-level, model-level with a cost ceiling, infeasible (an error), and
// infeasible best-effort.
//
// Each decision is timed with steady_clock; p50/p99/p999/max are reported as
// counters in microseconds next to Google Benchmark's own mean.
//
//   selector_benchmark --benchmark_min_time=2
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>
#include <vector>

#include "selector/selector.h"

namespace somm {
namespace {

enum Shape : int64_t { kMix = 0, kModel = 1, kTask = 2, kCost = 3, kInfeasible = 4, kBestEffort = 5 };

constexpr int kVariantsPerModel = 5;
constexpr int kModelsPerTask = 10;
const char* const kVariantNames[kVariantsPerModel] = {"ts-fp32", "ts-opt", "ts-int8", "ts-fp16",
                                                       "ts-bf16"};
// Relative speed and accuracy loss of each variant against fp32.
constexpr double kVariantSpeed[kVariantsPerModel] = {1.0, 0.8, 0.55, 0.7, 0.75};
constexpr double kVariantAccuracyLoss[kVariantsPerModel] = {0, 0, 0.012, 0.002, 0.004};

const HardwareConfig kHardware[4] = {
    {DeviceKind::kCpu, 0, 1}, {DeviceKind::kCpu, 0, 2}, {DeviceKind::kCpu, 0, 4},
    {DeviceKind::kCuda, 0, 1}};
// Intercept and slope factors against cpu1: threads help the slope more than
// the intercept; the GPU has a launch floor and a flat slope.
constexpr double kHwIntercept[4] = {1.0, 0.7, 0.5, 0.3};
constexpr double kHwSlope[4] = {1.0, 0.55, 0.3, 0.02};

std::string ModelName(int m) { return "model-" + std::to_string(m); }
std::string TaskName(int t) { return "task-" + std::to_string(t); }

struct World {
  SelectorState state;
  cluster::TimePoint now;
  int models = 0;
};

World MakeWorld(int candidates, int instances, uint32_t seed) {
  World w;
  w.now = Clock::Real().Now();
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u01(0, 1);
  const int per_model = kVariantsPerModel * 4;
  w.models = std::max(1, candidates / per_model);
  for (int i = 0; i < candidates; ++i) {
    const int m = i / per_model % w.models;
    const int v = i % per_model / 4;
    const int h = i % 4;
    // Per-model draws come from a generator seeded by the model, so every
    // pair of one model shares its base latency and accuracy.
    std::mt19937 model_rng(seed * 7919u + static_cast<uint32_t>(m));
    const double base_ms = 0.05 * std::pow(400.0, u01(model_rng));  // 0.05 .. 20 ms
    const double base_acc = 0.85 + 0.14 * u01(model_rng);
    Candidate c;
    c.model = ModelName(m);
    c.task = TaskName(m / kModelsPerTask);
    c.variant_id = c.model + ":1:" + kVariantNames[v];
    c.hardware = kHardware[h];
    c.latency.intercept_ms = base_ms * kVariantSpeed[v] * kHwIntercept[h];
    c.latency.slope_ms = 0.2 * base_ms * kVariantSpeed[v] * kHwSlope[h];
    c.load_time_ms = 50 + 1950 * u01(rng);
    c.max_batch_size = int64_t{8} << (i % 3);
    if (u01(rng) < 0.05) {
      c.accuracy.reset();
    } else {
      c.accuracy = base_acc - kVariantAccuracyLoss[v] - 0.003 * u01(rng);
    }
    c.usable = u01(rng) >= 0.05;
    w.state.candidates.push_back(std::move(c));
  }
  std::vector<size_t> usable;
  for (size_t i = 0; i < w.state.candidates.size(); ++i) {
    if (w.state.candidates[i].usable) usable.push_back(i);
  }
  std::uniform_int_distribution<size_t> pick(0, usable.size() - 1);
  for (int k = 0; k < instances; ++k) {
    InstanceState inst;
    inst.instance_id = k;
    inst.queued_samples = static_cast<int64_t>(64 * u01(rng));
    inst.busy_until = w.now + std::chrono::microseconds(static_cast<int64_t>(20000 * u01(rng)));
    w.state.candidates[usable[pick(rng)]].instances.push_back(inst);
  }
  return w;
}

Requirements MakeRequirements(Shape shape, const World& w, std::mt19937& rng) {
  std::uniform_real_distribution<double> u01(0, 1);
  std::uniform_int_distribution<int> model(0, w.models - 1);
  if (shape == kMix) {
    const double r = u01(rng);
    shape = r < 0.4 ? kModel : r < 0.7 ? kTask : r < 0.8 ? kCost : r < 0.9 ? kInfeasible : kBestEffort;
  }
  Requirements req;
  req.batch = 1 + static_cast<int64_t>(4 * u01(rng));
  switch (shape) {
    case kModel:
      req.model = ModelName(model(rng));
      req.latency_slo_ms = 5 + 95 * u01(rng);
      req.min_accuracy = 0.8 + 0.1 * u01(rng);
      break;
    case kTask:
      req.task = TaskName(model(rng) / kModelsPerTask);
      req.latency_slo_ms = 10 + 90 * u01(rng);
      req.min_accuracy = 0.85 + 0.1 * u01(rng);
      break;
    case kCost:
      req.model = ModelName(model(rng));
      req.max_cost_usd = 1e-8 * std::pow(100.0, u01(rng));
      break;
    case kInfeasible:
      req.model = ModelName(model(rng));
      req.latency_slo_ms = 0.001;
      break;
    case kBestEffort:
    case kMix:
      req.task = TaskName(model(rng) / kModelsPerTask);
      req.latency_slo_ms = 0.001;
      req.best_effort = true;
      break;
  }
  return req;
}

double Percentile(std::vector<double>& v, double q) {
  if (v.empty()) return 0;
  const size_t k = std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

void BM_SelectVariant(benchmark::State& bm) {
  const int candidates = static_cast<int>(bm.range(0));
  const int instances = static_cast<int>(bm.range(1));
  const Shape shape = static_cast<Shape>(bm.range(2));
  const World w = MakeWorld(candidates, instances, 42);
  std::mt19937 rng(7);
  std::vector<Requirements> reqs;
  for (int i = 0; i < 4096; ++i) reqs.push_back(MakeRequirements(shape, w, rng));
  const PriceList prices;

  std::vector<double> us;
  us.reserve(1 << 22);
  size_t i = 0, errors = 0;
  for (auto _ : bm) {
    const Requirements& req = reqs[i++ % reqs.size()];
    const auto t0 = std::chrono::steady_clock::now();
    auto d = SelectVariant(req, w.state, prices, w.now);
    const auto t1 = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(d);
    errors += d.ok() ? 0 : 1;
    us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  double sum = 0;
  for (double x : us) sum += x;
  bm.counters["mean_us"] = us.empty() ? 0 : sum / static_cast<double>(us.size());
  bm.counters["p50_us"] = Percentile(us, 0.50);
  bm.counters["p99_us"] = Percentile(us, 0.99);
  bm.counters["p999_us"] = Percentile(us, 0.999);
  bm.counters["max_us"] = us.empty() ? 0 : *std::max_element(us.begin(), us.end());
  bm.counters["error_frac"] =
      us.empty() ? 0 : static_cast<double>(errors) / static_cast<double>(us.size());
  bm.SetItemsProcessed(static_cast<int64_t>(bm.iterations()));
}

void Args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"candidates", "instances", "shape"});
  for (int64_t shape : {kMix, kModel, kTask, kCost, kInfeasible, kBestEffort}) {
    b->Args({1000, 100, shape});
  }
  // Fewer candidates, each with many instances.
  b->Args({100, 100, kMix});
  b->Args({100, 1000, kMix});
}

BENCHMARK(BM_SelectVariant)->Apply(Args)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace somm

BENCHMARK_MAIN();
