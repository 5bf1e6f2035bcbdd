#include "pipeline/cascade.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "pipeline/builtin_steps.h"

namespace somm::pipeline {
namespace {

TEST(CascadeTest, ConfidenceIsTheSoftmaxTopOneOrItsMargin) {
  // Softmax of [ln 3, 0] is [0.75, 0.25].
  const float logits[] = {std::log(3.0f), 0.0f, 0.0f, 0.0f};
  const auto top = Confidences(Confidence::kTopProbability, logits, 2, 2);
  const auto margin = Confidences(Confidence::kMargin, logits, 2, 2);
  ASSERT_EQ(top.size(), 2u);
  EXPECT_NEAR(top[0], 0.75, 1e-6);
  EXPECT_NEAR(margin[0], 0.5, 1e-6);
  EXPECT_NEAR(top[1], 0.5, 1e-6);  // a tie
  EXPECT_NEAR(margin[1], 0.0, 1e-6);
  const float hostile[] = {NAN, 1.0f, INFINITY, 0.0f};
  EXPECT_EQ(Confidences(Confidence::kTopProbability, hostile, 2, 2), (std::vector<double>{0, 0}));
}

// Ten samples: the cheap stage is right exactly on those it is at least
// 0.5 confident in; the second stage is right on all but sample 0.
struct TwoStages {
  std::vector<std::vector<double>> confidence = {
      {0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1, 0.95}};
  std::vector<std::vector<bool>> correct = {
      {true, true, true, true, true, false, false, false, false, true},
      {false, true, true, true, true, true, true, true, true, true}};
};

TEST(CascadeTest, ChoosesTheLowestEscalationThatMeetsTheAccuracy) {
  const TwoStages d;
  // 0.9 needs 3 of the 4 wrong ones sent on: those below 0.35.
  auto f = ChooseThreshold(d.confidence, d.correct, 0.9);
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_NEAR(f->threshold, 0.35, 1e-12);
  EXPECT_NEAR(f->accuracy, 0.9, 1e-12);
  EXPECT_NEAR(f->reach[1], 0.3, 1e-12);
  EXPECT_EQ(f->answered, (std::vector<int64_t>{7, 3}));
  // All of them: better than the second stage alone (0.9).
  f = ChooseThreshold(d.confidence, d.correct, 1.0);
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_NEAR(f->threshold, 0.45, 1e-12);
  EXPECT_NEAR(f->accuracy, 1.0, 1e-12);
  EXPECT_NEAR(f->reach[1], 0.4, 1e-12);
  // The cheap stage alone meets 0.6: nothing is sent on.
  f = ChooseThreshold(d.confidence, d.correct, 0.6);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->reach[1], 0);
  EXPECT_EQ(Escalated(d.confidence[0], f->threshold), std::vector<int64_t>{});
  // The threshold sends on exactly the samples counted.
  f = ChooseThreshold(d.confidence, d.correct, 0.9);
  EXPECT_EQ(Escalated(d.confidence[0], f->threshold), (std::vector<int64_t>{6, 7, 8}));
}

TEST(CascadeTest, AnAccuracyNoThresholdMeetsIsRefused) {
  TwoStages d;
  d.correct[1].assign(10, false);
  auto f = ChooseThreshold(d.confidence, d.correct, 0.7);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(f.status().message().find("no threshold meets min_accuracy"), std::string::npos);
}

// The sweep against trying every cut by brute force, on random three-stage
// sets with ties.
TEST(CascadeTest, TheSweepAgreesWithTryingEveryThreshold) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> level(0, 9);
  std::bernoulli_distribution coin(0.6);
  for (int trial = 0; trial < 200; ++trial) {
    const size_t n = 1 + static_cast<size_t>(trial % 23);
    std::vector<std::vector<double>> conf(2, std::vector<double>(n));
    std::vector<std::vector<bool>> correct(3, std::vector<bool>(n));
    for (size_t s = 0; s < n; ++s) {
      for (auto& row : conf) row[s] = level(rng) / 10.0;
      for (auto& row : correct) row[s] = coin(rng);
    }
    const double want = std::uniform_real_distribution<double>(0.3, 1.0)(rng);
    std::vector<double> cuts = {0};
    for (const auto& row : conf) {
      for (double c : row) cuts.push_back(c + 0.05);
    }
    std::sort(cuts.begin(), cuts.end());
    std::optional<CascadeFigures> best;
    for (double t : cuts) {
      CascadeFigures f = EvaluateThreshold(conf, correct, t);
      if (f.accuracy >= want - 1e-9) {
        best = f;
        break;
      }
    }
    auto got = ChooseThreshold(conf, correct, want);
    ASSERT_EQ(got.ok(), best.has_value()) << "trial " << trial;
    if (!best) continue;
    EXPECT_NEAR(got->accuracy, best->accuracy, 1e-12) << "trial " << trial;
    EXPECT_EQ(got->answered, best->answered) << "trial " << trial;
    // And the threshold it names does what it reports.
    const CascadeFigures again = EvaluateThreshold(conf, correct, got->threshold);
    EXPECT_EQ(again.answered, got->answered) << "trial " << trial;
  }
}

Tensor Rows(const std::vector<float>& values, int64_t rows) {
  Tensor t;
  t.name = "x";
  t.datatype = DataType::kFp32;
  t.shape = {rows, static_cast<int64_t>(values.size()) / rows};
  t.data.assign(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
  return t;
}

std::vector<float> Values(const Tensor& t) {
  std::vector<float> v(t.data.size() / 4);
  std::memcpy(v.data(), t.data.data(), t.data.size());
  return v;
}

TEST(CascadeTest, ASubBatchIsGatheredAndMergedBackInOrder) {
  const Tensor batch = Rows({0, 1, 10, 11, 20, 21, 30, 31}, 4);
  auto part = GatherRows(batch, {1, 3});
  ASSERT_TRUE(part.ok()) << part.status().message();
  EXPECT_EQ(part->shape, (Shape{2, 2}));
  EXPECT_EQ(Values(*part), (std::vector<float>{10, 11, 30, 31}));
  Tensor merged = batch;
  ASSERT_TRUE(ScatterRows(Rows({-1, -2, -3, -4}, 2), {1, 3}, &merged).ok());
  EXPECT_EQ(Values(merged), (std::vector<float>{0, 1, -1, -2, 20, 21, -3, -4}));
  // Out of order, out of range, or the wrong row size: refused.
  EXPECT_FALSE(GatherRows(batch, {3, 1}).ok());
  EXPECT_FALSE(GatherRows(batch, {4}).ok());
  EXPECT_FALSE(ScatterRows(Rows({1, 2, 3}, 1), {0}, &merged).ok());

  Tensor images;
  images.name = "image";
  images.datatype = DataType::kBytes;
  images.shape = {3, 1};
  images.data = JoinBytes({"a", "bb", "ccc"});
  auto picked = GatherRows(images, {0, 2});
  ASSERT_TRUE(picked.ok());
  EXPECT_EQ(picked->shape, (Shape{2, 1}));
  EXPECT_EQ(picked->data, JoinBytes({"a", "ccc"}));
}

}  // namespace
}  // namespace somm::pipeline
