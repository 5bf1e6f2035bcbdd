// Where somm finds the files it ships beside its binary, at run time.
//
// Today that is the tools folder: tools/quantize_dynamic.py, which a
// registration's variant job runs with python to build the ts-int8 variant
// (variants/variant_pipeline.h). The folder is, in this order:
//   1. $SOMM_TOOLS_DIR, when set, as it is (set but empty turns the ts-int8
//      variant off: the variant pipeline skips it, saying why);
//   2. <folder of the running binary>/../share/somm/tools, when that folder
//      exists: the installed layout (`cmake --install build --prefix P` puts
//      the binary in P/bin and the tools in P/share/somm/tools; the image that
//      scripts/image builds has P = /usr/local);
//   3. the build tree's default, the source tree's tools/ that the build
//      recorded (a binary run from build/, as the tests and scripts do).
// The binary is /proc/self/exe, symbolic links resolved, so a link to an
// installed somm finds the installed tools.
//
// Thread-safety: both functions may be called from any thread; ToolsDir only
// reads the environment and the file system.
#pragma once

#include <string>

namespace somm {

// The resolution above, pure but for one existence check: `env` is the value
// of SOMM_TOOLS_DIR (nullptr unset), `exe` the running binary's path (empty
// when unknown: step 2 is skipped).
std::string ResolveToolsDir(const char* env, const std::string& exe,
                            const std::string& build_tree_default);

// ResolveToolsDir with this process's environment and /proc/self/exe.
std::string ToolsDir(const std::string& build_tree_default);

}  // namespace somm
