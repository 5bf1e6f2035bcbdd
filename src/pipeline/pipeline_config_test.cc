#include "pipeline/pipeline_config.h"

#include <gtest/gtest.h>

namespace somm::pipeline {
namespace {

constexpr char kDigits[] = R"(
name: digits-png
description: PNG digits to labels
max_batch_size: 4
inputs:
  - {name: image, datatype: BYTES, shape: [1]}
outputs:
  - {name: label, datatype: BYTES, shape: [3], from: top.labels}
  - {name: score, datatype: FP32, shape: [3], from: top.scores}
steps:
  - name: top
    postprocess: {softmax: true, top_k: 3}
    inputs: {logits: classify.logits}
  - name: classify
    task: classification/digits
    min_accuracy: 0.9
    inputs: {pixels: decode.pixels}
  - name: decode
    preprocess: {channels: 1, height: 8, width: 8, scale: 0.0627451, max_pixels: 65536}
    inputs: {image: image}
)";

StatusOr<PipelineConfig> Parse(const std::string& text) { return ParsePipelineConfig(text, "p/pipeline.yaml"); }

std::string Replace(std::string text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

// The message of a refused config (empty when it parses).
std::string Error(const std::string& text) {
  auto c = Parse(text);
  return c.ok() ? "" : c.status().message();
}

TEST(PipelineConfigTest, ParsesAndOrdersTheSteps) {
  auto c = Parse(kDigits);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->name, "digits-png");
  EXPECT_EQ(c->max_batch_size, 4);
  ASSERT_EQ(c->steps.size(), 3u);
  // Written last to first; run first to last.
  EXPECT_EQ(c->steps[0].name, "decode");
  EXPECT_EQ(c->steps[1].name, "classify");
  EXPECT_EQ(c->steps[2].name, "top");
  EXPECT_EQ(c->steps[0].kind, StepKind::kPreprocess);
  EXPECT_EQ(c->steps[0].preprocess.transform.height, 8);
  EXPECT_EQ(c->steps[0].preprocess.limits.max_pixels, 65536);
  EXPECT_EQ(c->steps[1].kind, StepKind::kTask);
  EXPECT_EQ(c->steps[1].min_accuracy, 0.9);
  EXPECT_EQ(c->steps[2].postprocess.top_k, 3);
  EXPECT_EQ(c->steps[2].index_in_file, 0);
  ASSERT_EQ(c->outputs.size(), 2u);
  EXPECT_EQ(c->outputs[0].from, "top.labels");
}

TEST(PipelineConfigTest, UnknownStepIsNamedWithItsField) {
  const std::string e = Error(Replace(kDigits, "classify.logits", "clasify.logits"));
  EXPECT_NE(e.find("steps[0] (step 'top').inputs.logits"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown step 'clasify'"), std::string::npos) << e;
}

TEST(PipelineConfigTest, CycleIsNamed) {
  // decode reads top, which reads classify, which reads decode.
  const std::string e = Error(Replace(kDigits, "inputs: {image: image}", "inputs: {image: top.labels}"));
  EXPECT_NE(e.find("cycle"), std::string::npos) << e;
  EXPECT_NE(e.find("decode"), std::string::npos) << e;
  EXPECT_NE(e.find("classify"), std::string::npos) << e;
  EXPECT_NE(e.find("top"), std::string::npos) << e;
}

TEST(PipelineConfigTest, FieldErrorsNameTheStep) {
  EXPECT_NE(Error(Replace(kDigits, "inputs: {image: image}", "inputs: {image: picture}"))
                .find("unknown pipeline input 'picture'"),
            std::string::npos);
  EXPECT_NE(Error(Replace(kDigits, "task: classification/digits", "task: classification/digits\n    model: digits-cnn"))
                .find("steps[1] (step 'classify')': needs exactly one of"),
            std::string::npos);
  EXPECT_NE(Error(Replace(kDigits, "name: decode", "name: top")).find("duplicate step 'top'"),
            std::string::npos);
  EXPECT_NE(Error(Replace(kDigits, "scale: 0.0627451", "scale: 0.0627451, colour: rgb"))
                .find("preprocess.colour': unknown field"),
            std::string::npos);
  EXPECT_NE(Error(Replace(kDigits, "top_k: 3}", "top_k: 3, labels: ../etc/passwd}"))
                .find("a file name in the pipeline's folder"),
            std::string::npos);
  EXPECT_NE(Error(Replace(kDigits, "channels: 1,", "channels: 2,")).find("channels must be 1 or 3"),
            std::string::npos);
  EXPECT_NE(Error(Replace(kDigits, "max_pixels: 65536", "max_pixels: 0")).find("max_pixels"),
            std::string::npos);
  EXPECT_NE(Error(Replace(kDigits, "from: top.scores", "from: top")).find("outputs[1].from"),
            std::string::npos);
  EXPECT_NE(Error("steps: [").find("not valid YAML"), std::string::npos);
  EXPECT_NE(Error("[1, 2]").find("expected a map"), std::string::npos);
}

constexpr char kCascade[] = R"(
inputs: [{name: pixels, datatype: FP32, shape: [64]}]
outputs: [{name: logits, datatype: FP32, shape: [10], from: classify.logits}]
steps:
  - name: classify
    cascade: {models: [digits-logistic, digits-cnn], confidence: margin, min_accuracy: 0.97}
    inputs: {pixels: pixels}
)";

TEST(PipelineConfigTest, ParsesACascade) {
  auto c = Parse(kCascade);
  ASSERT_TRUE(c.ok()) << c.status().message();
  const StepConfig& s = c->steps[0];
  EXPECT_EQ(s.kind, StepKind::kCascade);
  EXPECT_EQ(s.cascade.models, (std::vector<std::string>{"digits-logistic", "digits-cnn"}));
  EXPECT_EQ(s.cascade.on, Confidence::kMargin);
  EXPECT_EQ(s.cascade.min_accuracy, 0.97);
  EXPECT_FALSE(s.cascade.threshold);
  auto given = Parse(Replace(kCascade, "confidence: margin, min_accuracy: 0.97", "threshold: 0.8"));
  ASSERT_TRUE(given.ok()) << given.status().message();
  EXPECT_EQ(given->steps[0].cascade.on, Confidence::kTopProbability);  // the default
  EXPECT_EQ(given->steps[0].cascade.threshold, 0.8);
}

TEST(PipelineConfigTest, CascadeErrorsNameTheStepAndField) {
  const std::string at = "field 'steps[0] (step 'classify').cascade";
  const auto error_of = [&](const std::string& from, const std::string& to) {
    return Error(Replace(kCascade, from, to));
  };
  EXPECT_NE(error_of("[digits-logistic, digits-cnn]", "[digits-cnn]").find(at + ".models': expected a list of 2 to 4"),
            std::string::npos);
  EXPECT_NE(error_of("[digits-logistic, digits-cnn]", "[a, b, c, d, e]").find(at + ".models'"),
            std::string::npos);
  EXPECT_NE(error_of("digits-cnn]", "digits-logistic]").find(at + ".models[1]': model 'digits-logistic' is already a stage"),
            std::string::npos);
  EXPECT_NE(error_of("confidence: margin", "confidence: entropy").find(at + ".confidence': expected top_probability or margin"),
            std::string::npos);
  EXPECT_NE(error_of("min_accuracy: 0.97", "min_accuracy: 0.97, threshold: 0.5").find(at + "': needs exactly one of"),
            std::string::npos);
  EXPECT_NE(error_of(", min_accuracy: 0.97", "").find(at + "': needs exactly one of"), std::string::npos);
  EXPECT_NE(error_of("min_accuracy: 0.97", "min_accuracy: 1.5").find(at + ".min_accuracy': must be 0..1"),
            std::string::npos);
  EXPECT_NE(error_of("min_accuracy: 0.97", "threshold: -0.1").find(at + ".threshold': must be 0..1"),
            std::string::npos);
  EXPECT_NE(error_of("confidence: margin", "confidence: margin, model: x").find(at + ".model': unknown field"),
            std::string::npos);
  EXPECT_NE(error_of("    inputs: {pixels: pixels}", "    model: digits-cnn\n    inputs: {pixels: pixels}")
                .find("needs exactly one of model, task, preprocess, postprocess, cascade"),
            std::string::npos);
}

TEST(PipelineConfigTest, SwitchAndFanoutErrorsNameTheStepAndField) {
  const std::string base = Replace(kCascade, "cascade: {models: [digits-logistic, digits-cnn], confidence: margin, min_accuracy: 0.97}", "STEP");
  const auto error_of = [&](const std::string& step) { return Error(Replace(base, "STEP", step)); };
  const std::string at = "field 'steps[0] (step 'classify').";
  auto ok = Parse(Replace(base, "STEP", "switch: {parameter: tier, cases: {fast: a, best: b}, default: a}"));
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(ok->steps[0].kind, StepKind::kSwitch);
  EXPECT_EQ(ok->steps[0].switch_.cases,
            (std::vector<std::pair<std::string, std::string>>{{"fast", "a"}, {"best", "b"}}));
  EXPECT_EQ(ok->steps[0].switch_.default_model, "a");
  ok = Parse(Replace(base, "STEP", "fanout: {models: [a, b], join: concat}"));
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(ok->steps[0].fanout.join, Join::kConcat);
  EXPECT_NE(error_of("switch: {parameter: tier, input: pixels, cases: {a: a}}").find(at + "switch': needs exactly one of parameter"),
            std::string::npos);
  EXPECT_NE(error_of("switch: {parameter: tier, cases: {}}").find(at + "switch.cases': expected a map of 1 to 8"),
            std::string::npos);
  EXPECT_NE(error_of("switch: {parameter: tier, cases: {a: ''}}").find(at + "switch.cases.a': must not be empty"),
            std::string::npos);
  EXPECT_NE(error_of("switch: {input: lane, cases: {a: a}}").find(at + "switch.input': unknown pipeline input 'lane'"),
            std::string::npos);
  EXPECT_NE(error_of("fanout: {models: [a]}").find(at + "fanout.models': expected a list of 2 to 8"),
            std::string::npos);
  EXPECT_NE(error_of("fanout: {models: [a, a]}").find(at + "fanout.models[1]': model 'a' is already a branch"),
            std::string::npos);
  EXPECT_NE(error_of("fanout: {models: [a, b], join: max}").find(at + "fanout.join': expected each, mean or concat"),
            std::string::npos);
}

TEST(PipelineConfigTest, SplitSource) {
  EXPECT_EQ(SplitSource("image"), (std::pair<std::string, std::string>{"", "image"}));
  EXPECT_EQ(SplitSource("decode.pixels"), (std::pair<std::string, std::string>{"decode", "pixels"}));
}

}  // namespace
}  // namespace somm::pipeline
