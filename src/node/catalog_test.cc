// The catalog between a leader's publisher and a router's follower, over the
// in-memory catalog store: what a router serves through a store that loses
// the catalog (a Redis restart) and a leader that writes it again model by
// model.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <unistd.h>

#include "cluster/in_memory_catalog_store.h"
#include "node/catalog_follower.h"
#include "node/catalog_publisher.h"

namespace somm::node {
namespace {

namespace fs = std::filesystem;

class CatalogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    repo_ = fs::temp_directory_path() / ("somm_catalog_test_" + std::to_string(getpid()));
    fs::remove_all(repo_);
    for (const char* m : {"a", "b", "c"}) fs::create_directories(repo_ / m);
  }
  void TearDown() override { fs::remove_all(repo_); }

  // A leader's catalog over the repository, as its start-up loads leave
  // it: `names` published (each with one problem row, so the entry needs no
  // model file and a router shows where it came from).
  std::unique_ptr<ModelCatalog> LeaderRegistry() {
    return std::make_unique<ModelCatalog>(repo_.string());
  }
  static void Load(ModelCatalog& registry, const std::string& name) {
    registry.Publish(name, {}, {{name, "1", "UNAVAILABLE", "published by the leader"}});
  }
  std::function<std::string()> Generations() {
    return [this] { return "g" + std::to_string(++generations_); };
  }
  // What the router's catalog serves, by the problem rows it shows.
  static std::set<std::string> Served(const ModelCatalog& router) {
    std::set<std::string> names;
    for (const RepositoryEntry& row : router.Index(/*ready_only=*/false)) {
      if (row.reason == "published by the leader") names.insert(row.name);
    }
    return names;
  }

  fs::path repo_;
  int generations_ = 0;
  cluster::InMemoryCatalogStore store_;
  // A router mounts no repository.
  ModelCatalog router_{""};
};

using Names = std::set<std::string>;

TEST_F(CatalogTest, ARouterFollowsTheLeadersPublicationsAndItsUnloads) {
  auto leader = LeaderRegistry();
  CatalogPublisher publisher(*leader, store_, "controller-0|127.0.0.1:1", Generations());
  CatalogFollower follower(router_, store_);
  follower.Start();
  for (const char* m : {"a", "b", "c"}) {
    Load(*leader, m);
    publisher.Publish();  // each start-up load is published at once
  }
  EXPECT_EQ(Served(router_), (Names{"a", "b", "c"}));
  EXPECT_FALSE(store_.ReadCatalog().complete);
  publisher.SetStartedUp();
  publisher.Publish();
  EXPECT_TRUE(store_.ReadCatalog().complete);

  leader->Remove("c");  // an unload
  publisher.Publish();
  EXPECT_EQ(Served(router_), (Names{"a", "b"}));
  EXPECT_EQ(store_.ReadCatalog().models.count("c"), 0u);
}

TEST_F(CatalogTest, ASyncThatReadOrForgotAModelTellsWhatIsBuiltOverTheCatalog) {
  auto leader = LeaderRegistry();
  CatalogPublisher publisher(*leader, store_, "controller-0|127.0.0.1:1", Generations());
  CatalogFollower follower(router_, store_);
  int changes = 0;
  follower.OnChange([&changes] { ++changes; });
  follower.Start();
  EXPECT_EQ(changes, 0);  // an empty catalog: nothing read
  Load(*leader, "a");
  publisher.SetStartedUp();
  publisher.Publish();
  EXPECT_EQ(changes, 1);
  EXPECT_EQ(Served(router_), (Names{"a"}));
  follower.Sync(store_.ReadCatalog());  // the same generations: nothing to tell
  EXPECT_EQ(changes, 1);
  leader->Remove("a");
  publisher.Publish();
  EXPECT_EQ(changes, 2);
  EXPECT_EQ(Served(router_), Names{});
}

TEST_F(CatalogTest, NothingChangedWritesNothing) {
  auto leader = LeaderRegistry();
  CatalogPublisher publisher(*leader, store_, "controller-0|127.0.0.1:1", Generations());
  Load(*leader, "a");
  Load(*leader, "b");
  publisher.SetStartedUp();
  publisher.Publish();
  const int64_t writes = store_.writes();
  EXPECT_EQ(writes, 3);  // two models and the mark
  publisher.Publish();   // a lease tick
  EXPECT_EQ(store_.writes(), writes);
  const std::string before = store_.ReadCatalog().models.at("a");
  auto v1 = std::make_shared<VersionRecord>();  // new records: a new generation
  v1->config.name = "a";
  v1->version = 1;
  leader->Publish("a", {v1}, {});
  publisher.Publish();
  EXPECT_NE(store_.ReadCatalog().models.at("a"), before);
  EXPECT_EQ(store_.writes(), writes + 1);
}

// The store loses the catalog (Redis restarted empty) and the standby, now
// leader, writes it again model by model as its start-up loads finish. The
// router keeps serving every model meanwhile: an incomplete catalog only
// adds. Before, the router forgot b and c at the first partial catalog and
// answered 404 for them until the leader had loaded them again.
TEST_F(CatalogTest, ACatalogWrittenAgainAfterTheStoreLostItForgetsNothingUntilComplete) {
  auto old_leader = LeaderRegistry();
  CatalogFollower follower(router_, store_);
  follower.Start();
  {
    CatalogPublisher publisher(*old_leader, store_, "controller-0|127.0.0.1:1", Generations());
    for (const char* m : {"a", "b", "c"}) Load(*old_leader, m);
    publisher.SetStartedUp();
    publisher.Publish();
  }
  ASSERT_EQ(Served(router_), (Names{"a", "b", "c"}));

  store_.Clear();
  EXPECT_EQ(Served(router_), (Names{"a", "b", "c"})) << "an empty catalog removed models";

  auto new_leader = LeaderRegistry();
  CatalogPublisher publisher(*new_leader, store_, "controller-1|127.0.0.1:2", Generations());
  Load(*new_leader, "a");
  publisher.Publish();
  EXPECT_EQ(store_.ReadCatalog().models.size(), 1u);
  EXPECT_FALSE(store_.ReadCatalog().complete);
  EXPECT_EQ(Served(router_), (Names{"a", "b", "c"})) << "a partial catalog removed models";

  Load(*new_leader, "b");
  publisher.Publish();
  publisher.SetStartedUp();  // c failed to load and is not served any more
  publisher.Publish();
  EXPECT_TRUE(store_.ReadCatalog().complete);
  EXPECT_EQ(Served(router_), (Names{"a", "b"}));
}

// A publication made before the start-up loads are done never marks the
// catalog complete, even when each of its writes succeeded: a router's load
// call during the leader's start-up publishes too.
TEST_F(CatalogTest, OnlyAStartedUpLeaderMarksTheCatalogComplete) {
  auto leader = LeaderRegistry();
  CatalogPublisher publisher(*leader, store_, "controller-0|127.0.0.1:1", Generations());
  Load(*leader, "a");
  publisher.Publish();
  publisher.Publish();
  EXPECT_FALSE(store_.ReadCatalog().complete);
  publisher.SetStartedUp();
  publisher.Publish();
  EXPECT_TRUE(store_.ReadCatalog().complete);
  store_.Clear();
  publisher.Publish();  // the next lease tick writes it whole again
  EXPECT_EQ(store_.ReadCatalog().models.count("a"), 1u);
  EXPECT_TRUE(store_.ReadCatalog().complete);
}

}  // namespace
}  // namespace somm::node
