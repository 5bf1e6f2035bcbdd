#include "repository/model_config.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace somm {
namespace {

constexpr char kGood[] = R"(
task: classification/digits
max_batch_size: 32
inputs:
  - {name: pixels, datatype: FP32, shape: [64]}
outputs:
  - {name: logits, datatype: FP32, shape: [10]}
dynamic_batching:
  max_queue_delay_us: 500
  preferred_batch_sizes: [16, 8]
  max_queue_size: 100
instance_count: 2
intra_op_threads: 1
version_policy: {specific: [1, 3]}
accuracy: {value: 0.97, source: held-out split}
preprocessing:
  image: {channels: 1, height: 8, width: 8, scale: 0.0627451}
)";

TEST(ModelConfigTest, ParsesEveryField) {
  auto c = ParseModelConfig(kGood, "m/model.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->task, "classification/digits");
  EXPECT_EQ(c->max_batch_size, 32);
  ASSERT_EQ(c->inputs.size(), 1u);
  EXPECT_EQ(c->inputs[0].datatype, DataType::kFp32);
  EXPECT_EQ(c->inputs[0].shape, (Shape{64}));
  ASSERT_TRUE(c->dynamic_batching.has_value());
  EXPECT_EQ(c->dynamic_batching->max_queue_delay_us, 500);
  EXPECT_EQ(c->dynamic_batching->preferred_batch_sizes, (std::vector<int64_t>{8, 16}));
  EXPECT_EQ(c->instance_count, 2);
  EXPECT_EQ(c->version_policy.kind, VersionPolicy::Kind::kSpecific);
  EXPECT_EQ(c->version_policy.specific, (std::vector<int64_t>{1, 3}));
  EXPECT_DOUBLE_EQ(*c->accuracy.value, 0.97);
  ASSERT_TRUE(c->image_preprocessing.has_value());
  EXPECT_EQ(c->image_preprocessing->channels, 1);
  EXPECT_EQ(FullShape(*c, c->inputs[0]), (Shape{-1, 64}));
}

// Each bad config must name the file, the field and the problem.
struct BadCase {
  const char* yaml;
  const char* expected;
};

class BadConfigTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(BadConfigTest, NamesFileFieldAndProblem) {
  auto c = ParseModelConfig(GetParam().yaml, "repo/m/model.yaml");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find("repo/m/model.yaml"), std::string::npos)
      << c.status().message();
  EXPECT_NE(c.status().message().find(GetParam().expected), std::string::npos)
      << c.status().message();
}

INSTANTIATE_TEST_SUITE_P(
    Cases, BadConfigTest,
    ::testing::Values(
        BadCase{"inputs: [", "not valid YAML"},
        BadCase{"- a\n- b\n", "YAML map"},
        BadCase{"outputs: [{name: y, datatype: FP32, shape: [1]}]", "field 'inputs': is required"},
        BadCase{"inputs: [{name: x, datatype: FLOAT, shape: [1]}]\n"
                "outputs: [{name: y, datatype: FP32, shape: [1]}]",
                "field 'inputs[0].datatype': unknown datatype 'FLOAT'"},
        BadCase{"inputs: [{name: x, datatype: FP32, shape: [0]}]\n"
                "outputs: [{name: y, datatype: FP32, shape: [1]}]",
                "field 'inputs[0].shape': dimension 0 is invalid"},
        BadCase{"inputs: [{name: x, datatype: FP32, shape: [a]}]\n"
                "outputs: [{name: y, datatype: FP32, shape: [1]}]",
                "field 'inputs[0].shape[0]': expected an integer"},
        BadCase{"max_batch_size: -3\ninputs: [{name: x, datatype: FP32, shape: [1]}]\n"
                "outputs: [{name: y, datatype: FP32, shape: [1]}]",
                "field 'max_batch_size'"},
        BadCase{"inputs: [{name: x, datatype: FP32, shape: [1]}]\n"
                "outputs: [{name: y, datatype: FP32, shape: [1]}]\n"
                "dynamic_batching: {max_queue_delay_us: 5}",
                "field 'dynamic_batching': needs max_batch_size > 0"},
        BadCase{"max_batch_size: 4\ninputs: [{name: x, datatype: FP32, shape: [1]}]\n"
                "outputs: [{name: y, datatype: FP32, shape: [1]}]\n"
                "dynamic_batching: {preferred_batch_sizes: [8]}",
                "field 'dynamic_batching.preferred_batch_sizes': size 8"},
        BadCase{"inputs: [{name: x, datatype: FP32, shape: [1]}]\n"
                "outputs: [{name: y, datatype: FP32, shape: [1]}]\nbatch: 3",
                "field 'batch': unknown field"},
        BadCase{"inputs: [{name: x, datatype: FP32, shape: [1]}, {name: x, datatype: FP32, "
                "shape: [1]}]\noutputs: [{name: y, datatype: FP32, shape: [1]}]",
                "duplicate tensor name 'x'"},
        BadCase{"inputs: [{name: x, datatype: FP32, shape: [1]}]\n"
                "outputs: [{name: y, datatype: FP32, shape: [1]}]\nversion_policy: {newest: 1}",
                "field 'version_policy'"},
        BadCase{"platform: onnx\ninputs: [{name: x, datatype: FP32, shape: [1]}]\n"
                "outputs: [{name: y, datatype: FP32, shape: [1]}]",
                "unsupported platform 'onnx'"},
        BadCase{"inputs: [{name: x, datatype: FP32, shape: [1]}]\n"
                "outputs: [{name: y, datatype: FP32, shape: [1]}]\nresponse_cache: true",
                "field 'response_cache': expected a map"},
        BadCase{"inputs: [{name: x, datatype: FP32, shape: [1]}]\n"
                "outputs: [{name: y, datatype: FP32, shape: [1]}]\n"
                "response_cache: {enable: true, max_mb: 0}",
                "field 'response_cache.max_mb': must be more than 0"},
        BadCase{"inputs: [{name: x, datatype: FP32, shape: [1]}]\n"
                "outputs: [{name: y, datatype: FP32, shape: [1]}]\n"
                "response_cache: {enable: true, size: 3}",
                "field 'response_cache.size': unknown key"},
        BadCase{"max_batch_size: 4\ninputs: [{name: x, datatype: FP32, shape: [1]}]\n"
                "outputs: [{name: y, datatype: FP32, shape: [1]}]\n"
                "warmup: {runs: 3, batch_sizes: [1, 8]}",
                "field 'warmup.batch_sizes': batch size 8 is not between 1 and max_batch_size"},
        BadCase{"inputs: [{name: x, datatype: FP32, shape: [1]}]\n"
                "outputs: [{name: y, datatype: FP32, shape: [1]}]\nwarmup: {runs: -2}",
                "field 'warmup.runs': must be between 0 and 100"},
        BadCase{"inputs: [{name: x, datatype: FP32, shape: [1]}]\n"
                "outputs: [{name: y, datatype: FP32, shape: [1]}]\n"
                "preprocessing: {image: {channels: 1, std: [.inf]}}",
                "field 'preprocessing.image.std': must be finite numbers"},
        BadCase{"inputs: [{name: x, datatype: FP32, shape: [1]}]\n"
                "outputs: [{name: y, datatype: FP32, shape: [1]}]\n"
                "preprocessing: {image: {channels: 1, scale: .nan}}",
                "field 'preprocessing.image.scale': must be a finite number"}));

TEST(ModelConfigTest, WarmupRunsAndBatchSizes) {
  const std::string base = "max_batch_size: 8\ninputs: [{name: x, datatype: FP32, shape: [1]}]\n"
                           "outputs: [{name: y, datatype: FP32, shape: [1]}]\n";
  auto none = ParseModelConfig(base, "m.yaml");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->warmup.runs, -1);
  EXPECT_TRUE(none->warmup.batch_sizes.empty());
  auto set = ParseModelConfig(base + "warmup: {runs: 3, batch_sizes: [1, 8]}", "m.yaml");
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  EXPECT_EQ(set->warmup.runs, 3);
  EXPECT_EQ(set->warmup.batch_sizes, (std::vector<int64_t>{1, 8}));
}

TEST(ModelConfigTest, ResponseCacheIsOffUnlessEnabled) {
  const std::string base = "inputs: [{name: x, datatype: FP32, shape: [1]}]\n"
                           "outputs: [{name: y, datatype: FP32, shape: [1]}]\n";
  auto off = ParseModelConfig(base, "m.yaml");
  ASSERT_TRUE(off.ok()) << off.status().ToString();
  EXPECT_FALSE(off->response_cache.enable);
  auto on = ParseModelConfig(base + "response_cache: {enable: true, max_mb: 2.5}", "m.yaml");
  ASSERT_TRUE(on.ok()) << on.status().ToString();
  EXPECT_TRUE(on->response_cache.enable);
  EXPECT_EQ(on->response_cache.max_bytes, int64_t{5} << 19);
  auto defaults = ParseModelConfig(base + "response_cache: {enable: true}", "m.yaml");
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ(defaults->response_cache.max_bytes, int64_t{64} << 20);
}

TEST(ModelConfigTest, LoadChecksNameAgainstFolder) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / "somm_config_test" / "digits";
  fs::create_directories(dir);
  std::ofstream(dir / "model.yaml") << "name: other\n" << kGood;
  auto c = LoadModelConfig(dir.string());
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("does not match its folder 'digits'"), std::string::npos);
  std::ofstream(dir / "model.yaml") << kGood;
  c = LoadModelConfig(dir.string());
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->name, "digits");
  c = LoadModelConfig(dir.string() + "/");  // regression: a trailing slash named the folder ""
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->name, "digits");
  fs::remove_all(dir.parent_path());
}

}  // namespace
}  // namespace somm
