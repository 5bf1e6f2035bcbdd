// ScanRepository and DiffRepository on a temporary repository, and the
// poller's actions through fakes of the owner's load and unload.
#include "repository/repository_poller.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <thread>

namespace somm {
namespace {

namespace fs = std::filesystem;

class RepositoryPollerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    repo_ = fs::temp_directory_path() / ("somm_poll_" + std::to_string(::getpid()));
    fs::remove_all(repo_);
    fs::create_directories(repo_);
  }
  void TearDown() override { fs::remove_all(repo_); }
  void Write(const fs::path& file, const std::string& text) {
    fs::create_directories(file.parent_path());
    std::ofstream(file) << text;
  }
  void Model(const std::string& name, const std::string& yaml = "inputs: []\n") {
    Write(repo_ / name / "model.yaml", yaml);
    Write(repo_ / name / "1" / "model.pt", "weights");
  }
  fs::path repo_;
};

TEST_F(RepositoryPollerTest, DiffSeesNewChangedAndRemovedModelFolders) {
  Model("a");
  Model("b");
  fs::create_directories(repo_ / ".somm" / "variants");  // hidden: never a model
  fs::create_directories(repo_ / "no-config" / "1");    // no model.yaml yet
  const RepositorySnapshot before = ScanRepository(repo_.string());
  EXPECT_EQ(before.size(), 2u);
  Model("c");
  Write(repo_ / "a" / "model.yaml", "inputs: []\ndescription: longer\n");  // changed size
  Write(repo_ / "b" / "2" / "model.pt", "a new version");
  fs::remove_all(repo_ / "no-config");
  const RepositorySnapshot after = ScanRepository(repo_.string());
  RepositoryChanges c = DiffRepository(before, after);
  EXPECT_EQ(c.added, (std::vector<std::string>{"c"}));
  EXPECT_EQ(c.changed, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(c.removed.empty());
  fs::remove_all(repo_ / "c");
  c = DiffRepository(after, ScanRepository(repo_.string()));
  EXPECT_EQ(c.removed, (std::vector<std::string>{"c"}));
  EXPECT_TRUE(c.added.empty() && c.changed.empty());
  EXPECT_TRUE(DiffRepository(after, after).empty());
}

TEST_F(RepositoryPollerTest, ThePollerLoadsReloadsAndUnloadsAndAStandbyDoesNothing) {
  Model("a");
  std::vector<std::string> calls;
  bool active = true;
  RepositoryPollerOptions o;
  o.repository = repo_.string();
  o.period = std::chrono::hours(1);  // PollOnce by hand
  o.load = [&](const std::string& m) {
    calls.push_back("load " + m);
    return m == "broken" ? InvalidArgument("bad model.yaml") : Status::Ok();
  };
  o.unload = [&](const std::string& m) {
    calls.push_back("unload " + m);
    return Status::Ok();
  };
  o.active = [&] { return active; };
  RepositoryPoller poller(o);
  poller.PollOnce();
  EXPECT_TRUE(calls.empty()) << "the baseline is what the server loaded itself";
  Model("new");
  Model("broken");
  poller.PollOnce();
  EXPECT_EQ(calls, (std::vector<std::string>{"load broken", "load new"}));
  calls.clear();
  fs::remove_all(repo_ / "new");
  Write(repo_ / "a" / "model.yaml", "inputs: []\n# edited\n");
  poller.PollOnce();
  EXPECT_EQ(calls, (std::vector<std::string>{"load a", "unload new"}));
  calls.clear();
  active = false;  // a standby keeps its baseline and acts on nothing
  Model("later");
  poller.PollOnce();
  active = true;
  poller.PollOnce();
  EXPECT_TRUE(calls.empty()) << calls.front();
  poller.Stop();
}

}  // namespace
}  // namespace somm
