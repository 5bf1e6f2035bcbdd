#include "selector/selector.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace somm {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

// A fixed clock: the selector is pure, so no test sleeps or reads the time.
const cluster::TimePoint kNow = cluster::TimePoint(1000s);

// Round prices keep the expected costs readable: 1e-8 USD per cpu-thread-ms,
// 1e-7 USD per gpu-ms.
PriceList TestPrices() {
  PriceList p;
  p.cpu_thread_usd_per_s = 1e-5;
  p.gpu_usd_per_s = 1e-4;
  return p;
}

LatencyCurve Curve(double intercept_ms, double slope_ms) {
  LatencyCurve c;
  c.intercept_ms = intercept_ms;
  c.slope_ms = slope_ms;
  return c;
}

HardwareConfig Cpu(int threads) { return {DeviceKind::kCpu, 0, threads}; }
HardwareConfig Cuda(int index) { return {DeviceKind::kCuda, index, 1}; }

InstanceState Idle(int32_t id) { return {id, 0, kNow - 5ms}; }
InstanceState Busy(int32_t id, std::chrono::microseconds remaining, int64_t queued = 0) {
  return {id, queued, kNow + remaining};
}

// A loaded candidate by default (one idle instance); .instances.clear() makes
// it a candidate that needs loading.
Candidate Make(const std::string& model, const std::string& variant, std::optional<double> accuracy,
               LatencyCurve curve, HardwareConfig hw = Cpu(1), std::string task = "digits") {
  Candidate c;
  c.model = model;
  c.variant_id = model + ":1:" + variant;
  c.task = std::move(task);
  c.hardware = hw;
  c.accuracy = accuracy;
  c.latency = curve;
  c.load_time_ms = 100;
  c.max_batch_size = 8;
  c.instances = {Idle(static_cast<int32_t>(model.size() * 100 + variant.size()))};
  return c;
}

Requirements ForModel(const std::string& model) {
  Requirements r;
  r.model = model;
  return r;
}

StatusOr<Decision> Select(const Requirements& req, const SelectorState& state) {
  return SelectVariant(req, state, TestPrices(), kNow);
}

const std::string& ChosenVariant(const SelectorState& state, const StatusOr<Decision>& d) {
  return state.candidates[d.value().candidate].variant_id;
}

// ---- Rule 1: accuracy floor and usability --------------------------------

TEST(SelectorTest, NeverBelowMinAccuracyEvenWhenCheaperAndFaster) {
  SelectorState state;
  state.candidates.push_back(Make("digits-mlp", "ts-int8", 0.90, Curve(0.01, 0)));
  state.candidates.push_back(Make("digits-mlp", "ts-fp32", 0.97, Curve(1.0, 0.1)));
  Requirements req = ForModel("digits-mlp");
  req.min_accuracy = 0.95;
  auto d = Select(req, state);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(ChosenVariant(state, d), "digits-mlp:1:ts-fp32");

  // Without the floor the cheaper, faster int8 variant wins.
  req.min_accuracy.reset();
  d = Select(req, state);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(ChosenVariant(state, d), "digits-mlp:1:ts-int8");
}

TEST(SelectorTest, AccuracyExactlyAtFloorQualifies) {
  SelectorState state;
  state.candidates.push_back(Make("digits-mlp", "ts-fp32", 0.95, Curve(1.0, 0)));
  Requirements req = ForModel("digits-mlp");
  req.min_accuracy = 0.95;
  EXPECT_TRUE(Select(req, state).ok());
}

TEST(SelectorTest, UnknownAccuracyFailsAnyFloor) {
  SelectorState state;
  state.candidates.push_back(Make("digits-mlp", "ts-opt", std::nullopt, Curve(0.01, 0)));
  state.candidates.push_back(Make("digits-mlp", "ts-fp32", 0.5, Curve(1.0, 0)));
  Requirements req = ForModel("digits-mlp");
  req.min_accuracy = 0.1;
  auto d = Select(req, state);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(ChosenVariant(state, d), "digits-mlp:1:ts-fp32");
}

TEST(SelectorTest, UnknownAccuracyIsFineWithoutFloor) {
  SelectorState state;
  state.candidates.push_back(Make("digits-mlp", "ts-opt", std::nullopt, Curve(0.01, 0)));
  state.candidates.push_back(Make("digits-mlp", "ts-fp32", 0.97, Curve(1.0, 0)));
  auto d = Select(ForModel("digits-mlp"), state);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(ChosenVariant(state, d), "digits-mlp:1:ts-opt");
}

TEST(SelectorTest, UnusableVariantNeverChosen) {
  SelectorState state;
  state.candidates.push_back(Make("digits-mlp", "ts-int8", 0.99, Curve(0.01, 0)));
  state.candidates.back().usable = false;
  state.candidates.push_back(Make("digits-mlp", "ts-fp32", 0.97, Curve(1.0, 0)));
  Requirements req = ForModel("digits-mlp");
  req.best_effort = true;
  auto d = Select(req, state);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(ChosenVariant(state, d), "digits-mlp:1:ts-fp32");
}

// ---- Rule 2: predicted latency -------------------------------------------

TEST(SelectorTest, IdleInstancePredictsOneBatch) {
  SelectorState state;
  state.candidates.push_back(Make("digits-mlp", "ts-fp32", 0.97, Curve(1.0, 0.5)));
  Requirements req = ForModel("digits-mlp");
  req.batch = 4;
  auto d = Select(req, state);
  ASSERT_TRUE(d.ok());
  EXPECT_DOUBLE_EQ(d->predicted_latency_ms, 1.0 + 0.5 * 4);  // busy_until in the past: no wait
  EXPECT_EQ(d->outcome, DecisionOutcome::kLoadedInstance);
  EXPECT_EQ(d->instance_id, state.candidates[0].instances[0].instance_id);
}

TEST(SelectorTest, QueuedSamplesJoinTheNextBatch) {
  SelectorState state;
  state.candidates.push_back(Make("digits-mlp", "ts-fp32", 0.97, Curve(1.0, 0.5)));
  state.candidates[0].instances = {Busy(7, 2000us, /*queued=*/3)};
  auto d = Select(ForModel("digits-mlp"), state);
  ASSERT_TRUE(d.ok());
  // 2 ms until free, then one batch of 3 queued + 1.
  EXPECT_DOUBLE_EQ(d->predicted_latency_ms, 2.0 + (1.0 + 0.5 * 4));
  EXPECT_EQ(d->instance_id, 7);
}

TEST(SelectorTest, BacklogBeyondMaxBatchTakesSeveralBatches) {
  SelectorState state;
  state.candidates.push_back(Make("digits-mlp", "ts-fp32", 0.97, Curve(1.0, 0.5)));
  state.candidates[0].max_batch_size = 4;
  state.candidates[0].instances = {Busy(7, 0us, /*queued=*/10)};
  auto d = Select(ForModel("digits-mlp"), state);
  ASSERT_TRUE(d.ok());
  // 11 samples: two full batches of 4, then one of 3.
  EXPECT_DOUBLE_EQ(d->predicted_latency_ms, 2 * (1.0 + 0.5 * 4) + (1.0 + 0.5 * 3));
}

TEST(SelectorTest, BacklogShiftsChoiceToAnotherInstance) {
  SelectorState state;
  state.candidates.push_back(Make("digits-mlp", "ts-fp32", 0.97, Curve(1.0, 0)));
  state.candidates[0].instances = {Busy(1, 10ms, 20), Busy(2, 500us, 0), Busy(3, 3ms, 0)};
  auto d = Select(ForModel("digits-mlp"), state);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->instance_id, 2);
  EXPECT_DOUBLE_EQ(d->predicted_latency_ms, 0.5 + 1.0);
}

TEST(SelectorTest, BacklogShiftsChoiceToAnotherCandidate) {
  SelectorState state;
  state.candidates.push_back(Make("digits-mlp", "ts-int8", 0.97, Curve(0.5, 0)));
  state.candidates.push_back(Make("digits-mlp", "ts-fp32", 0.97, Curve(1.0, 0)));
  Requirements req = ForModel("digits-mlp");
  req.latency_slo_ms = 5;
  auto d = Select(req, state);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(ChosenVariant(state, d), "digits-mlp:1:ts-int8");

  // The cheap variant's only instance is 8 ms behind: past the SLO.
  state.candidates[0].instances = {Busy(1, 8ms, 4)};
  d = Select(req, state);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(ChosenVariant(state, d), "digits-mlp:1:ts-fp32");
}

TEST(SelectorTest, LoadTimeCountedForUnloadedCandidate) {
  SelectorState state;
  state.candidates.push_back(Make("digits-mlp", "ts-fp32", 0.97, Curve(1.0, 0.5)));
  state.candidates[0].instances.clear();
  state.candidates[0].load_time_ms = 40;
  auto d = Select(ForModel("digits-mlp"), state);
  ASSERT_TRUE(d.ok());
  EXPECT_DOUBLE_EQ(d->predicted_latency_ms, 40 + 1.5);
  EXPECT_EQ(d->outcome, DecisionOutcome::kNeedsLoad);
  EXPECT_EQ(d->instance_id, -1);
  EXPECT_THAT(d->reason, HasSubstr("needs load of 40 ms"));
}

TEST(SelectorTest, LoadTimeMakesUnloadedMissTheSlo) {
  SelectorState state;
  state.candidates.push_back(Make("digits-mlp", "ts-int8", 0.97, Curve(0.1, 0)));
  state.candidates[0].instances.clear();  // cheapest, but 100 ms to load
  state.candidates.push_back(Make("digits-mlp", "ts-fp32", 0.97, Curve(2.0, 0)));
  Requirements req = ForModel("digits-mlp");
  req.latency_slo_ms = 10;
  auto d = Select(req, state);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(ChosenVariant(state, d), "digits-mlp:1:ts-fp32");
  EXPECT_EQ(d->outcome, DecisionOutcome::kLoadedInstance);
}

TEST(SelectorTest, QueryLargerThanMaxBatchIsSplit) {
  SelectorState state;
  state.candidates.push_back(Make("digits-mlp", "ts-fp32", 0.97, Curve(1.0, 0.5)));
  state.candidates[0].max_batch_size = 8;
  state.candidates[0].instances.clear();
  state.candidates[0].load_time_ms = 10;
  Requirements req = ForModel("digits-mlp");
  req.batch = 20;
  auto d = Select(req, state);
  ASSERT_TRUE(d.ok());
  const double compute = 2 * (1.0 + 0.5 * 8) + (1.0 + 0.5 * 4);
  EXPECT_DOUBLE_EQ(d->predicted_latency_ms, 10 + compute);
  EXPECT_DOUBLE_EQ(d->cost_usd, 1e-8 * (compute + 10));
}

// ---- Rule 3: cost --------------------------------------------------------

TEST(SelectorTest, CostIsPriceTimesComputeOfThisQueryOnly) {
  SelectorState state;
  state.candidates.push_back(Make("digits-mlp", "ts-fp32", 0.97, Curve(1.0, 0.5), Cpu(4)));
  state.candidates[0].instances = {Busy(1, 3ms, 6)};
  Requirements req = ForModel("digits-mlp");
  req.batch = 2;
  auto d = Select(req, state);
  ASSERT_TRUE(d.ok());
  // 4 threads x 1e-8 USD/ms x (1 + 0.5 * 2) ms; the queue ahead is not paid for.
  EXPECT_DOUBLE_EQ(d->cost_usd, 4 * 1e-8 * 2.0);
  EXPECT_DOUBLE_EQ(d->predicted_latency_ms, 3 + (1.0 + 0.5 * 8));
}

TEST(SelectorTest, GpuUsesGpuPrice) {
  SelectorState state;
  state.candidates.push_back(Make("digits-mlp", "ts-fp16", 0.97, Curve(0.2, 0), Cuda(0)));
  auto d = Select(ForModel("digits-mlp"), state);
  ASSERT_TRUE(d.ok());
  EXPECT_DOUBLE_EQ(d->cost_usd, 1e-7 * 0.2);
}

TEST(SelectorTest, UnloadedPaysForLoadSoLoadedWinsNearTie) {
  SelectorState state;
  // Same hardware; the unloaded one computes 1% faster, but its load costs
  // 100 ms of hardware time.
  state.candidates.push_back(Make("digits-mlp", "ts-opt", 0.97, Curve(0.99, 0)));
  state.candidates[0].instances.clear();
  state.candidates.push_back(Make("digits-mlp", "ts-fp32", 0.97, Curve(1.0, 0)));
  auto d = Select(ForModel("digits-mlp"), state);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(ChosenVariant(state, d), "digits-mlp:1:ts-fp32");
  EXPECT_EQ(d->outcome, DecisionOutcome::kLoadedInstance);
}

// ---- Rule 4: cheapest feasible -------------------------------------------

TEST(SelectorTest, CheapestFeasibleWins) {
  SelectorState state;
  state.candidates.push_back(Make("digits-cnn", "ts-fp32", 0.99, Curve(4.0, 0), Cpu(1)));  // 4e-8
  state.candidates.push_back(Make("digits-cnn", "ts-fp32", 0.99, Curve(1.5, 0), Cpu(4)));  // 6e-8
  state.candidates.push_back(Make("digits-cnn", "ts-fp16", 0.99, Curve(0.2, 0), Cuda(0)));  // 2e-8
  auto d = Select(ForModel("digits-cnn"), state);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->candidate, 2u);

  // With the GPU 5 ms behind, a 3 ms SLO leaves only the 4-thread CPU: the
  // cheaper 1-thread CPU takes 4 ms.
  state.candidates[2].instances = {Busy(9, 5ms)};
  Requirements req = ForModel("digits-cnn");
  req.latency_slo_ms = 3;
  d = Select(req, state);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->candidate, 1u);

  // A backlog changes latency, not cost: without an SLO the busy GPU wins.
  d = Select(ForModel("digits-cnn"), state);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->candidate, 2u);
}

TEST(SelectorTest, EqualCostGoesToLowerLatency) {
  SelectorState state;
  state.candidates.push_back(Make("digits-mlp", "ts-a", 0.97, Curve(1.0, 0)));
  state.candidates[0].instances = {Busy(1, 2ms)};
  state.candidates.push_back(Make("digits-mlp", "ts-b", 0.97, Curve(1.0, 0)));
  state.candidates[1].instances = {Busy(2, 1ms)};
  auto d = Select(ForModel("digits-mlp"), state);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->candidate, 1u);
  EXPECT_EQ(d->instance_id, 2);
}

TEST(SelectorTest, MaxCostExcludesExpensiveCandidates) {
  SelectorState state;
  state.candidates.push_back(Make("digits-cnn", "ts-fp32", 0.99, Curve(4.0, 0), Cpu(1)));  // 4e-8
  state.candidates.push_back(Make("digits-cnn", "ts-fp16", 0.99, Curve(0.2, 0), Cuda(0)));  // 2e-8
  Requirements req = ForModel("digits-cnn");
  req.latency_slo_ms = 10;
  req.max_cost_usd = 5e-8;
  state.candidates[1].instances = {Busy(9, 20ms)};  // GPU too slow now
  auto d = Select(req, state);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->candidate, 0u);
}

TEST(SelectorTest, TaskLevelSelectionAcrossModels) {
  SelectorState state;
  state.candidates.push_back(Make("digits-cnn", "ts-fp32", 0.99, Curve(3.0, 0)));
  state.candidates.push_back(Make("digits-mlp", "ts-fp32", 0.97, Curve(0.5, 0)));
  state.candidates.push_back(Make("digits-logistic", "ts-fp32", 0.92, Curve(0.05, 0)));
  state.candidates.push_back(Make("resnet18", "ts-fp32", 0.99, Curve(0.01, 0), Cpu(1), "imagenet"));
  Requirements req;
  req.task = "digits";
  auto d = Select(req, state);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(ChosenVariant(state, d), "digits-logistic:1:ts-fp32");

  req.min_accuracy = 0.95;
  d = Select(req, state);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(ChosenVariant(state, d), "digits-mlp:1:ts-fp32");

  req.min_accuracy = 0.98;
  d = Select(req, state);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(ChosenVariant(state, d), "digits-cnn:1:ts-fp32");
}

TEST(SelectorTest, ModelLevelIgnoresOtherModelsOfTheTask) {
  SelectorState state;
  state.candidates.push_back(Make("digits-logistic", "ts-fp32", 0.92, Curve(0.05, 0)));
  state.candidates.push_back(Make("digits-mlp", "ts-fp32", 0.97, Curve(0.5, 0)));
  Requirements req = ForModel("digits-mlp");
  req.task = "digits";
  auto d = Select(req, state);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(ChosenVariant(state, d), "digits-mlp:1:ts-fp32");
}

TEST(SelectorTest, ReasonNamesRequirementsAndChoice) {
  SelectorState state;
  state.candidates.push_back(Make("digits-mlp", "ts-int8", 0.95, Curve(0.06, 0)));
  state.candidates[0].instances = {Idle(3)};
  Requirements req = ForModel("digits-mlp");
  req.min_accuracy = 0.9;
  req.latency_slo_ms = 5;
  auto d = Select(req, state);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->reason,
            "cheapest variant meeting min_accuracy=0.9 and latency_slo_ms=5: "
            "digits-mlp:1:ts-int8 on cpu1 (loaded instance 3, predicted 0.06 ms, 6e-10 USD)");

  d = Select(ForModel("digits-mlp"), state);
  ASSERT_TRUE(d.ok());
  EXPECT_THAT(d->reason, HasSubstr("cheapest variant for model 'digits-mlp': "));
}

// ---- Rule 5: errors and best effort --------------------------------------

TEST(SelectorTest, InvalidArgumentWithoutModelOrTask) {
  SelectorState state;
  state.candidates.push_back(Make("digits-mlp", "ts-fp32", 0.97, Curve(1.0, 0)));
  auto d = Select(Requirements{}, state);
  EXPECT_EQ(d.status().code(), StatusCode::kInvalidArgument);

  Requirements req = ForModel("digits-mlp");
  req.batch = 0;
  d = Select(req, state);
  EXPECT_EQ(d.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(d.status().message(), HasSubstr("batch"));
}

TEST(SelectorTest, NotFoundForUnknownModelOrTask) {
  SelectorState state;
  state.candidates.push_back(Make("digits-mlp", "ts-fp32", 0.97, Curve(1.0, 0)));
  auto d = Select(ForModel("nope"), state);
  EXPECT_EQ(d.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(d.status().message(), "no variant serves model 'nope'");

  Requirements req;
  req.task = "speech";
  req.best_effort = true;
  d = Select(req, state);
  EXPECT_EQ(d.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(d.status().message(), "no variant serves task 'speech'");
}

TEST(SelectorTest, FailedPreconditionNamesBestAccuracy) {
  SelectorState state;
  state.candidates.push_back(Make("digits-mlp", "ts-int8", 0.9612, Curve(0.5, 0)));
  state.candidates.push_back(Make("digits-mlp", "ts-fp32", 0.9733, Curve(1.0, 0)));
  state.candidates.push_back(Make("digits-mlp", "ts-bad", 0.999, Curve(1.0, 0)));
  state.candidates.back().usable = false;  // an unusable variant's accuracy is not offered
  Requirements req = ForModel("digits-mlp");
  req.min_accuracy = 0.99;
  req.best_effort = true;  // best effort never lowers the floor
  auto d = Select(req, state);
  EXPECT_EQ(d.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(d.status().message(),
            "cannot meet min_accuracy=0.99 for model 'digits-mlp': best usable variant reaches "
            "0.9733 (digits-mlp:1:ts-fp32)");
}

TEST(SelectorTest, FailedPreconditionWhenNoAccuracyKnown) {
  SelectorState state;
  state.candidates.push_back(Make("digits-mlp", "ts-opt", std::nullopt, Curve(0.5, 0)));
  Requirements req;
  req.task = "digits";
  req.min_accuracy = 0.5;
  auto d = Select(req, state);
  EXPECT_EQ(d.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(d.status().message(),
            "cannot meet min_accuracy=0.5 for task 'digits': no usable variant has a measured "
            "accuracy");
}

TEST(SelectorTest, FailedPreconditionWhenAllUnusable) {
  SelectorState state;
  state.candidates.push_back(Make("digits-mlp", "ts-int8", 0.97, Curve(0.5, 0)));
  state.candidates.push_back(Make("digits-mlp", "ts-fp16", 0.97, Curve(0.5, 0)));
  for (auto& c : state.candidates) c.usable = false;
  auto d = Select(ForModel("digits-mlp"), state);
  EXPECT_EQ(d.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(d.status().message(), HasSubstr("no usable variant for model 'digits-mlp'"));

  Requirements req = ForModel("digits-mlp");
  req.min_accuracy = 0.9;
  d = Select(req, state);
  EXPECT_EQ(d.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(d.status().message(), HasSubstr("cannot meet min_accuracy=0.9"));
  EXPECT_THAT(d.status().message(), HasSubstr("no usable variant"));
}

TEST(SelectorTest, ResourceExhaustedNamesBestLatency) {
  SelectorState state;
  state.candidates.push_back(Make("digits-logistic", "ts-opt", 0.92, Curve(0.05, 0)));
  state.candidates.push_back(Make("digits-logistic", "ts-fp32", 0.92, Curve(0.08, 0)));
  Requirements req = ForModel("digits-logistic");
  req.latency_slo_ms = 0.01;
  auto d = Select(req, state);
  EXPECT_EQ(d.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(d.status().message(),
            "cannot meet latency_slo_ms=0.01: best predicted 0.05 ms "
            "(digits-logistic:1:ts-opt on cpu1)");
}

TEST(SelectorTest, ResourceExhaustedNamesCheapestCost) {
  SelectorState state;
  state.candidates.push_back(Make("digits-logistic", "ts-opt", 0.92, Curve(0.031, 0)));
  state.candidates.push_back(Make("digits-logistic", "ts-fp32", 0.92, Curve(0.02, 0), Cpu(4)));
  Requirements req = ForModel("digits-logistic");
  req.max_cost_usd = 1e-12;
  auto d = Select(req, state);
  EXPECT_EQ(d.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(d.status().message(),
            "cannot meet max_cost=1e-12 USD: cheapest feasible costs 3.1e-10 USD "
            "(digits-logistic:1:ts-opt on cpu1)");
}

TEST(SelectorTest, CostErrorOnlyCountsCandidatesWithinSlo) {
  SelectorState state;
  state.candidates.push_back(Make("digits-cnn", "ts-fp32", 0.99, Curve(4.0, 0), Cpu(1)));  // 4e-8
  state.candidates.push_back(Make("digits-cnn", "ts-fp32", 0.99, Curve(1.5, 0), Cpu(4)));  // 6e-8
  Requirements req = ForModel("digits-cnn");
  req.latency_slo_ms = 2;
  req.max_cost_usd = 5e-8;
  auto d = Select(req, state);
  EXPECT_EQ(d.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(d.status().message(),
            "cannot meet max_cost=5e-08 USD: cheapest feasible costs 6e-08 USD "
            "(digits-cnn:1:ts-fp32 on cpu4)");
}

TEST(SelectorTest, BestEffortPicksLowestLatencyAboveTheFloor) {
  SelectorState state;
  state.candidates.push_back(Make("digits-mlp", "ts-int8", 0.90, Curve(0.02, 0)));
  state.candidates.push_back(Make("digits-mlp", "ts-fp32", 0.97, Curve(0.5, 0)));
  state.candidates.push_back(Make("digits-mlp", "ts-fp16", 0.97, Curve(0.1, 0), Cuda(0)));
  state.candidates.back().instances.clear();  // fast, but 100 ms away
  Requirements req = ForModel("digits-mlp");
  req.min_accuracy = 0.95;
  req.latency_slo_ms = 0.1;
  req.best_effort = true;
  auto d = Select(req, state);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->candidate, 1u);
  EXPECT_EQ(d->outcome, DecisionOutcome::kBestEffort);
  EXPECT_DOUBLE_EQ(d->predicted_latency_ms, 0.5);
  EXPECT_THAT(d->reason, HasSubstr("best effort, cannot meet latency_slo_ms=0.1"));
  EXPECT_THAT(d->reason, HasSubstr("digits-mlp:1:ts-fp32 on cpu1"));
}

TEST(SelectorTest, BestEffortWhenCostCeilingFails) {
  SelectorState state;
  state.candidates.push_back(Make("digits-mlp", "ts-fp32", 0.97, Curve(0.5, 0)));
  state.candidates.push_back(Make("digits-mlp", "ts-fp32", 0.97, Curve(0.3, 0), Cpu(2)));
  Requirements req = ForModel("digits-mlp");
  req.max_cost_usd = 1e-15;
  req.best_effort = true;
  auto d = Select(req, state);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->candidate, 1u);
  EXPECT_EQ(d->outcome, DecisionOutcome::kBestEffort);
  EXPECT_THAT(d->reason, HasSubstr("cannot meet max_cost=1e-15 USD"));
}

// ---- Zones: the cross-zone round trip ------------------------------------

// One loaded group of `variant` (one idle instance) on a worker of `zone`.
cluster::GroupState GroupIn(const std::string& zone, const std::string& variant, int64_t id) {
  cluster::GroupState g;
  g.worker = "w-" + zone + "-" + variant;
  g.zone = zone;
  g.model = "digits-mlp";
  g.variant = variant;
  g.hardware = Cpu(1);
  g.device = "cpu";
  g.instances = {Idle(static_cast<int32_t>(id))};
  return g;
}

// digits-mlp with two variants: ts-fast (0.2 ms) held only in zone b,
// ts-slow (0.6 ms) held in zone a.
cluster::ClusterState TwoZones() {
  cluster::ClusterState state;
  for (const auto& [variant, ms] : {std::pair{"ts-fast", 0.2}, std::pair{"ts-slow", 0.6}}) {
    cluster::VariantOption o;
    o.model = "digits-mlp";
    o.task = "digits";
    o.variant = variant;
    o.hardware = Cpu(1);
    o.device = "cpu";
    o.accuracy = 0.97;
    o.latency = Curve(ms, 0);
    o.max_batch = 8;
    state.options.push_back(o);
  }
  state.groups = {GroupIn("b", "ts-fast", 1), GroupIn("a", "ts-slow", 2)};
  return state;
}

TEST(SelectorTest, GroupHeldOnlyInAnotherZonePaysTheRoundTrip) {
  const cluster::ClusterState state = TwoZones();
  const SelectorState c = CandidatesFrom(state, ForModel("digits-mlp"), false, nullptr,
                                         RouterZone{"a", 1.0});
  ASSERT_EQ(c.candidates.size(), 2u);
  EXPECT_EQ(c.candidates[0].network_ms, 1.0);  // ts-fast: zone b only
  EXPECT_EQ(c.candidates[1].network_ms, 0.0);  // ts-slow: in zone a
  // Without a zone every group is near.
  const SelectorState flat = CandidatesFrom(state, ForModel("digits-mlp"), false);
  EXPECT_EQ(flat.candidates[0].network_ms, 0.0);
}

TEST(SelectorTest, TightSloAvoidsAGroupOnlyReachableAcrossZones) {
  const cluster::ClusterState state = TwoZones();
  Requirements req = ForModel("digits-mlp");
  req.latency_slo_ms = 1.0;  // ts-fast predicts 0.2 + 1.0 across zones; ts-slow 0.6 here
  const SelectorState far = CandidatesFrom(state, req, false, nullptr, RouterZone{"a", 1.0});
  auto d = Select(req, far);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(ChosenVariant(far, d), "digits-mlp:1:ts-slow");
  EXPECT_DOUBLE_EQ(d->predicted_latency_ms, 0.6);
  // A router in zone b reaches ts-fast at no extra cost: it is cheaper (less
  // compute), so it wins there, and its prediction carries no round trip.
  const SelectorState near = CandidatesFrom(state, req, false, nullptr, RouterZone{"b", 1.0});
  d = Select(req, near);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(ChosenVariant(near, d), "digits-mlp:1:ts-fast");
  EXPECT_DOUBLE_EQ(d->predicted_latency_ms, 0.2);
  // With room in the SLO, zone a takes the cheaper ts-fast across zones, and
  // the reason names the round trip.
  req.latency_slo_ms = 2.0;
  const SelectorState loose = CandidatesFrom(state, req, false, nullptr, RouterZone{"a", 1.0});
  d = Select(req, loose);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(ChosenVariant(loose, d), "digits-mlp:1:ts-fast");
  EXPECT_DOUBLE_EQ(d->predicted_latency_ms, 1.2);
  EXPECT_THAT(d->reason, HasSubstr("only in another zone: +1 ms round trip"));
}

TEST(SelectorTest, OutcomeNames) {
  EXPECT_STREQ(DecisionOutcomeName(DecisionOutcome::kLoadedInstance), "loaded_instance");
  EXPECT_STREQ(DecisionOutcomeName(DecisionOutcome::kNeedsLoad), "needs_load");
  EXPECT_STREQ(DecisionOutcomeName(DecisionOutcome::kBestEffort), "best_effort");
}

// ---- The charge rule: one formula for prediction and report ---------------

TEST(SelectorTest, PredictedChargeIsTheReportFormulaOnTheProfiledBatchAlone) {
  SelectorState state;
  state.candidates.push_back(Make("digits-mlp", "ts-fp32", 0.97, Curve(1.0, 0.5), Cpu(2)));
  state.candidates[0].instances = {Busy(1, 0ms, 5)};  // others queued: not the query's to pay
  Requirements req = ForModel("digits-mlp");
  req.batch = 3;
  auto d = Select(req, state);
  ASSERT_TRUE(d.ok());
  // What the router reports for a batch of the query's 3 samples alone that
  // took the profiled 2.5 ms.
  EXPECT_DOUBLE_EQ(d->charge_usd, QueryChargeUsd(TestPrices().PerSecond(Cpu(2)), 2.5, 3, 3));
  EXPECT_DOUBLE_EQ(d->cost_usd, d->charge_usd);
  // Sharing a larger batch only lowers the share (the intercept is shared).
  EXPECT_LT(QueryChargeUsd(TestPrices().PerSecond(Cpu(2)), 1.0 + 0.5 * 8, 3, 8), d->charge_usd);
}

TEST(SelectorTest, BatchOverheadMovesThePredictedChargeNotTheLatency) {
  SelectorState state;
  state.candidates.push_back(Make("digits-mlp", "ts-fp32", 0.97, Curve(1.0, 0)));
  state.candidates[0].batch_overhead_ms = 3;
  Requirements req = ForModel("digits-mlp");
  req.max_cost_usd = 3e-8;  // the profile's 1e-8 would pass; 1 + 3 ms does not
  EXPECT_EQ(Select(req, state).status().code(), StatusCode::kResourceExhausted);
  req.max_cost_usd = 5e-8;
  auto d = Select(req, state);
  ASSERT_TRUE(d.ok());
  EXPECT_DOUBLE_EQ(d->charge_usd, 4e-8);
  EXPECT_DOUBLE_EQ(d->predicted_latency_ms, 1.0);
  // A query of 20 samples at max batch 8 runs 3 batches: 3 overheads.
  req.max_cost_usd.reset();
  req.batch = 20;
  d = Select(req, state);
  ASSERT_TRUE(d.ok());
  EXPECT_DOUBLE_EQ(d->charge_usd, 1e-8 * (3 * 1.0 + 3 * 3));
}

TEST(SelectorTest, LoadIsRankedButNotCharged) {
  SelectorState state;
  state.candidates.push_back(Make("digits-mlp", "ts-fp32", 0.97, Curve(1.0, 0)));
  state.candidates[0].instances.clear();
  state.candidates[0].load_time_ms = 10;
  auto d = Select(ForModel("digits-mlp"), state);
  ASSERT_TRUE(d.ok());
  EXPECT_DOUBLE_EQ(d->charge_usd, 1e-8);
  EXPECT_DOUBLE_EQ(d->cost_usd, 1e-8 * 11);
}

}  // namespace
}  // namespace somm
