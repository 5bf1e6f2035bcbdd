// The router's and the controller's options as the builders make them from
// the flag groups: the defaults, and every flag reaching its option.
#include "node/component_options.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "router/routing_policy.h"

namespace somm {
namespace {

TEST(BuildRouterOptionsTest, DefaultsAreTheFlagsDefaults) {
  const RouterFlags flags;
  auto o = BuildRouterOptions(flags, /*managed=*/true);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  const RouterOptions plain;
  EXPECT_TRUE(o->managed);
  EXPECT_TRUE(o->compact_explanation);  // --explain compact
  ASSERT_NE(o->routing_policy, nullptr);
  EXPECT_EQ(std::string(o->routing_policy->name()), flags.routing_policy);
  EXPECT_EQ(o->zone, "");
  EXPECT_EQ(o->cross_zone_rtt_ms, plain.cross_zone_rtt_ms);
  // What the flags do not say stays as RouterOptions has it: the process
  // adds it (id, clock, readiness, seed, prices).
  EXPECT_EQ(o->id, plain.id);
  EXPECT_EQ(o->clock, nullptr);
  EXPECT_FALSE(static_cast<bool>(o->ready));
  EXPECT_EQ(o->seed, plain.seed);
}

TEST(BuildRouterOptionsTest, EveryFlagReachesItsOption) {
  RouterFlags flags;
  flags.explain = "full";
  flags.routing_policy = "least-wait";
  flags.zone = "zone-b";
  flags.cross_zone_rtt_ms = 3.5;
  auto o = BuildRouterOptions(flags, /*managed=*/false);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_FALSE(o->managed);
  EXPECT_FALSE(o->compact_explanation);
  ASSERT_NE(o->routing_policy, nullptr);
  EXPECT_EQ(std::string(o->routing_policy->name()), "least-wait");
  EXPECT_EQ(o->zone, "zone-b");
  EXPECT_EQ(o->cross_zone_rtt_ms, 3.5);
}

TEST(BuildRouterOptionsTest, AnUnknownRoutingPolicyIsRefusedByName) {
  RouterFlags flags;
  flags.routing_policy = "round-robin";
  auto o = BuildRouterOptions(flags, true);
  ASSERT_FALSE(o.ok());
  EXPECT_EQ(o.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(o.status().message().find("round-robin"), std::string::npos) << o.status().message();
}

TEST(BuildControllerOptionsTest, DefaultsAreTheFlagsDefaults) {
  const ControlLoopFlags flags;
  const ControllerOptions o = BuildControllerOptions(flags, /*managed=*/true);
  const ControllerOptions plain;
  EXPECT_TRUE(o.managed);
  EXPECT_EQ(o.control_tick_ms, flags.tick_ms);
  EXPECT_EQ(o.idle_unload_s, flags.idle_unload_s);
  // The process's wiring is left to it.
  EXPECT_EQ(o.fresh_reports, plain.fresh_reports);
  EXPECT_EQ(o.in_use_window_s, plain.in_use_window_s);
  EXPECT_EQ(o.clock, nullptr);
  EXPECT_FALSE(static_cast<bool>(o.before_tick));
  EXPECT_FALSE(static_cast<bool>(o.on_rollout_change));
}

TEST(BuildControllerOptionsTest, EveryFlagReachesItsOption) {
  ControlLoopFlags flags;
  flags.tick_ms = 250;
  flags.idle_unload_s = 42;
  const ControllerOptions o = BuildControllerOptions(flags, /*managed=*/false);
  EXPECT_FALSE(o.managed);
  EXPECT_EQ(o.control_tick_ms, 250);
  EXPECT_EQ(o.idle_unload_s, 42);
}

TEST(BuildControllerOptionsTest, ATickFasterThanTheShortestIsRaisedToIt) {
  ControlLoopFlags flags;
  flags.tick_ms = 1;
  EXPECT_EQ(BuildControllerOptions(flags, true).control_tick_ms, kMinControlTickMs);
  flags.tick_ms = kMinControlTickMs + 1;
  EXPECT_EQ(BuildControllerOptions(flags, true).control_tick_ms, kMinControlTickMs + 1);
}

TEST(StartupModelsTest, NoneAndPollLoadEveryModelAndRefuseLoadModel) {
  for (const std::string mode : {"none", "poll"}) {
    auto all = StartupModels(mode, {});
    ASSERT_TRUE(all.ok()) << all.status().ToString();
    EXPECT_FALSE(all->has_value()) << mode;
    auto refused = StartupModels(mode, {"digits-mlp"});
    EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument) << mode;
    EXPECT_NE(refused.status().message().find("--model-control-mode explicit"), std::string::npos)
        << refused.status().message();
  }
}

TEST(StartupModelsTest, ExplicitLoadsTheNamesGivenOnceEachOrEveryModelForAStar) {
  auto none = StartupModels("explicit", {});
  ASSERT_TRUE(none.ok());
  ASSERT_TRUE(none->has_value());
  EXPECT_TRUE((*none)->empty());
  auto named = StartupModels("explicit", {"b", "a", "b"});
  ASSERT_TRUE(named.ok());
  ASSERT_TRUE(named->has_value());
  EXPECT_EQ(**named, (std::vector<std::string>{"b", "a"}));
  auto star = StartupModels("explicit", {"a", "*"});
  ASSERT_TRUE(star.ok());
  EXPECT_FALSE(star->has_value());
  EXPECT_EQ(StartupModels("explicit", {""}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(StartupModels("watch", {}).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace somm
