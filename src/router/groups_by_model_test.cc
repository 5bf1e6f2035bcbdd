#include "router/groups_by_model.h"

#include <gtest/gtest.h>

#include <random>

namespace somm {
namespace {

// The straightforward form the index replaces: every group whose model is
// named, in the snapshot's order.
std::vector<std::string> Labels(const std::vector<cluster::GroupState>& groups) {
  std::vector<std::string> out;
  for (const auto& g : groups) out.push_back(g.worker + "/" + cluster::GroupLabel(g));
  return out;
}

std::vector<cluster::GroupState> ByScan(const cluster::ClusterState& s,
                                        const std::vector<std::string>& models) {
  std::vector<cluster::GroupState> out;
  for (const auto& g : s.groups) {
    if (std::find(models.begin(), models.end(), g.model) != models.end()) out.push_back(g);
  }
  return out;
}

TEST(GroupsByModelTest, GivesTheGroupsAScanOfTheSnapshotGives) {
  std::mt19937 rng(3);
  GroupsByModel index;
  for (int round = 0; round < 50; ++round) {
    auto s = std::make_shared<cluster::ClusterState>();
    const int groups = std::uniform_int_distribution<int>(0, 60)(rng);
    for (int i = 0; i < groups; ++i) {
      cluster::GroupState g;
      g.model = "m" + std::to_string(std::uniform_int_distribution<int>(0, 9)(rng));
      g.worker = "w" + std::to_string(std::uniform_int_distribution<int>(0, 5)(rng));
      g.variant = i % 2 ? "ts-fp32" : "ts-int8";
      s->groups.push_back(g);
    }
    std::shared_ptr<const cluster::ClusterState> snapshot = s;
    // Several lookups per snapshot: the first builds the index, the rest share it.
    for (int q = 0; q < 4; ++q) {
      std::vector<std::string> models;
      const int n = std::uniform_int_distribution<int>(0, 3)(rng);
      for (int m = 0; m < n; ++m) {
        models.push_back("m" + std::to_string(std::uniform_int_distribution<int>(0, 11)(rng)));
      }
      EXPECT_EQ(Labels(index.Of(snapshot, models)), Labels(ByScan(*snapshot, models)))
          << "round " << round << " lookup " << q;
    }
  }
}

TEST(GroupsByModelTest, ANewSnapshotIsIndexedAgain) {
  GroupsByModel index;
  auto a = std::make_shared<cluster::ClusterState>();
  a->groups.push_back(cluster::GroupState{});
  a->groups.back().model = "m";
  EXPECT_EQ(index.Of(a, {"m"}).size(), 1u);
  auto b = std::make_shared<cluster::ClusterState>(*a);
  b->groups.push_back(b->groups.back());
  EXPECT_EQ(index.Of(b, {"m"}).size(), 2u);
  EXPECT_EQ(index.Of(a, {"m"}).size(), 1u);
}

}  // namespace
}  // namespace somm
