#include "pipeline/pipeline_plan.h"

#include <gtest/gtest.h>

namespace somm::pipeline {
namespace {

constexpr char kDigits[] = R"(
inputs:
  - {name: image, datatype: BYTES, shape: [1]}
outputs:
  - {name: label, datatype: BYTES, shape: [2], from: top.labels}
  - {name: logits, datatype: FP32, shape: [10], from: classify.logits}
steps:
  - name: decode
    preprocess: {channels: 1, height: 8, width: 8}
    inputs: {image: image}
  - name: classify
    model: digits-cnn
    inputs: {pixels: decode.pixels}
  - name: top
    postprocess: {top_k: 2, labels: labels.txt}
    inputs: {logits: classify.logits}
)";

std::string Replace(std::string text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

StatusOr<StepSignature> Lookup(const StepConfig& step) {
  const TensorSpec pixels{"pixels", DataType::kFp32, {64}};
  const TensorSpec logits{"logits", DataType::kFp32, {10}};
  StepSignature sig{{pixels}, {logits}, true, ""};
  if (step.kind == StepKind::kTask) {
    if (step.task == "classification/digits") return sig;
    return NotFound("no model serves task '" + step.task + "'");
  }
  if (step.model == "digits-cnn") return sig;
  if (step.model == "mine" || step.model == "theirs") {
    sig.owner_tenant = step.model == "mine" ? "t1" : "t2";
    return sig;
  }
  if (step.model == "digits-four") {
    sig.outputs[0].shape = {4};
    return sig;
  }
  if (step.model == "digits-two-outputs") {
    sig.outputs.push_back(logits);
    return sig;
  }
  if (step.model == "unbatched") {
    sig.batched = false;
    return sig;
  }
  return NotFound("unknown model '" + step.model + "'");
}

StatusOr<PipelinePlan> Bind(const std::string& text) {
  auto config = ParsePipelineConfig(text, "p/pipeline.yaml");
  if (!config.ok()) return config.status();
  config->name = "p";
  for (auto& s : config->steps) {
    if (!s.postprocess.labels_file.empty()) {
      s.postprocess.labels = {"zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"};
    }
  }
  return BindPipeline(*config, Lookup);
}

std::string Error(const std::string& text) {
  auto plan = Bind(text);
  return plan.ok() ? "" : plan.status().message();
}

TEST(PipelinePlanTest, BindsAndCountsReaders) {
  auto plan = Bind(kDigits);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  ASSERT_EQ(plan->steps.size(), 3u);
  // [1, 8, 8] feeds [64]: the same 64 values, reshaped.
  EXPECT_EQ(plan->steps[0].outputs[0].shape, (Shape{1, 8, 8}));
  EXPECT_EQ(plan->steps[1].inputs[0].shape, (Shape{64}));
  EXPECT_EQ(plan->steps[2].outputs.size(), 4u);  // probabilities, classes, scores, labels
  // classify.logits feeds top and the answer: copied once, then moved.
  EXPECT_EQ(plan->readers.at("classify.logits"), 2);
  EXPECT_EQ(plan->readers.at("decode.pixels"), 1);
  EXPECT_EQ(plan->readers.at("image"), 1);
  EXPECT_EQ(plan->owner_tenant, "");
}

TEST(PipelinePlanTest, UnknownModelIsNamedWithItsStep) {
  auto plan = Bind(Replace(kDigits, "model: digits-cnn", "model: digits-cnm"));
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), StatusCode::kNotFound);
  EXPECT_NE(plan.status().message().find("steps[1] (step 'classify').model"), std::string::npos)
      << plan.status().message();
  EXPECT_NE(plan.status().message().find("digits-cnm"), std::string::npos);
  EXPECT_NE(Error(Replace(kDigits, "model: digits-cnn", "task: classification/letters"))
                .find("steps[1] (step 'classify').task"),
            std::string::npos);
}

TEST(PipelinePlanTest, ShapeAndTypeMismatchesAreRefused) {
  // Three channels make 192 values where the model takes 64.
  const std::string shape = Error(Replace(kDigits, "channels: 1", "channels: 3"));
  EXPECT_NE(shape.find("steps[1] (step 'classify').inputs.pixels"), std::string::npos) << shape;
  EXPECT_NE(shape.find("[3,8,8]"), std::string::npos) << shape;
  const std::string type = Error(Replace(kDigits, "{name: label, datatype: BYTES", "{name: label, datatype: FP32"));
  EXPECT_NE(type.find("outputs[0].from"), std::string::npos) << type;
  EXPECT_NE(type.find("datatype BYTES does not match FP32"), std::string::npos) << type;
  const std::string bytes_in = Error(Replace(kDigits, "{name: image, datatype: BYTES", "{name: image, datatype: UINT8"));
  EXPECT_NE(bytes_in.find("steps[0] (step 'decode').inputs.image"), std::string::npos) << bytes_in;
}

TEST(PipelinePlanTest, UnknownOutputsAndInputsAreNamed) {
  const std::string output = Error(Replace(kDigits, "decode.pixels", "decode.pix"));
  EXPECT_NE(output.find("step 'decode' has no output 'pix' (it gives pixels)"), std::string::npos) << output;
  const std::string input = Error(Replace(kDigits, "{pixels: decode.pixels}", "{pixel: decode.pixels}"));
  EXPECT_NE(input.find("takes no input 'pixel' (it takes pixels)"), std::string::npos) << input;
  const std::string answer = Error(Replace(kDigits, "from: top.labels", "from: top.label"));
  EXPECT_NE(answer.find("outputs[0].from"), std::string::npos) << answer;
}

TEST(PipelinePlanTest, LabelsMustCountTheClasses) {
  auto config = ParsePipelineConfig(kDigits, "p/pipeline.yaml");
  ASSERT_TRUE(config.ok());
  config->steps[2].postprocess.labels = {"a", "b"};
  auto plan = BindPipeline(*config, Lookup);
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("2 labels but the scores have 10 classes"), std::string::npos)
      << plan.status().message();
}

TEST(PipelinePlanTest, PrivateModelsMakeThePipelineTheirTenants) {
  auto mine = Bind(Replace(kDigits, "model: digits-cnn", "model: mine"));
  ASSERT_TRUE(mine.ok()) << mine.status().message();
  EXPECT_EQ(mine->owner_tenant, "t1");
  const std::string two = Error(Replace(Replace(kDigits, "model: digits-cnn", "model: mine"),
                                        "    postprocess: {top_k: 2, labels: labels.txt}\n    inputs: {logits: classify.logits}",
                                        "    model: theirs\n    inputs: {pixels: decode.pixels}"));
  EXPECT_NE(two.find("private models of two tenants"), std::string::npos) << two;
  EXPECT_NE(Error(Replace(kDigits, "model: digits-cnn", "model: unbatched")).find("does not batch"),
            std::string::npos);
}

TEST(PipelinePlanTest, CascadeStagesGiveLogitsOfTheSameClasses) {
  const std::string cascade = Replace(kDigits, "model: digits-cnn",
                                      "cascade: {models: [mine, SECOND], threshold: 0.9}");
  auto plan = Bind(Replace(cascade, "SECOND", "digits-cnn"));
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  const BoundStep& step = plan->steps[1];
  EXPECT_EQ(step.stages.size(), 2u);
  EXPECT_EQ(step.classes, 10);
  ASSERT_EQ(step.outputs.size(), 2u);
  EXPECT_EQ(step.outputs[0].name, "logits");
  EXPECT_EQ(step.outputs[1].name, "stage");
  EXPECT_EQ(plan->owner_tenant, "t1");  // a stage's private model
  const std::string four = Error(Replace(cascade, "SECOND", "digits-four"));
  EXPECT_NE(four.find("field 'steps[1] (step 'classify').cascade.models[1]': model 'digits-four' "
                      "scores 4 classes where the first stage scores 10"),
            std::string::npos)
      << four;
  const std::string two = Error(Replace(cascade, "SECOND", "digits-two-outputs"));
  EXPECT_NE(two.find("cascade.models[1]': model 'digits-two-outputs' gives logits, logits; a "
                     "cascade stage gives one FP32 output"),
            std::string::npos)
      << two;
  EXPECT_NE(Error(Replace(cascade, "SECOND", "theirs")).find("private models of two tenants"),
            std::string::npos);
  EXPECT_NE(Error(Replace(cascade, "SECOND", "nope")).find("cascade.models[1]': unknown model 'nope'"),
            std::string::npos);
}

TEST(PipelinePlanTest, CheckEdge) {
  EXPECT_TRUE(CheckEdge({"a", DataType::kFp32, {-1, 4}}, {"b", DataType::kFp32, {3, 4}}).ok());
  EXPECT_TRUE(CheckEdge({"a", DataType::kFp32, {2, 6}}, {"b", DataType::kFp32, {12}}).ok());
  EXPECT_FALSE(CheckEdge({"a", DataType::kFp32, {-1, 6}}, {"b", DataType::kFp32, {12}}).ok());
  EXPECT_FALSE(CheckEdge({"a", DataType::kFp32, {12}}, {"b", DataType::kFp16, {12}}).ok());
}

}  // namespace
}  // namespace somm::pipeline
