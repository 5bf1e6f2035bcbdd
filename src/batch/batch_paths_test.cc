// BatchPaths on a temporary folder: per-tenant folders, links and ".." that
// climb out, the repository protected, admin roots.
#include "batch/batch_paths.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

namespace somm {
namespace {

namespace fs = std::filesystem;

class BatchPathsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "repo" / "model-a" / "1");
  }
  void TearDown() override { fs::remove_all(dir_); }
  const fs::path dir_ = fs::temp_directory_path() / ("batch_paths_test_" + std::to_string(getpid()));
};

TEST_F(BatchPathsTest, EachTenantHasAPrivateFolderOfItsOwn) {
  auto paths = BatchPaths::Create({(dir_ / "root").string(), {}, ""});
  ASSERT_TRUE(paths.ok()) << paths.status().message();
  auto a = paths->FolderOf({true, "k1", "team-a", false});
  auto anonymous = paths->FolderOf({});
  auto admin = paths->FolderOf({true, "k0", "ops", true});
  ASSERT_TRUE(a.ok() && anonymous.ok() && admin.ok());
  EXPECT_EQ(fs::path(*a).filename(), "team-a");
  EXPECT_EQ(fs::path(*anonymous).filename(), "default");
  EXPECT_EQ(fs::path(*admin).filename(), "admin");
  EXPECT_EQ(fs::status(*a).permissions() & fs::perms::all, fs::perms::owner_all);
  // A tenant named like a path, or like the admins' folder, gets none.
  EXPECT_FALSE(paths->FolderOf({true, "k2", "../x", false}).ok());
  EXPECT_FALSE(paths->FolderOf({true, "k3", "admin", false}).ok());
}

TEST_F(BatchPathsTest, TheRepositoryIsNeverAnOutputButTheRootBelowItsSommFolderIs) {
  const fs::path repo = dir_ / "repo";
  auto paths = BatchPaths::Create({(repo / ".somm" / "batch-files").string(), {dir_.string()},
                                   repo.string()});
  ASSERT_TRUE(paths.ok()) << paths.status().message();
  const Caller admin{true, "k0", "ops", true};
  // An admin root holding the repository still keeps its models and .somm/ out.
  for (const fs::path& p : {repo / "model-a", repo / "model-a" / "1", repo / ".somm", repo}) {
    auto out = paths->Output(admin, p.string());
    ASSERT_FALSE(out.ok()) << p;
    EXPECT_EQ(out.status().code(), StatusCode::kPermissionDenied);
  }
  EXPECT_TRUE(paths->Output(admin, (dir_ / "exports").string()).ok());
  EXPECT_TRUE(paths->Output(admin, "out").ok());
  // A user key has no admin roots.
  EXPECT_FALSE(paths->Output({true, "k1", "team-a", false}, (dir_ / "exports").string()).ok());
  // A root that holds the repository, or lies among its models, is refused.
  EXPECT_FALSE(BatchPaths::Create({dir_.string(), {}, repo.string()}).ok());
  EXPECT_FALSE(BatchPaths::Create({(repo / "model-a").string(), {}, repo.string()}).ok());
}

}  // namespace
}  // namespace somm
