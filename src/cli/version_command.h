// `somm --version` and `somm version`: what this binary is. The first line
// is "somm <version>" alone (scripts/image and tests/install_test.sh compare
// it); then the git commit the build was configured from ("unknown" when
// the source was no git checkout then) and the libtorch it was built
// against.
#pragma once

#include <string>

namespace somm {

// `version`: CMake's project version; `commit`: the configure-time commit
// ("" = unknown).
std::string VersionText(const std::string& version, const std::string& commit);

}  // namespace somm
