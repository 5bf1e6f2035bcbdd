#include "registry/task_catalog.h"
#include "registry/model_catalog.h"

#include <gtest/gtest.h>

#include <memory>

namespace somm {
namespace {

ModelConfig Digits(const std::string& name, const std::string& input = "pixels") {
  ModelConfig c;
  c.name = name;
  c.task = "classification/digits";
  c.max_batch_size = 64;
  c.inputs = {TensorSpec{input, DataType::kFp32, {64}}};
  c.outputs = {TensorSpec{"logits", DataType::kFp32, {10}}};
  return c;
}

VariantProfile Profile(const std::string& variant, std::optional<double> accuracy, double ms_at_1,
                       bool usable = true) {
  VariantProfile p;
  p.variant = variant;
  p.accuracy = accuracy;
  p.usable = usable;
  HardwareProfile hp;
  hp.latency.intercept_ms = ms_at_1;
  p.hardware.push_back(hp);
  return p;
}

VersionPtr Version(ModelConfig config, int64_t version, std::vector<VariantProfile> profiles = {}) {
  auto v = std::make_shared<VersionRecord>();
  v->config = std::move(config);
  v->version = version;
  v->version_str = std::to_string(version);
  v->profiles = std::move(profiles);
  return v;
}

// ForTask answers from an index by task: it follows a model that is
// published again under another task, and one removed, in name order.
TEST(ModelCatalogTest, ForTaskFollowsPublicationsRemovalsAndTaskChanges) {
  ModelCatalog catalog("");
  auto names = [&catalog](const std::string& task) {
    std::vector<std::string> out;
    for (const VersionPtr& v : catalog.ForTask(task)) out.push_back(v->config.name);
    return out;
  };
  catalog.Publish("b", {Version(Digits("b"), 1)}, {});
  catalog.Publish("a", {Version(Digits("a"), 1), Version(Digits("a"), 2)}, {});
  ModelConfig other = Digits("c");
  other.task = "classification/other";
  catalog.Publish("c", {Version(other, 1)}, {});
  EXPECT_EQ(names("classification/digits"), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(catalog.ForTask("classification/digits")[0]->version, 2);  // the latest
  EXPECT_EQ(names("classification/other"), (std::vector<std::string>{"c"}));
  EXPECT_TRUE(names("nothing").empty());

  ModelConfig moved = Digits("b");
  moved.task = "classification/other";
  catalog.Publish("b", {Version(moved, 2)}, {});
  EXPECT_EQ(names("classification/digits"), (std::vector<std::string>{"a"}));
  EXPECT_EQ(names("classification/other"), (std::vector<std::string>{"b", "c"}));
  EXPECT_TRUE(catalog.Remove("c"));
  EXPECT_EQ(names("classification/other"), (std::vector<std::string>{"b"}));
  catalog.Publish("a", {}, {});  // no versions: no longer serves its task
  EXPECT_TRUE(names("classification/digits").empty());
}

TEST(TaskCatalogTest, DescribesRangesOverUsableVariantsOfTheLatestVersions) {
  ModelConfig mlp = Digits("digits-mlp");
  mlp.accuracy.value = 0.97;
  ModelConfig old_cnn = Digits("digits-cnn");
  const std::vector<VersionPtr> versions = {
      Version(mlp, 1, {Profile("ts-fp32", 0.97, 0.2), Profile("ts-int8", 0.95, 0.1),
                       Profile("ts-bad", 0.5, 0.01, /*usable=*/false)}),
      Version(old_cnn, 1, {Profile("ts-fp32", 0.80, 9.0)}),
      Version(old_cnn, 2, {Profile("ts-fp32", 0.98, 0.6)}),
  };
  const std::vector<TaskDescription> tasks = DescribeTasks(versions);
  ASSERT_EQ(tasks.size(), 1u);
  const TaskDescription& d = tasks[0];
  EXPECT_EQ(d.task, "classification/digits");
  ASSERT_EQ(d.models.size(), 2u);
  EXPECT_EQ(d.models[0].name, "digits-cnn");
  EXPECT_EQ(d.models[0].versions, (std::vector<std::string>{"1", "2"}));
  EXPECT_EQ(d.models[1].usable_variants, 2);
  EXPECT_EQ(d.usable_variants, 3);
  EXPECT_DOUBLE_EQ(*d.min_accuracy, 0.95);
  EXPECT_DOUBLE_EQ(*d.max_accuracy, 0.98);
  EXPECT_DOUBLE_EQ(*d.min_latency_ms, 0.1);
  EXPECT_DOUBLE_EQ(*d.max_latency_ms, 0.6);
  EXPECT_EQ(SignatureToString(d.signature), "inputs pixels FP32 [-1,64]; outputs logits FP32 [-1,10]");
}

TEST(TaskCatalogTest, AMinorityModelIsListedWithItsMismatchAndLeftOutOfTheRanges) {
  const std::vector<VersionPtr> versions = {
      Version(Digits("a"), 1, {Profile("ts-fp32", 0.9, 1.0)}),
      Version(Digits("b"), 1, {Profile("ts-fp32", 0.9, 1.0)}),
      Version(Digits("c", "image"), 1, {Profile("ts-fp32", 0.1, 50.0)}),
  };
  const TaskDescription d = DescribeTasks(versions).at(0);
  EXPECT_EQ(d.signature.inputs.at(0).name, "pixels");
  EXPECT_TRUE(d.models[0].mismatch.empty());
  EXPECT_NE(d.models[2].mismatch.find("image"), std::string::npos);
  EXPECT_DOUBLE_EQ(*d.max_latency_ms, 1.0);
  EXPECT_DOUBLE_EQ(*d.min_accuracy, 0.9);
}

TEST(TaskCatalogTest, RegistrationThatDoesNotFitShowsBothSignatures) {
  const std::vector<VersionPtr> existing = {Version(Digits("digits-mlp"), 1)};
  EXPECT_TRUE(CheckTaskSignature(Digits("new"), existing).ok());
  const Status s = CheckTaskSignature(Digits("new", "image"), existing);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("inputs pixels FP32 [-1,64]"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("inputs image FP32 [-1,64]"), std::string::npos) << s.message();
  // Another task, or the task's only model itself, never conflicts.
  ModelConfig other = Digits("new", "image");
  other.task = "classification/other";
  EXPECT_TRUE(CheckTaskSignature(other, existing).ok());
  EXPECT_TRUE(CheckTaskSignature(Digits("digits-mlp", "image"), existing).ok());
  ModelConfig unbatched = Digits("new");
  unbatched.max_batch_size = 0;
  EXPECT_FALSE(CheckTaskSignature(unbatched, existing).ok());
}

TEST(TaskCatalogTest, TaskInputsAreCheckedAgainstTheTaskSignature) {
  const TaskDescription d = DescribeTasks({Version(Digits("digits-mlp"), 1)}).at(0);
  Tensor good{"pixels", DataType::kFp32, {2, 64}, std::string(2 * 64 * 4, '\0')};
  EXPECT_TRUE(CheckTaskInputs(d, {good}).ok());
  Tensor wrong_name = good;
  wrong_name.name = "image";
  const Status s = CheckTaskInputs(d, {wrong_name});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("task 'classification/digits' takes inputs pixels FP32 [-1,64]"),
            std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("unknown input 'image'"), std::string::npos);
  EXPECT_NE(CheckTaskInputs(d, {}).message().find("missing input 'pixels'"), std::string::npos);
  Tensor wrong_type = good;
  wrong_type.datatype = DataType::kInt64;
  EXPECT_FALSE(CheckTaskInputs(d, {wrong_type}).ok());
  Tensor wrong_shape = good;
  wrong_shape.shape = {2, 63};
  EXPECT_FALSE(CheckTaskInputs(d, {wrong_shape}).ok());
}

}  // namespace
}  // namespace somm
