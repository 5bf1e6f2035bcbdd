#include "rollout/rollout.h"

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

namespace somm {
namespace {

TEST(RolloutTest, JsonRoundTripKeepsEveryField) {
  Rollout r;
  r.model = "digits";
  r.stable_version = 1;
  r.canary_version = 2;
  r.mode = Rollout::Mode::kShadow;
  r.percent = 25;
  r.steps = {5, 25, 100};
  r.automatic = false;
  r.bounds.max_latency_ratio = 2.5;
  r.started_unix_ms = 1000;
  r.step_started_unix_ms = 2000;
  r.Record(1000, "started", "by an operator");
  auto back = RolloutFromJson(RolloutToJson(r));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(RolloutToJson(*back), RolloutToJson(r));
  EXPECT_EQ(back->mode, Rollout::Mode::kShadow);
  EXPECT_EQ(back->steps, (std::vector<int>{5, 25, 100}));
  EXPECT_DOUBLE_EQ(back->bounds.max_latency_ratio, 2.5);
  ASSERT_EQ(back->history.size(), 1u);
  EXPECT_EQ(back->reason, "by an operator");
}

TEST(RolloutTest, DefaultVersionAndPinsFollowTheState) {
  Rollout r;
  r.stable_version = 3;
  r.canary_version = 4;
  r.percent = 10;
  EXPECT_EQ(r.DefaultVersion(), 3);
  EXPECT_EQ(r.PinnedVersions(), (std::vector<int64_t>{3, 4}));
  EXPECT_TRUE(r.DrawsCanary(9.99));
  EXPECT_FALSE(r.DrawsCanary(10.0));
  r.state = Rollout::State::kRolledBack;
  EXPECT_EQ(r.DefaultVersion(), 3);
  EXPECT_EQ(r.PinnedVersions(), (std::vector<int64_t>{3}));
  EXPECT_FALSE(r.DrawsCanary(0));
  r.state = Rollout::State::kPromoted;
  EXPECT_EQ(r.DefaultVersion(), 4);
  EXPECT_EQ(r.PinnedVersions(), (std::vector<int64_t>{4}));
}

TEST(RolloutTest, HistoryKeepsTheFirstEventAndTheLatest) {
  Rollout r;
  for (int i = 0; i < 100; ++i) r.Record(i, i == 0 ? "started" : "held", std::to_string(i));
  ASSERT_EQ(r.history.size(), Rollout::kMaxHistory);
  EXPECT_EQ(r.history.front().event, "started");
  EXPECT_EQ(r.history.back().reason, "99");
  EXPECT_EQ(r.history[1].reason, std::to_string(100 - Rollout::kMaxHistory + 1));
}

TEST(RolloutTest, ChangesParseAndBadOnesNameTheField) {
  auto start = RolloutChangeFromJson("m", R"({"version": "2", "percent": 10, "mode": "shadow"})");
  ASSERT_TRUE(start.ok()) << start.status().message();
  EXPECT_EQ(start->kind, RolloutChange::Kind::kStart);
  EXPECT_EQ(*start->version, 2);
  EXPECT_EQ(*start->percent, 10);
  EXPECT_EQ(start->mode, Rollout::Mode::kShadow);
  auto again = RolloutChangeFromJson("m", RolloutChangeToJson(*start));
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(RolloutChangeToJson(*again), RolloutChangeToJson(*start));
  EXPECT_EQ(RolloutChangeFromJson("m", R"({"action": "rollback"})")->kind,
            RolloutChange::Kind::kRollBack);
  EXPECT_EQ(RolloutChangeFromJson("m", R"({"action": "promote"})")->kind,
            RolloutChange::Kind::kPromote);
  const std::pair<const char*, const char*> bad[] = {
      {R"({"percent": 10})", "needs 'version'"},
      {R"({"version": 0})", "'version'"},
      {R"({"version": "02"})", "'version'"},
      {R"({"version": 2, "percent": 101})", "'percent'"},
      {R"({"version": 2, "percent": 2.5})", "'percent'"},
      {R"({"version": 2, "mode": "blue"})", "'mode'"},
      {R"({"version": 2, "steps": [10, 5, 100]})", "'steps'"},
      {R"({"version": 2, "steps": [10, 50]})", "'steps'"},
      {R"({"version": 2, "bounds": {"max_latency_ratio": 0.5}})", "bounds.max_latency_ratio"},
      {R"({"version": 2, "bounds": {"speed": 1}})", "bounds.speed"},
      {R"({"version": 2, "colour": 1})", "'colour'"},
      {R"({"action": "set"})", "'percent'"},
      {R"({"action": "pause"})", "'action'"},
      {R"([1])", "object"},
      {R"({"version": )", "object"},
  };
  for (const auto& [body, named] : bad) {
    auto c = RolloutChangeFromJson("m", body);
    ASSERT_FALSE(c.ok()) << body;
    EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument) << body;
    EXPECT_NE(c.status().message().find(named), std::string::npos)
        << body << " -> " << c.status().message();
  }
}

TEST(RolloutTest, SavedRolloutLoadsBackAndABrokenFileIsNamed) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("rollout_test_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  auto none = LoadRollout(dir.string(), "m");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  Rollout r;
  r.model = "m";
  r.stable_version = 1;
  r.canary_version = 2;
  r.percent = 10;
  ASSERT_TRUE(SaveRollout(dir.string(), r).ok());
  auto back = LoadRollout(dir.string(), "m");
  ASSERT_TRUE(back.ok() && back->has_value());
  EXPECT_EQ((*back)->canary_version, 2);
  std::ofstream(dir / ".somm" / "rollouts" / "m.json") << "{broken";
  auto broken = LoadRollout(dir.string(), "m");
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.status().message().find("m.json"), std::string::npos);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace somm
