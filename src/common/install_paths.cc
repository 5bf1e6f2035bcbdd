#include "common/install_paths.h"

#include <cstdlib>
#include <filesystem>
#include <system_error>

namespace somm {

namespace fs = std::filesystem;

std::string ResolveToolsDir(const char* env, const std::string& exe,
                            const std::string& build_tree_default) {
  if (env != nullptr) return env;
  if (!exe.empty()) {
    const fs::path installed =
        fs::path(exe).parent_path().parent_path() / "share" / "somm" / "tools";
    std::error_code ec;
    if (fs::is_directory(installed, ec)) return installed.lexically_normal().string();
  }
  return build_tree_default;
}

std::string ToolsDir(const std::string& build_tree_default) {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ResolveToolsDir(std::getenv("SOMM_TOOLS_DIR"), ec ? std::string() : exe.string(),
                         build_tree_default);
}

}  // namespace somm
