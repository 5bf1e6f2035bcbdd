// End-to-end: Triton's statistics and model configuration extensions on
// the real somm binary, over REST (GET .../stats, .../config) and gRPC
// (ModelStatistics, ModelConfig with the generated client), after queries
// that succeed, are refused and fail while the model runs. Also run
// through a router in front of two workers (SOMM_E2E_TOPOLOGY=cluster).
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "e2e_fixture.h"
#include "proto/inference.grpc.pb.h"

namespace somm::testing {
namespace {

using nlohmann::json;

class StatisticsE2ETest : public DemoServerSuite<StatisticsE2ETest> {
 protected:
  httplib::Client Client() {
    httplib::Client c("127.0.0.1", server_->http_port());
    c.set_read_timeout(30, 0);
    return c;
  }

  static std::unique_ptr<inference::GRPCInferenceService::Stub> Stub() {
    return inference::GRPCInferenceService::NewStub(
        grpc::CreateChannel("127.0.0.1:" + std::to_string(server_->grpc_port()),
                            grpc::InsecureChannelCredentials()));
  }

  json Rows(size_t n, size_t first = 0) const {
    json data = json::array();
    for (size_t i = 0; i < n; ++i) {
      for (float v : digits_->pixels[first + i]) data.push_back(v);
    }
    return {{"inputs", {{{"name", "pixels"}, {"datatype", "FP32"}, {"shape", {n, 64}},
                         {"data", data}}}}};
  }

  // The one row of `model` version 1 in GET .../stats.
  json RestStats(const std::string& model) {
    auto c = Client();
    auto r = c.Get("/v2/models/" + model + "/versions/1/stats");
    EXPECT_TRUE(r);
    if (!r) return json();
    EXPECT_EQ(r->status, 200) << r->body;
    json body = json::parse(r->body);
    EXPECT_EQ(body["model_stats"].size(), 1u);
    return body["model_stats"][0];
  }

  static uint64_t Count(const json& row, const char* stat) {
    return row["inference_stats"][stat]["count"].get<uint64_t>();
  }
  static uint64_t Ns(const json& row, const char* stat) {
    return row["inference_stats"][stat]["ns"].get<uint64_t>();
  }
};

int64_t UnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// N queries (one of 4 samples), R refused, F failed while the model ran:
// every count moves by exactly its share, and the times are non-zero and
// add up as their meanings say.
TEST_F(StatisticsE2ETest, RestCountsSuccessesFailuresSamplesAndBatches) {
  auto c = Client();
  const json before = RestStats("digits-logistic");
  const json thrower_before = RestStats("thrower");
  const int64_t started_ms = UnixMs();
  constexpr int kSingles = 6;
  for (int i = 0; i < kSingles; ++i) {
    auto r = c.Post("/v2/models/digits-logistic/infer", Rows(1, i).dump(), "application/json");
    ASSERT_EQ(r->status, 200) << r->body;
  }
  auto four = c.Post("/v2/models/digits-logistic/infer", Rows(4).dump(), "application/json");
  ASSERT_EQ(four->status, 200) << four->body;
  // Refused: a wrong shape (the model is known, the query is not run).
  json wrong = Rows(1);
  wrong["inputs"][0]["shape"] = {1, 63};
  wrong["inputs"][0]["data"].erase(0);
  constexpr int kRefused = 2;
  for (int i = 0; i < kRefused; ++i) {
    EXPECT_EQ(c.Post("/v2/models/digits-logistic/infer", wrong.dump(), "application/json")->status,
              400);
  }
  // Failed while running: the thrower model throws on a large input sum.
  json throws = {{"inputs", {{{"name", "x"}, {"datatype", "FP32"}, {"shape", {1, 4}},
                              {"data", {1000, 1000, 1000, 1000}}}}}};
  EXPECT_EQ(c.Post("/v2/models/thrower/infer", throws.dump(), "application/json")->status, 500);

  const json after = RestStats("digits-logistic");
  EXPECT_EQ(after["name"], "digits-logistic");
  EXPECT_EQ(after["version"], "1");
  EXPECT_EQ(Count(after, "success") - Count(before, "success"), uint64_t{kSingles + 1});
  EXPECT_EQ(Count(after, "fail") - Count(before, "fail"), uint64_t{kRefused});
  EXPECT_GT(Ns(after, "fail"), Ns(before, "fail"));
  EXPECT_EQ(after["inference_count"].get<uint64_t>() - before["inference_count"].get<uint64_t>(),
            uint64_t{kSingles + 4});
  // One client, one query at a time: each ran in a batch of its own.
  EXPECT_EQ(after["execution_count"].get<uint64_t>() - before["execution_count"].get<uint64_t>(),
            uint64_t{kSingles + 1});
  EXPECT_EQ(Count(after, "queue") - Count(before, "queue"), uint64_t{kSingles + 1});
  EXPECT_EQ(Count(after, "compute_infer") - Count(before, "compute_infer"), uint64_t{kSingles + 1});
  EXPECT_GT(Ns(after, "compute_infer"), Ns(before, "compute_infer"));
  EXPECT_GT(Ns(after, "queue"), Ns(before, "queue"));
  EXPECT_GT(Ns(after, "compute_output"), Ns(before, "compute_output"));
  // A query's time in the server holds its wait and its batch's run.
  const uint64_t parts = (Ns(after, "queue") - Ns(before, "queue")) +
                         (Ns(after, "compute_input") - Ns(before, "compute_input")) +
                         (Ns(after, "compute_infer") - Ns(before, "compute_infer")) +
                         (Ns(after, "compute_output") - Ns(before, "compute_output"));
  EXPECT_GE(Ns(after, "success") - Ns(before, "success"), parts);
  EXPECT_GE(after["last_inference"].get<int64_t>(), started_ms);
  EXPECT_LE(after["last_inference"].get<int64_t>(), UnixMs());
  // Batches by size: the sizes 1 and 4 ran, and the rows add up to the
  // executions.
  uint64_t executions = 0;
  bool saw_four = false;
  for (const json& b : after["batch_stats"]) {
    executions += b["compute_infer"]["count"].get<uint64_t>();
    EXPECT_EQ(b["compute_input"]["count"], b["compute_infer"]["count"]);
    if (b["batch_size"] == 4) saw_four = true;
  }
  EXPECT_EQ(executions, after["execution_count"].get<uint64_t>());
  EXPECT_TRUE(saw_four) << after.dump();

  const json thrower = RestStats("thrower");
  EXPECT_EQ(Count(thrower, "fail") - Count(thrower_before, "fail"), 1u);
  EXPECT_EQ(Count(thrower, "success"), Count(thrower_before, "success"));
}

TEST_F(StatisticsE2ETest, RestListsEveryServingModelAndRefusesUnknownOnes) {
  auto c = Client();
  auto all = c.Get("/v2/models/stats");
  ASSERT_EQ(all->status, 200) << all->body;
  std::vector<std::string> names;
  const json listed = json::parse(all->body);
  for (const json& row : listed["model_stats"]) names.push_back(row["name"]);
  for (const std::string& model : kDigitsModels) {
    EXPECT_NE(std::find(names.begin(), names.end(), model), names.end()) << model;
  }
  // A model that cannot load serves nothing, so it has no statistics.
  EXPECT_EQ(std::find(names.begin(), names.end(), "broken-config"), names.end());
  auto one = c.Get("/v2/models/digits-mlp/stats");
  ASSERT_EQ(one->status, 200);
  EXPECT_EQ(json::parse(one->body)["model_stats"][0]["version"], "1");
  // The answers metadata gives for what is not there.
  auto unknown = c.Get("/v2/models/no-such-model/stats");
  EXPECT_EQ(unknown->status, 404);
  EXPECT_EQ(json::parse(unknown->body), json::parse(c.Get("/v2/models/no-such-model")->body));
  EXPECT_EQ(c.Get("/v2/models/digits-mlp/versions/9/stats")->status, 404);
  EXPECT_EQ(c.Get("/v2/models/no-such-model/config")->status, 404);
  EXPECT_EQ(c.Post("/v2/models/digits-mlp/stats", "", "application/json")->status, 405);
}

TEST_F(StatisticsE2ETest, RestConfigurationIsTritonsModelConfig) {
  auto c = Client();
  // One query first, so that an instance is loaded.
  ASSERT_EQ(c.Post("/v2/models/digits-mlp/infer", Rows(1).dump(), "application/json")->status, 200);
  auto r = c.Get("/v2/models/digits-mlp/config");
  ASSERT_EQ(r->status, 200) << r->body;
  const json config = json::parse(r->body);
  EXPECT_EQ(config["name"], "digits-mlp");
  EXPECT_EQ(config["max_batch_size"], 64);
  EXPECT_EQ(config["backend"], "torchscript");
  EXPECT_EQ(config["platform"], json::parse(c.Get("/v2/models/digits-mlp")->body)["platform"]);
  ASSERT_EQ(config["input"].size(), 1u);
  EXPECT_EQ(config["input"][0]["name"], "pixels");
  EXPECT_EQ(config["input"][0]["data_type"], "TYPE_FP32");
  EXPECT_EQ(config["input"][0]["dims"], json::array({64}));
  EXPECT_EQ(config["output"][0]["dims"], json::array({10}));
  EXPECT_EQ(config["dynamic_batching"]["preferred_batch_size"], json({16, 32, 64}));
  EXPECT_EQ(config["dynamic_batching"]["default_queue_policy"]["max_queue_size"], 4096);
  ASSERT_GE(config["instance_group"].size(), 1u);
  EXPECT_EQ(config["instance_group"][0]["kind"], "KIND_CPU");
  EXPECT_GE(config["instance_group"][0]["count"].get<int>(), 1);
  EXPECT_EQ(config["version_policy"], json({{"latest", {{"num_versions", 1}}}}));
  const json& p = config["parameters"];
  EXPECT_EQ(p["somm_task"]["string_value"], "classification/digits");
  EXPECT_EQ(p["somm_accuracy"]["string_value"], "0.9733");
  EXPECT_EQ(p["somm_version"]["string_value"], "1");
  // The variants profiled so far (none until the first profile is in).
  if (p.contains("somm_variants")) {
    EXPECT_NE(p["somm_variants"]["string_value"].get<std::string>().find("ts-fp32"),
              std::string::npos);
  }
  EXPECT_EQ(c.Get("/v2/models/digits-mlp/versions/1/config")->body, r->body);
}

TEST_F(StatisticsE2ETest, GrpcStatisticsAndConfigWithTritonsMessages) {
  auto stub = Stub();
  auto stats = [&stub](const std::string& model) {
    grpc::ClientContext context;
    inference::ModelStatisticsRequest request;
    request.set_name(model);
    request.set_version("1");
    inference::ModelStatisticsResponse response;
    const grpc::Status s = stub->ModelStatistics(&context, request, &response);
    EXPECT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(response.model_stats_size(), 1);
    return response.model_stats_size() == 1 ? response.model_stats(0) : inference::ModelStatistics();
  };
  const inference::ModelStatistics before = stats("digits-cnn");
  constexpr int kQueries = 5;
  for (int i = 0; i < kQueries; ++i) {
    inference::ModelInferRequest request;
    request.set_model_name("digits-cnn");
    auto* in = request.add_inputs();
    in->set_name("pixels");
    in->set_datatype("FP32");
    in->add_shape(2);
    in->add_shape(64);
    std::string raw;
    for (int k = 0; k < 2; ++k) raw.append(reinterpret_cast<const char*>(digits_->pixels[i + k].data()), 256);
    request.add_raw_input_contents(raw);
    grpc::ClientContext context;
    inference::ModelInferResponse response;
    ASSERT_TRUE(stub->ModelInfer(&context, request, &response).ok());
  }
  {
    inference::ModelInferRequest bad;
    bad.set_model_name("digits-cnn");
    auto* in = bad.add_inputs();
    in->set_name("pixels");
    in->set_datatype("INT32");
    in->add_shape(1);
    in->add_shape(64);
    bad.add_raw_input_contents(std::string(256, '\0'));
    grpc::ClientContext context;
    inference::ModelInferResponse response;
    EXPECT_EQ(stub->ModelInfer(&context, bad, &response).error_code(), grpc::INVALID_ARGUMENT);
  }
  const inference::ModelStatistics after = stats("digits-cnn");
  EXPECT_EQ(after.name(), "digits-cnn");
  EXPECT_EQ(after.inference_stats().success().count() - before.inference_stats().success().count(),
            uint64_t{kQueries});
  EXPECT_EQ(after.inference_stats().fail().count() - before.inference_stats().fail().count(), 1u);
  EXPECT_EQ(after.inference_count() - before.inference_count(), uint64_t{2 * kQueries});
  EXPECT_GT(after.inference_stats().compute_infer().ns(), before.inference_stats().compute_infer().ns());
  EXPECT_GT(after.last_inference(), 0u);
  // The same figures as REST's, read with nothing in between.
  const json rest = RestStats("digits-cnn");
  EXPECT_EQ(rest["inference_stats"]["success"]["ns"].get<uint64_t>(),
            after.inference_stats().success().ns());
  EXPECT_EQ(rest["execution_count"].get<uint64_t>(), after.execution_count());
  ASSERT_EQ(static_cast<size_t>(after.batch_stats_size()), rest["batch_stats"].size());

  grpc::ClientContext context;
  inference::ModelConfigRequest request;
  request.set_name("digits-cnn");
  inference::ModelConfigResponse response;
  ASSERT_TRUE(stub->ModelConfig(&context, request, &response).ok());
  const inference::ModelConfig& config = response.config();
  EXPECT_EQ(config.name(), "digits-cnn");
  EXPECT_EQ(config.max_batch_size(), 64);
  ASSERT_EQ(config.input_size(), 1);
  EXPECT_EQ(config.input(0).data_type(), inference::TYPE_FP32);
  EXPECT_EQ(config.parameters().at("somm_task").string_value(), "classification/digits");
  ASSERT_GE(config.instance_group_size(), 1);
  EXPECT_EQ(config.instance_group(0).kind(), inference::ModelInstanceGroup::KIND_CPU);
  grpc::ClientContext missing_context;
  request.set_name("no-such-model");
  EXPECT_EQ(stub->ModelConfig(&missing_context, request, &response).error_code(), grpc::NOT_FOUND);
}

}  // namespace
}  // namespace somm::testing
