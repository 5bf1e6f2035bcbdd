#include "pipeline/slo_split.h"

#include <gtest/gtest.h>

namespace somm::pipeline {
namespace {

// A 2 ms built-in step, then two model steps, each with a quick and dear
// option and a slow and cheap one.
std::vector<SplitStep> TwoModels() {
  SplitStep decode;
  decode.fixed_ms = 2;
  SplitStep a{true, {{"a-quick", 2, 10}, {"a-cheap", 8, 2}}, 0};
  SplitStep b{true, {{"b-quick", 2, 10}, {"b-cheap", 6, 3}}, 0};
  return {decode, a, b};
}

// Within 12 ms both cheap options take 16: one of them must be quick. The
// cheapest such plan is a-cheap with b-quick (12, $12), not a-quick with
// b-cheap (10, $13); an equal split gives each model 5 ms and can afford
// only the quick options ($20).
TEST(SloSplitTest, CheapestPlanWithinTheSloBeatsTheEqualSplit) {
  const SplitPlan plan = PlanSplit(TwoModels(), 12);
  ASSERT_TRUE(plan.feasible) << plan.reason;
  EXPECT_EQ(plan.choice, (std::vector<int>{-1, 1, 0}));
  EXPECT_DOUBLE_EQ(plan.predicted_ms, 12);
  EXPECT_DOUBLE_EQ(plan.cost_usd, 12);
  EXPECT_EQ(plan.budget_ms, (std::vector<double>{2, 8, 2}));
  const SplitPlan equal = EqualSplit(TwoModels(), 12);
  ASSERT_TRUE(equal.feasible) << equal.reason;
  EXPECT_EQ(equal.choice, (std::vector<int>{-1, 0, 0}));
  EXPECT_DOUBLE_EQ(equal.cost_usd, 20);
  EXPECT_LT(plan.cost_usd, equal.cost_usd);
}

TEST(SloSplitTest, SlackIsSharedByPredictedLatency) {
  // Both cheap options fit in 20 ms (2 + 8 + 6 = 16): 4 ms of slack, 8:6.
  const SplitPlan plan = PlanSplit(TwoModels(), 20);
  ASSERT_TRUE(plan.feasible);
  EXPECT_EQ(plan.choice, (std::vector<int>{-1, 1, 1}));
  EXPECT_DOUBLE_EQ(plan.cost_usd, 5);
  ASSERT_EQ(plan.budget_ms.size(), 3u);
  EXPECT_DOUBLE_EQ(plan.budget_ms[1], 8 + 4 * 8.0 / 14);
  EXPECT_DOUBLE_EQ(plan.budget_ms[2], 6 + 4 * 6.0 / 14);
  EXPECT_NEAR(plan.budget_ms[0] + plan.budget_ms[1] + plan.budget_ms[2], 20, 1e-9);
}

TEST(SloSplitTest, NoPlanNamesTheQuickest) {
  const SplitPlan plan = PlanSplit(TwoModels(), 5);
  EXPECT_FALSE(plan.feasible);
  EXPECT_DOUBLE_EQ(plan.predicted_ms, 6);
  EXPECT_NE(plan.reason.find("the quickest takes 6 ms"), std::string::npos) << plan.reason;
  EXPECT_FALSE(EqualSplit(TwoModels(), 5).feasible);
  std::vector<SplitStep> none = TwoModels();
  none[2].options.clear();
  EXPECT_FALSE(PlanSplit(none, 100).feasible);
}

}  // namespace
}  // namespace somm::pipeline
