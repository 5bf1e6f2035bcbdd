// A BackendSet makes each platform's backend through the registry the first
// time it is asked for it, once, with the set's options, and shares it
// between copies; a set built on one backend hands that one out for every
// platform; unknown platforms and unlinked runtimes are refused.
#include "runtime/backend_set.h"

#include <gtest/gtest.h>

#include <atomic>

#include "runtime/testing/no_backend.h"
#include "runtime/torch/torch_registration.h"

namespace somm {
namespace {

std::atomic<int> made{0};
std::shared_ptr<DutyCyclePacer> last_pacer;

// A runtime of its own for this file: "set-fake" (alias "set_fake_format").
const BackendRegistration& SetFake() {
  static const BackendRegistration* registered = [] {
    BackendRegistration r;
    r.platform = "set-fake";
    r.aliases = {"set_fake_format"};
    r.model_file = "set.bin";
    VariantKind as_registered;
    as_registered.name = "set-fake-raw";
    r.variants = {as_registered};
    r.factory = [](const BackendOptions& o) {
      ++made;
      last_pacer = o.background_pacer;
      return std::make_unique<testing::NoBackend>("set-fake");
    };
    EXPECT_TRUE(RegisterBackend(r).ok());
    return FindBackend("set-fake");
  }();
  return *registered;
}

TEST(BackendSetTest, MakesEachPlatformsBackendOnFirstNeedOnceWithItsOptions) {
  SetFake();
  BackendOptions options;
  options.background_pacer = std::make_shared<DutyCyclePacer>(0.5);
  BackendSet set(options);
  EXPECT_TRUE(set.Made().empty());
  const int before = made.load();
  auto first = set.For("set-fake");
  ASSERT_TRUE(first.ok()) << first.status().message();
  EXPECT_EQ(made.load(), before + 1);
  EXPECT_EQ(last_pacer, options.background_pacer);
  // The alias and a copy of the set reach the same backend; none is made again.
  BackendSet copy = set;
  auto by_alias = copy.For("set_fake_format");
  ASSERT_TRUE(by_alias.ok());
  EXPECT_EQ(*by_alias, *first);
  EXPECT_EQ(made.load(), before + 1);
  EXPECT_EQ(set.Made(), std::vector<std::string>{"set-fake"});
  EXPECT_EQ(AsRegisteredVariant("set_fake_format"), "set-fake-raw");
}

TEST(BackendSetTest, RefusesUnknownPlatformsAndRuntimesThisBinaryLacks) {
  SetFake();
  BackendSet set;
  auto unknown = set.For("onnx");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.status().message().find("'set-fake'"), std::string::npos)
      << unknown.status().message();
  // No libtorch here: torchscript is known, its backend cannot be made.
  auto torch = set.For(kTorchScriptPlatform);
  ASSERT_FALSE(torch.ok());
  EXPECT_EQ(torch.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(set.Made().empty());
  EXPECT_EQ(AsRegisteredVariant(kTorchScriptPlatform), kVariantFp32);
  EXPECT_EQ(AsRegisteredVariant("onnx"), "");
}

TEST(BackendSetTest, ASetOnOneBackendServesEveryPlatform) {
  testing::NoBackend fake;
  const int before = made.load();
  BackendSet set(fake);
  for (const char* platform : {kTorchScriptPlatform, "set-fake", "anything"}) {
    auto b = set.For(platform);
    ASSERT_TRUE(b.ok()) << platform;
    EXPECT_EQ(*b, &fake);
  }
  EXPECT_EQ(made.load(), before);
}

}  // namespace
}  // namespace somm
