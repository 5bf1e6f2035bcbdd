#include "rollout/rollout_policy.h"

#include <gtest/gtest.h>

namespace somm {
namespace {

Rollout Canary(int percent = 10) {
  Rollout r;
  r.model = "m";
  r.stable_version = 1;
  r.canary_version = 2;
  r.percent = percent;
  return r;
}

VersionWindow Window(int64_t answered, double mean_ms, int64_t failed = 0) {
  VersionWindow w;
  w.answered = answered;
  w.failed = failed;
  w.latency_ms_sum = mean_ms * static_cast<double>(answered);
  return w;
}

using Kind = RolloutDecision::Kind;

TEST(RolloutPolicyTest, AGoodCanaryAdvancesThroughItsStepsToPromotion) {
  Rollout r = Canary(10);
  RolloutDecision d = DecideRollout(r, Window(500, 2.0), Window(60, 2.1), 6);
  EXPECT_EQ(d.kind, Kind::kAdvance) << d.reason;
  EXPECT_EQ(d.percent, 25);
  r.percent = 50;
  d = DecideRollout(r, Window(500, 2.0), Window(60, 2.1), 6);
  EXPECT_EQ(d.kind, Kind::kPromote) << d.reason;
  EXPECT_EQ(d.percent, 100);
  EXPECT_NE(d.reason.find("promoted"), std::string::npos);
}

TEST(RolloutPolicyTest, AStepHoldsUntilItHasEnoughQueriesAndTime) {
  Rollout r = Canary();
  EXPECT_EQ(DecideRollout(r, Window(500, 2), Window(49, 2), 60).kind, Kind::kHold);
  EXPECT_EQ(DecideRollout(r, Window(500, 2), Window(500, 2), 4.9).kind, Kind::kHold);
  r.automatic = false;
  const RolloutDecision d = DecideRollout(r, Window(500, 2), Window(500, 2), 60);
  EXPECT_EQ(d.kind, Kind::kHold);
  EXPECT_NE(d.reason.find("manual"), std::string::npos);
}

TEST(RolloutPolicyTest, ASlowerCanaryRollsBackOnceJudged) {
  Rollout r = Canary();
  // 19 answers: not judged yet, however slow.
  EXPECT_EQ(DecideRollout(r, Window(500, 2), Window(19, 50), 1).kind, Kind::kHold);
  const RolloutDecision d = DecideRollout(r, Window(500, 2), Window(20, 50), 1);
  EXPECT_EQ(d.kind, Kind::kRollBack);
  EXPECT_EQ(d.percent, 0);
  EXPECT_NE(d.reason.find("mean latency"), std::string::npos) << d.reason;
  // Slower by a ratio but within the floor: noise on a fast model.
  EXPECT_NE(DecideRollout(r, Window(500, 0.2), Window(60, 0.6), 1).kind, Kind::kRollBack);
}

TEST(RolloutPolicyTest, ACanaryThatFailsMoreRollsBack) {
  Rollout r = Canary();
  const RolloutDecision d = DecideRollout(r, Window(500, 2, 1), Window(18, 2, 2), 1);
  EXPECT_EQ(d.kind, Kind::kRollBack);
  EXPECT_NE(d.reason.find("failed 2 of 20"), std::string::npos) << d.reason;
  // The stable version fails as often: not the canary's fault.
  EXPECT_NE(DecideRollout(r, Window(450, 2, 50), Window(54, 2, 6), 1).kind, Kind::kRollBack);
}

TEST(RolloutPolicyTest, LowerHeldOutAccuracyRollsBackAtOnceAndUnknownIsWaitedFor) {
  Rollout r = Canary();
  VersionWindow stable = Window(0, 0);
  VersionWindow canary = Window(0, 0);
  stable.accuracy = 0.97;
  RolloutDecision d = DecideRollout(r, stable, Window(500, 2), 60);
  EXPECT_EQ(d.kind, Kind::kHold);
  EXPECT_NE(d.reason.find("waiting"), std::string::npos) << d.reason;
  canary.accuracy = 0.10;
  d = DecideRollout(r, stable, canary, 0);
  EXPECT_EQ(d.kind, Kind::kRollBack);
  EXPECT_NE(d.reason.find("held-out top-1 0.1000"), std::string::npos) << d.reason;
  canary.accuracy = 0.965;  // within the 0.01 drop
  EXPECT_NE(DecideRollout(r, stable, canary, 0).kind, Kind::kRollBack);
}

TEST(RolloutPolicyTest, AnUnprofiledVersionIsWaitedForButStillRolledBackWhenSlow) {
  Rollout r = Canary();
  VersionWindow canary = Window(500, 2);
  canary.profiled = false;
  RolloutDecision d = DecideRollout(r, Window(500, 2), canary, 60);
  EXPECT_EQ(d.kind, Kind::kHold);
  EXPECT_NE(d.reason.find("v2's variants"), std::string::npos) << d.reason;
  canary = Window(500, 50);
  canary.profiled = false;
  EXPECT_EQ(DecideRollout(r, Window(500, 2), canary, 60).kind, Kind::kRollBack);
}

TEST(RolloutPolicyTest, ShadowDisagreementRollsBackAndAgreementGoesLive) {
  Rollout r = Canary(100);
  r.mode = Rollout::Mode::kShadow;
  VersionWindow canary = Window(60, 2);
  canary.compared = 60;
  canary.disagreed = 5;
  RolloutDecision d = DecideRollout(r, Window(60, 2), canary, 10);
  EXPECT_EQ(d.kind, Kind::kRollBack);
  EXPECT_NE(d.reason.find("5 of 60"), std::string::npos) << d.reason;
  canary.disagreed = 0;
  d = DecideRollout(r, Window(60, 2), canary, 10);
  EXPECT_EQ(d.kind, Kind::kAdvance) << d.reason;
  EXPECT_EQ(d.mode, Rollout::Mode::kSplit);
  EXPECT_EQ(d.percent, 10);
}

TEST(RolloutPolicyTest, FinishedRolloutsAreNotJudged) {
  Rollout r = Canary();
  r.state = Rollout::State::kRolledBack;
  EXPECT_EQ(DecideRollout(r, Window(500, 2), Window(500, 90), 60).kind, Kind::kHold);
}

}  // namespace
}  // namespace somm
