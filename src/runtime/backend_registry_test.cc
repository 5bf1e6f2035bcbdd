// The backend registry is the one place a runtime is named: a second
// runtime registered here, with its own model file, is found by its
// platform and alias, gets its files and variants from its registration,
// and a model.yaml naming it parses, while an unknown platform is refused
// with the list of registered ones.
#include "runtime/backend_registry.h"

#include <gtest/gtest.h>

#include "repository/model_config.h"
#include "runtime/testing/no_backend.h"
#include "runtime/torch/torch_registration.h"

namespace somm {
namespace {

// A made-up runtime: "fake" (alias "fake_format"), files named weights.bin.
BackendRegistration FakeRegistration() {
  BackendRegistration r;
  r.platform = "fake";
  r.aliases = {"fake_format"};
  r.model_file = "weights.bin";
  r.metadata_platform = "fake_runtime";
  VariantKind as_registered;
  as_registered.name = "fake-fp32";
  as_registered.precision = "fp32";
  VariantKind small;
  small.name = "fake-small";
  small.precision = "fp16";
  small.build = VariantKind::Build::kBackend;
  small.optimize_at_load = true;
  r.variants = {as_registered, small};
  r.factory = [](const BackendOptions&) {
    return std::make_unique<testing::NoBackend>("the fake runtime");
  };
  return r;
}

// Registered once for the whole binary (registrations are never removed).
const BackendRegistration& Fake() {
  static const BackendRegistration* fake = [] {
    EXPECT_TRUE(RegisterBackend(FakeRegistration()).ok());
    return FindBackend("fake");
  }();
  return *fake;
}

TEST(BackendRegistryTest, TorchScriptIsBuiltInWithItsFileAndMetadataPlatform) {
  const BackendRegistration* ts = FindBackend(kTorchScriptPlatform);
  ASSERT_NE(ts, nullptr);
  EXPECT_EQ(ts->model_file, "model.pt");
  EXPECT_EQ(ts->metadata_platform, "pytorch_torchscript");
  ASSERT_EQ(ts->variants.size(), 5u);
  EXPECT_EQ(ts->variants.front().name, kVariantFp32);
  EXPECT_EQ(ts->variants.front().build, VariantKind::Build::kAsRegistered);
  EXPECT_EQ(VariantRank(kVariantFp16Cuda), 4);
  EXPECT_TRUE(FindVariantKind(kTorchScriptPlatform, kVariantOpt)->optimize_at_load);
}

TEST(BackendRegistryTest, ASecondBackendIsFoundByPlatformAndAliasWithItsOwnFile) {
  const BackendRegistration& fake = Fake();
  EXPECT_EQ(FindBackend("fake_format"), &fake);
  EXPECT_EQ(RegisteredPlatforms(), (std::vector<std::string>{"fake", "torchscript"}));

  ModelConfig config;
  config.platform = "fake";
  auto path = ModelFilePath(config, "/repo/m", 3);
  ASSERT_TRUE(path.ok()) << path.status().message();
  EXPECT_EQ(*path, "/repo/m/3/weights.bin");
  EXPECT_TRUE(IsModelFileName("weights.bin"));
  EXPECT_TRUE(IsModelFileName("model.pt"));
  EXPECT_FALSE(IsModelFileName("model.yaml"));

  EXPECT_TRUE(FindVariantKind("fake", "fake-small")->optimize_at_load);
  EXPECT_EQ(FindVariantKind("fake", kVariantOpt), nullptr);
  EXPECT_EQ(VariantRank("fake-small"), 1);
  EXPECT_EQ(BackendOfVariant("fake-small"), &fake);
  EXPECT_EQ(BackendOfVariant(kVariantOpt), FindBackend(kTorchScriptPlatform));

  auto backend = CreateBackend("fake_format");
  ASSERT_TRUE(backend.ok()) << backend.status().message();
  EXPECT_EQ((*backend)->Name(), "none");
}

TEST(BackendRegistryTest, AModelYamlOfTheSecondPlatformParses) {
  Fake();
  auto config = ParseModelConfig(
      "name: m\nplatform: fake_format\ninputs: [{name: x, datatype: FP32, shape: [1]}]\n"
      "outputs: [{name: y, datatype: FP32, shape: [1]}]\n",
      "m/model.yaml");
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->platform, "fake");  // the platform's own name, not the alias
}

TEST(BackendRegistryTest, AnUnknownPlatformIsRefusedWithTheRegisteredOnes) {
  Fake();
  auto backend = BackendFor("onnx");
  ASSERT_FALSE(backend.ok());
  EXPECT_EQ(backend.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(backend.status().message().find("unsupported platform 'onnx'"), std::string::npos);
  EXPECT_NE(backend.status().message().find("'fake', 'torchscript'"), std::string::npos)
      << backend.status().message();

  auto config = ParseModelConfig(
      "name: m\nplatform: onnx\ninputs: [{name: x, datatype: FP32, shape: [1]}]\n"
      "outputs: [{name: y, datatype: FP32, shape: [1]}]\n",
      "m/model.yaml");
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("unsupported platform 'onnx'"), std::string::npos);
  EXPECT_NE(config.status().message().find("'fake', 'fake_format', 'torchscript'"),
            std::string::npos)
      << config.status().message();

  ModelConfig unknown;
  unknown.platform = "onnx";
  EXPECT_FALSE(ModelFilePath(unknown, "/repo/m", 1).ok());
}

TEST(BackendRegistryTest, ARegistrationThatClashesOrLacksItsFileIsRefused) {
  Fake();
  BackendRegistration again = FakeRegistration();
  again.platform = "other";  // its alias "fake_format" is taken
  EXPECT_EQ(RegisterBackend(again).code(), StatusCode::kFailedPrecondition);
  BackendRegistration no_file = FakeRegistration();
  no_file.platform = "nofile";
  no_file.aliases.clear();
  no_file.model_file.clear();
  EXPECT_EQ(RegisterBackend(no_file).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(FindBackend("other"), nullptr);
  EXPECT_EQ(FindBackend("nofile"), nullptr);
}

TEST(BackendRegistryTest, APlatformWithoutItsRuntimeLinkedHasNoBackend) {
  // This binary does not link libtorch, so nothing bound torchscript's factory.
  auto backend = CreateBackend(kTorchScriptPlatform);
  ASSERT_FALSE(backend.ok());
  EXPECT_EQ(backend.status().code(), StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace somm
