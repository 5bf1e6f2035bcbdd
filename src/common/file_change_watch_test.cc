// FileChangeWatch (file_change_watch.h): the counter moves on a write, a
// rename over the file and its removal, not on other files of its folder,
// and cannot tell (-1) while the folder does not exist.
#include "common/file_change_watch.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace somm {
namespace {
namespace fs = std::filesystem;

TEST(FileChangeWatchTest, MovesOnEveryChangeOfTheFileAndOnlyOfIt) {
  std::string pattern = (fs::temp_directory_path() / "somm-watch-XXXXXX").string();
  ASSERT_NE(mkdtemp(pattern.data()), nullptr);
  const fs::path folder = fs::path(pattern) / "state";
  const fs::path file = folder / "keys";
  FileChangeWatch watch(file.string());
  EXPECT_EQ(watch.Generation(), -1) << "no folder yet";
  fs::create_directories(folder);
  const int64_t start = watch.Generation();
  ASSERT_GE(start, 0) << "inotify is not available here";
  EXPECT_EQ(watch.Generation(), start) << "nothing happened";
  std::ofstream(file) << "one\n";
  const int64_t written = watch.Generation();
  EXPECT_GT(written, start);
  std::ofstream(folder / "audit.log") << "another file\n";
  EXPECT_EQ(watch.Generation(), written) << "another file of the folder";
  std::ofstream(folder / "keys.tmp") << "two\n";
  const int64_t temp = watch.Generation();
  fs::rename(folder / "keys.tmp", file);
  const int64_t renamed = watch.Generation();
  EXPECT_GT(renamed, temp) << "a rename over the file";
  fs::remove(file);
  EXPECT_GT(watch.Generation(), renamed);
  fs::remove_all(folder);
  EXPECT_EQ(watch.Generation(), -1) << "the folder went";
  fs::remove_all(pattern);
}

}  // namespace
}  // namespace somm
