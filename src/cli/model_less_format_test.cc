#include "cli/model_less_format.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

namespace somm {
namespace {

TEST(ParseTensorFlagTest, ReadsNameDatatypeAndDims) {
  StatusOr<TensorSpec> t = ParseTensorFlag("pixels:FP32:64", "--input");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->name, "pixels");
  EXPECT_EQ(t->datatype, DataType::kFp32);
  EXPECT_EQ(t->shape, Shape({64}));
  EXPECT_EQ(ParseTensorFlag("image:UINT8:3x224x224", "--input")->shape, Shape({3, 224, 224}));
  EXPECT_EQ(ParseTensorFlag("image:FP16:3,-1,-1", "--input")->shape, Shape({3, -1, -1}));
  EXPECT_EQ(ParseTensorFlag("score:FP64:", "--output")->shape, Shape({}));
}

TEST(ParseTensorFlagTest, NamesTheFlagAndTheProblem) {
  const std::pair<const char*, const char*> cases[] = {
      {"pixels", "needs two ':'"},
      {"pixels:FP32", "needs two ':'"},
      {":FP32:64", "the name is empty"},
      {"pixels:FLOAT:64", "unknown datatype 'FLOAT'"},
      {"pixels:FP32:64x", "end with a separator"},
      {"pixels:FP32:8xx8", "dimension '' is not an integer"},
      {"pixels:FP32:-2", "dimension '-2' is not an integer >= -1"},
      {"pixels:FP32:6.4", "dimension '6.4'"},
      {"pixels:FP32:a", "dimension 'a'"},
  };
  for (const auto& [text, fragment] : cases) {
    StatusOr<TensorSpec> t = ParseTensorFlag(text, "--output");
    ASSERT_FALSE(t.ok()) << text;
    EXPECT_EQ(t.status().message().rfind(std::string("--output '") + text + "'", 0), 0u)
        << t.status().message();
    EXPECT_NE(t.status().message().find(fragment), std::string::npos) << t.status().message();
  }
}

TEST(ParseParamFlagTest, NumbersBoolsAndStrings) {
  auto p = ParseParamFlag("latency_slo_ms=5");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->first, "latency_slo_ms");
  EXPECT_EQ(p->second, Parameter(5.0));
  EXPECT_EQ(ParseParamFlag("min_accuracy=0.9")->second, Parameter(0.9));
  EXPECT_EQ(ParseParamFlag("max_cost=1e-6")->second, Parameter(1e-6));
  EXPECT_EQ(ParseParamFlag("best_effort=true")->second, Parameter(true));
  EXPECT_EQ(ParseParamFlag("best_effort=false")->second, Parameter(false));
  EXPECT_EQ(ParseParamFlag("task=classification/digits")->second,
            Parameter(std::string("classification/digits")));
  EXPECT_EQ(ParseParamFlag("x=")->second, Parameter(std::string("")));
  EXPECT_EQ(ParseParamFlag("x=5ms")->second, Parameter(std::string("5ms")));
  EXPECT_EQ(ParseParamFlag("x=nan")->second, Parameter(std::string("nan")));
  EXPECT_EQ(ParseParamFlag("x=a=b")->second, Parameter(std::string("a=b")));
  EXPECT_FALSE(ParseParamFlag("novalue").ok());
  EXPECT_FALSE(ParseParamFlag("=5").ok());
}

RegistrationStatus Sample() {
  RegistrationStatus s;
  s.name = "digits-mlp";
  s.state = "READY";
  s.done = 10;
  s.total = 10;
  VariantProfile fp32;
  fp32.model = "digits-mlp";
  fp32.variant = "ts-fp32";
  fp32.precision = "fp32";
  fp32.accuracy = 0.97333;
  HardwareProfile cpu1;
  cpu1.hardware = {DeviceKind::kCpu, 0, 1};
  cpu1.latency = LatencyCurve::Fit({{1, 0.0123}, {64, 0.5}});
  cpu1.load_time_ms = 12.34;
  cpu1.peak_memory_mb = 2.5;
  HardwareProfile cpu2 = cpu1;
  cpu2.hardware.threads = 2;
  cpu2.latency = LatencyCurve::Fit({{8, 0.1}, {64, 0.3}});  // no batch-1 point: predicted
  cpu2.load_time_ms = 20;
  fp32.hardware = {cpu1, cpu2};
  VariantProfile int8 = fp32;
  int8.variant = "ts-int8";
  int8.precision = "int8";
  int8.accuracy.reset();
  int8.usable = false;
  int8.unusable_reason = "accuracy unknown";
  int8.hardware = {cpu1};
  s.variants = {fp32, int8};
  s.skipped = {"ts-bf16: CPU lacks avx512_bf16"};
  return s;
}

TEST(VariantTableTest, OneRowPerVariantAndAColumnPerHardware) {
  const std::string table = VariantTable(Sample());
  SCOPED_TRACE(table);
  EXPECT_EQ(table.rfind("VARIANT", 0), 0u);
  EXPECT_NE(table.find("cpu1 ms@1"), std::string::npos);
  EXPECT_NE(table.find("cpu2 ms@1"), std::string::npos);
  EXPECT_NE(table.find("digits-mlp:1:ts-fp32  fp32"), std::string::npos);
  EXPECT_NE(table.find("0.9733"), std::string::npos);
  EXPECT_NE(table.find("0.012"), std::string::npos);  // measured at batch 1
  // cpu2 has no batch-1 point: intercept + slope from the fit.
  const LatencyCurve cpu2 = LatencyCurve::Fit({{8, 0.1}, {64, 0.3}});
  char predicted[32];
  std::snprintf(predicted, sizeof(predicted), "%.3f", cpu2.Predict(1));
  EXPECT_NE(table.find(predicted), std::string::npos);
  EXPECT_NE(table.find("20.0"), std::string::npos);  // the larger load time
  EXPECT_NE(table.find("unusable digits-mlp:1:ts-int8: accuracy unknown"), std::string::npos);
  EXPECT_NE(table.find("skipped ts-bf16: CPU lacks avx512_bf16"), std::string::npos);
  // The int8 row has no cpu2 entry.
  const size_t int8_row = table.find("digits-mlp:1:ts-int8  int8");
  ASSERT_NE(int8_row, std::string::npos);
  const std::string row = table.substr(int8_row, table.find('\n', int8_row) - int8_row);
  EXPECT_NE(row.find(" no "), std::string::npos) << row;
  EXPECT_NE(row.find(" - "), std::string::npos) << row;
}

TEST(ProgressTest, BarAndSummary) {
  RegistrationStatus s;
  s.state = "GENERATING";
  s.done = 5;
  s.total = 10;
  s.phase = "profiling ts-int8 on cpu1";
  EXPECT_EQ(ProgressLine(s), "[#####.....] 5/10 profiling ts-int8 on cpu1");
  EXPECT_EQ(VariantsSummary(s), "GENERATING 5/10");
  s.done = 0;
  s.total = 0;
  s.phase = "";
  EXPECT_EQ(ProgressLine(s), "[..........] 0/0");
  s.done = 9;
  s.total = 9;
  EXPECT_EQ(ProgressLine(s), "[##########] 9/9");
  EXPECT_EQ(VariantsSummary(Sample()), "READY (2 variants)");
  s.state = "READY";
  s.variants.resize(1);
  EXPECT_EQ(VariantsSummary(s), "READY (1 variant)");
  s.state = "FAILED";
  EXPECT_EQ(VariantsSummary(s), "FAILED");
}

TEST(DecisionTableTest, FormatsEachRecord) {
  const std::string table = DecisionTable(
      {{1767225600123, "task:classification/digits", "min_accuracy=0.9", "loaded",
        "digits-mlp:1:ts-fp32", "cpu1", 0.25, 1.5e-7, "cheapest that meets the SLO"},
       {1767225601000, "digits-cnn", "none", "rejected", "", "", NAN, 0, "no variant"}});
  SCOPED_TRACE(table);
  EXPECT_EQ(table.rfind("TIME (UTC)", 0), 0u);
  EXPECT_NE(table.find("2026-01-01T00:00:00.123Z"), std::string::npos);
  EXPECT_NE(table.find("task:classification/digits"), std::string::npos);
  EXPECT_NE(table.find("0.250"), std::string::npos);
  EXPECT_NE(table.find("1.5e-07"), std::string::npos);
  EXPECT_NE(table.find("cheapest that meets the SLO"), std::string::npos);
  EXPECT_NE(table.find("rejected  -"), std::string::npos);
}

}  // namespace
}  // namespace somm
