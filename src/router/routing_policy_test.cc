#include "router/routing_policy.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

namespace somm {
namespace {

cluster::GroupState Holder(const std::string& worker, int queued, int replicas = 1) {
  cluster::GroupState g;
  g.worker = worker;
  g.queued = queued;
  g.replicas = replicas;
  return g;
}

// Predicted wait: 2 ms per query queued per replica, as a profile would.
double Wait(const cluster::GroupState& g) { return 2.0 * RoutingPolicy::Load(g); }

TEST(RoutingPolicyTest, NamesAreTheFlagsValues) {
  EXPECT_STREQ(RoutingPolicy::ByName("p2c").value()->name(), "p2c");
  EXPECT_STREQ(RoutingPolicy::ByName("least-wait").value()->name(), "least-wait");
  auto bad = RoutingPolicy::ByName("round-robin");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "unknown routing policy 'round-robin' (use p2c, least-wait)");
}

// Two holders: both policies take the less loaded one, every time.
TEST(RoutingPolicyTest, OfTwoHoldersBothTakeTheLessLoaded) {
  const auto a = Holder("a", 6), b = Holder("b", 1);
  const RoutingPolicy::Holders holders = {&a, &b};
  std::minstd_rand rng(7);
  for (const auto& name : {"p2c", "least-wait"}) {
    auto policy = RoutingPolicy::ByName(name).value();
    for (int i = 0; i < 50; ++i) EXPECT_EQ(policy->Choose(holders, rng, Wait)->worker, "b") << name;
  }
}

// Eight holders, one idle: least-wait always finds it; the power of two
// choices finds it only when it is one of the two drawn (about a quarter of
// the time), and otherwise takes the less loaded of two busy ones.
TEST(RoutingPolicyTest, LeastWaitFindsTheIdleHolderThePowerOfTwoChoicesSamples) {
  std::vector<cluster::GroupState> groups;
  for (int i = 0; i < 8; ++i) groups.push_back(Holder("w" + std::to_string(i), i == 5 ? 0 : 4 + i));
  RoutingPolicy::Holders holders;
  for (const auto& g : groups) holders.push_back(&g);
  std::minstd_rand rng(11);
  const auto least = RoutingPolicy::ByName("least-wait").value();
  const auto p2c = RoutingPolicy::ByName("p2c").value();
  std::map<std::string, int> p2c_picks;
  for (int i = 0; i < 4000; ++i) {
    EXPECT_EQ(least->Choose(holders, rng, Wait)->worker, "w5");
    ++p2c_picks[p2c->Choose(holders, rng, Wait)->worker];
  }
  // P(w5 among two of eight) = 1 - (7/8)(6/7) = 1/4.
  EXPECT_NEAR(p2c_picks["w5"] / 4000.0, 0.25, 0.03);
  // The busiest holder loses every pair it is drawn in.
  EXPECT_EQ(p2c_picks.count("w7"), 0u);
}

// Holders the profile says nothing about come after every predicted one;
// among equal waits the draw is even.
TEST(RoutingPolicyTest, LeastWaitBreaksTiesEvenlyAndPutsUnpredictedLast) {
  const auto a = Holder("a", 2), b = Holder("b", 2), c = Holder("c", 0);
  const RoutingPolicy::Holders holders = {&a, &b, &c};
  auto no_profile_for_c = [](const cluster::GroupState& g) {
    return g.worker == "c" ? -1.0 : Wait(g);
  };
  std::minstd_rand rng(3);
  const auto least = RoutingPolicy::ByName("least-wait").value();
  std::map<std::string, int> picks;
  for (int i = 0; i < 2000; ++i) ++picks[least->Choose(holders, rng, no_profile_for_c)->worker];
  EXPECT_EQ(picks.count("c"), 0u);
  EXPECT_NEAR(picks["a"] / 2000.0, 0.5, 0.05);
}

}  // namespace
}  // namespace somm
