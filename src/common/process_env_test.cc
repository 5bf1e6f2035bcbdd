#include "common/process_env.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace somm {
namespace {

auto FakeEnv(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

TEST(ProcessEnvTest, AsksForPassiveOpenMpWaitWhenUnset) {
  EXPECT_EQ(MissingProcessEnvDefaults(FakeEnv({})),
            (std::vector<EnvSetting>{{"OMP_WAIT_POLICY", "PASSIVE"}}));
}

TEST(ProcessEnvTest, KeepsAWaitPolicyTheUserSet) {
  EXPECT_TRUE(MissingProcessEnvDefaults(FakeEnv({{"OMP_WAIT_POLICY", "ACTIVE"}})).empty());
  // Set but empty is the user's choice too (libgomp then keeps its default).
  EXPECT_TRUE(MissingProcessEnvDefaults(FakeEnv({{"OMP_WAIT_POLICY", ""}})).empty());
}

}  // namespace
}  // namespace somm
