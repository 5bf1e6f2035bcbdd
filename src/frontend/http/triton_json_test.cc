#include "frontend/http/triton_json.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace somm::oip {
namespace {

using nlohmann::json;

// The $stats_model_response of Triton's statistics extension, field by
// field, with every duration a {"count", "ns"} pair of numbers.
TEST(TritonJsonTest, StatisticsInTritonsShape) {
  ModelStatistics s;
  s.name = "digits-mlp";
  s.version = "1";
  s.last_inference_ms = 1764390000123;
  s.inference_count = 7;
  s.execution_count = 3;
  s.inference_stats.success = {5, 5000};
  s.inference_stats.fail = {2, 900};
  s.inference_stats.queue = {5, 100};
  s.inference_stats.compute_input = {5, 10};
  s.inference_stats.compute_infer = {5, 4000};
  s.inference_stats.compute_output = {5, 20};
  s.batch_stats.push_back({4, {1, 3}, {1, 2000}, {1, 6}});
  const json body = json::parse(EncodeModelStatistics({s}));
  ASSERT_EQ(body["model_stats"].size(), 1u);
  const json& m = body["model_stats"][0];
  EXPECT_EQ(m["name"], "digits-mlp");
  EXPECT_EQ(m["version"], "1");
  EXPECT_TRUE(m["last_inference"].is_number_unsigned());
  EXPECT_EQ(m["last_inference"], 1764390000123u);
  EXPECT_EQ(m["inference_count"], 7);
  EXPECT_EQ(m["execution_count"], 3);
  const json& i = m["inference_stats"];
  EXPECT_EQ(i["success"], json({{"count", 5}, {"ns", 5000}}));
  EXPECT_EQ(i["fail"], json({{"count", 2}, {"ns", 900}}));
  EXPECT_EQ(i["queue"]["ns"], 100);
  EXPECT_EQ(i["compute_input"]["ns"], 10);
  EXPECT_EQ(i["compute_infer"]["ns"], 4000);
  EXPECT_EQ(i["compute_output"]["ns"], 20);
  EXPECT_EQ(i["cache_hit"], json({{"count", 0}, {"ns", 0}}));
  EXPECT_EQ(i["cache_miss"], json({{"count", 0}, {"ns", 0}}));
  ASSERT_EQ(m["batch_stats"].size(), 1u);
  EXPECT_EQ(m["batch_stats"][0]["batch_size"], 4);
  EXPECT_EQ(m["batch_stats"][0]["compute_infer"], json({{"count", 1}, {"ns", 2000}}));
  EXPECT_TRUE(m["response_stats"].is_object());
  EXPECT_TRUE(m["memory_usage"].is_array());
  EXPECT_EQ(json::parse(EncodeModelStatistics({})), json({{"model_stats", json::array()}}));
}

ModelConfiguration DigitsConfiguration() {
  ModelConfiguration c;
  ModelConfig& m = c.config;
  m.name = "digits-mlp";
  m.task = "classification/digits";
  m.max_batch_size = 64;
  m.inputs.push_back({"pixels", DataType::kFp32, {64}});
  m.outputs.push_back({"logits", DataType::kFp32, {10}});
  m.outputs.push_back({"tokens", DataType::kBytes, {-1}});
  m.dynamic_batching = DynamicBatchingOptions{250, {16, 32, 64}, 4096};
  m.instance_count = 2;
  c.version = "1";
  c.platform = "pytorch_torchscript";
  c.model_filename = "model.pt";
  c.parameters["somm_task"] = m.task;
  return c;
}

// Triton's ModelConfig as JSON: enums by name, dims per sample, somm's
// own facts under parameters as {"string_value": ...}.
TEST(TritonJsonTest, ConfigurationInTritonsShape) {
  ModelConfiguration c = DigitsConfiguration();
  c.instance_groups.push_back({"ts-fp32@cpu1", "cpu", 0, 2});
  c.instance_groups.push_back({"ts-fp16@cuda0", "cuda", 1, 1});
  const json body = json::parse(EncodeModelConfiguration(c));
  EXPECT_EQ(body["name"], "digits-mlp");
  EXPECT_EQ(body["platform"], "pytorch_torchscript");
  EXPECT_EQ(body["backend"], "torchscript");
  EXPECT_EQ(body["max_batch_size"], 64);
  EXPECT_EQ(body["default_model_filename"], "model.pt");
  EXPECT_EQ(body["version_policy"], json({{"latest", {{"num_versions", 1}}}}));
  ASSERT_EQ(body["input"].size(), 1u);
  EXPECT_EQ(body["input"][0]["name"], "pixels");
  EXPECT_EQ(body["input"][0]["data_type"], "TYPE_FP32");
  EXPECT_EQ(body["input"][0]["dims"], json::array({64}));
  ASSERT_EQ(body["output"].size(), 2u);
  EXPECT_EQ(body["output"][1]["data_type"], "TYPE_STRING");  // BYTES
  EXPECT_EQ(body["output"][1]["dims"], json::array({-1}));
  const json& d = body["dynamic_batching"];
  EXPECT_EQ(d["preferred_batch_size"], json({16, 32, 64}));
  EXPECT_EQ(d["max_queue_delay_microseconds"], 250);
  EXPECT_EQ(d["default_queue_policy"]["max_queue_size"], 4096);
  ASSERT_EQ(body["instance_group"].size(), 2u);
  EXPECT_EQ(body["instance_group"][0]["kind"], "KIND_CPU");
  EXPECT_EQ(body["instance_group"][0]["count"], 2);
  EXPECT_EQ(body["instance_group"][1]["kind"], "KIND_GPU");
  EXPECT_EQ(body["instance_group"][1]["gpus"], json::array({1}));
  EXPECT_EQ(body["parameters"]["somm_task"], json({{"string_value", "classification/digits"}}));
  EXPECT_EQ(body["response_cache"]["enable"], false);
}

TEST(TritonJsonTest, ConfigurationWithoutBatchingOrInstances) {
  ModelConfiguration c = DigitsConfiguration();
  c.config.dynamic_batching.reset();
  c.config.version_policy.kind = VersionPolicy::Kind::kSpecific;
  c.config.version_policy.specific = {1, 3};
  const json body = json::parse(EncodeModelConfiguration(c));
  // Without dynamic batching a query runs with the batch it brought.
  EXPECT_FALSE(body.contains("dynamic_batching"));
  EXPECT_EQ(body["version_policy"], json({{"specific", {{"versions", {1, 3}}}}}));
  // Nothing loaded: the configured instance floor, the device left to somm.
  ASSERT_EQ(body["instance_group"].size(), 1u);
  EXPECT_EQ(body["instance_group"][0]["kind"], "KIND_AUTO");
  EXPECT_EQ(body["instance_group"][0]["count"], 2);
}

}  // namespace
}  // namespace somm::oip
