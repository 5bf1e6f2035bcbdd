#include "common/install_paths.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace somm {
namespace {

namespace fs = std::filesystem;

// A fake install prefix: P/bin/somm (never run) and, when `with_tools`,
// P/share/somm/tools.
class InstallPathsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    prefix_ = fs::temp_directory_path() /
              ("somm-install-paths-" + std::to_string(getpid()) + "-" +
               ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(prefix_ / "bin");
    exe_ = (prefix_ / "bin" / "somm").string();
  }
  void TearDown() override { fs::remove_all(prefix_); }
  void AddTools() { fs::create_directories(prefix_ / "share" / "somm" / "tools"); }

  fs::path prefix_;
  std::string exe_;
};

TEST_F(InstallPathsTest, InstalledLayoutWinsOverTheBuildTreeDefault) {
  AddTools();
  EXPECT_EQ(ResolveToolsDir(nullptr, exe_, "/src/tools"),
            (prefix_ / "share" / "somm" / "tools").string());
}

TEST_F(InstallPathsTest, BuildTreeDefaultWithoutAnInstalledLayout) {
  EXPECT_EQ(ResolveToolsDir(nullptr, exe_, "/src/tools"), "/src/tools");
  EXPECT_EQ(ResolveToolsDir(nullptr, "", "/src/tools"), "/src/tools");
}

TEST_F(InstallPathsTest, TheEnvironmentWinsEvenWhenEmpty) {
  AddTools();
  EXPECT_EQ(ResolveToolsDir("/elsewhere", exe_, "/src/tools"), "/elsewhere");
  // Set but empty: the user turned the int8 tool off.
  EXPECT_EQ(ResolveToolsDir("", exe_, "/src/tools"), "");
}

TEST(ToolsDirTest, ThisTestBinaryIsNotInstalledSoTheDefaultComes) {
  // The test runs from the build tree, with no share/somm/tools beside it.
  if (std::getenv("SOMM_TOOLS_DIR") != nullptr) GTEST_SKIP() << "SOMM_TOOLS_DIR is set";
  EXPECT_EQ(ToolsDir("/src/tools"), "/src/tools");
}

}  // namespace
}  // namespace somm
