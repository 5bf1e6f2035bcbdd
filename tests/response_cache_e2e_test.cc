// End-to-end, the response cache (docs/lifecycle.md): digits-mlp's
// model.yaml enables it with a small bound. A repeated query is answered
// with somm_cache_hit and the same outputs over REST and gRPC, /metrics
// counts hits and misses, the bound holds, an unload and load (a reload)
// invalidates, and digits-cnn, without the setting, never hits. Runs
// embedded and, as response_cache_e2e_cluster_test, through a router in
// front of two workers (tests/server_process.h): each router keeps its own.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "e2e_fixture.h"
#include "proto/inference.grpc.pb.h"

namespace somm::testing {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// 0.01 MiB: room for about 150 digits answers (40 bytes of logits plus the
// key and names each).
constexpr char kCacheYaml[] = "\nresponse_cache: {enable: true, max_mb: 0.01}\n";

class ResponseCacheE2ETest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    demo_ = new std::string(DemoRepository());
    digits_ = new HeldOutDigits(LoadHeldOutDigits(*demo_));
    repo_ = new std::string(MakeTestRepository(*demo_, "response-cache"));
    std::ofstream(fs::path(*repo_) / "digits-mlp" / "model.yaml", std::ios::app) << kCacheYaml;
    server_ = new ServerProcess(SommBinary(), *repo_);
  }
  static void TearDownTestSuite() {
    delete server_;
    delete digits_;
    delete demo_;
    if (repo_) fs::remove_all(*repo_);
    delete repo_;
  }
  void SetUp() override {
    ASSERT_GE(digits_->pixels.size(), 300u) << "no held-out digits (run scripts/setup first)";
    ASSERT_TRUE(server_->ok()) << "server did not start; log: " << server_->log();
  }

  static json Ask(const std::string& model, size_t digit) {
    httplib::Client c("127.0.0.1", server_->http_port());
    c.set_read_timeout(60, 0);
    json body;
    body["inputs"] = json::array({{{"name", "pixels"},
                                   {"datatype", "FP32"},
                                   {"shape", {1, 64}},
                                   {"data", digits_->pixels[digit]}}});
    auto r = c.Post("/v2/models/" + model + "/infer", body.dump(), "application/json");
    if (!r || r->status != 200) {
      ADD_FAILURE() << model << " digit " << digit << ": " << (r ? r->body : "no answer");
      return json::object();
    }
    return json::parse(r->body);
  }
  static bool Hit(const json& answer) {
    return answer.value("parameters", json::object()).value("somm_cache_hit", false);
  }
  // The sum of a metric's samples whose labels include `label` (one router's
  // /metrics in a cluster: the one the test talks to).
  static double Metric(const std::string& name, const std::string& label) {
    httplib::Client m("127.0.0.1", server_->metrics_port());
    auto r = m.Get("/metrics");
    if (!r) return -1;
    double total = 0;
    std::istringstream lines(r->body);
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind(name + "{", 0) == 0 && line.find(label) != std::string::npos) {
        total += std::stod(line.substr(line.rfind(' ') + 1));
      }
    }
    return total;
  }

  static inline std::string* demo_ = nullptr;
  static inline std::string* repo_ = nullptr;
  static inline HeldOutDigits* digits_ = nullptr;
  static inline ServerProcess* server_ = nullptr;
};

TEST_F(ResponseCacheE2ETest, ARepeatedQueryIsAHitWithTheSameAnswerOverRestAndGrpc) {
  const json first = Ask("digits-mlp", 7);
  const json second = Ask("digits-mlp", 7);
  EXPECT_FALSE(Hit(first)) << first.dump();
  EXPECT_TRUE(Hit(second)) << second.dump();
  EXPECT_EQ(second["parameters"]["somm_decision"], "cache");
  EXPECT_EQ(second["outputs"][0]["data"], first["outputs"][0]["data"]);
  EXPECT_EQ(second["model_version"], first["model_version"]);
  EXPECT_FALSE(Hit(Ask("digits-mlp", 8))) << "another input misses";

  // gRPC: the same key (the inputs' bytes), so the REST answer is found.
  auto stub = inference::GRPCInferenceService::NewStub(grpc::CreateChannel(
      "127.0.0.1:" + std::to_string(server_->grpc_port()), grpc::InsecureChannelCredentials()));
  inference::ModelInferRequest req;
  req.set_model_name("digits-mlp");
  auto* in = req.add_inputs();
  in->set_name("pixels");
  in->set_datatype("FP32");
  in->add_shape(1);
  in->add_shape(64);
  for (float f : digits_->pixels[7]) in->mutable_contents()->add_fp32_contents(f);
  grpc::ClientContext ctx;
  inference::ModelInferResponse resp;
  ASSERT_TRUE(stub->ModelInfer(&ctx, req, &resp).ok());
  ASSERT_TRUE(resp.parameters().count("somm_cache_hit"));
  EXPECT_TRUE(resp.parameters().at("somm_cache_hit").bool_param());

  EXPECT_GE(Metric("somm_response_cache_hits_total", "model=\"digits-mlp\""), 2);
  EXPECT_GE(Metric("somm_response_cache_misses_total", "model=\"digits-mlp\""), 2);
  EXPECT_GT(Metric("somm_response_cache_bytes", "model=\"digits-mlp\""), 0);
}

TEST_F(ResponseCacheE2ETest, TheBoundHoldsAndAModelWithoutTheSettingNeverHits) {
  for (size_t i = 0; i < 300; ++i) Ask("digits-mlp", i);
  EXPECT_LE(Metric("somm_response_cache_bytes", "model=\"digits-mlp\""), 0.01 * 1024 * 1024);
  EXPECT_GT(Metric("somm_response_cache_evictions_total", "model=\"digits-mlp\""), 0);
  const double entries = Metric("somm_response_cache_entries", "model=\"digits-mlp\"");
  EXPECT_GT(entries, 0);
  EXPECT_LT(entries, 300);
  // The most recent answer is still there; the oldest were evicted.
  EXPECT_TRUE(Hit(Ask("digits-mlp", 299)));
  EXPECT_FALSE(Hit(Ask("digits-mlp", 0)));

  EXPECT_FALSE(Hit(Ask("digits-cnn", 5)));
  EXPECT_FALSE(Hit(Ask("digits-cnn", 5))) << "digits-cnn keeps no cache";
}

TEST_F(ResponseCacheE2ETest, AReloadInvalidatesTheModelsAnswers) {
  EXPECT_TRUE(Hit([&] { Ask("digits-mlp", 42); return Ask("digits-mlp", 42); }()));
  httplib::Client c("127.0.0.1", server_->http_port());
  c.set_read_timeout(120, 0);
  auto unload = c.Post("/v2/repository/models/digits-mlp/unload", "{}", "application/json");
  ASSERT_TRUE(unload);
  ASSERT_EQ(unload->status, 200) << unload->body;
  auto load = c.Post("/v2/repository/models/digits-mlp/load", "{}", "application/json");
  ASSERT_TRUE(load);
  ASSERT_EQ(load->status, 200) << load->body;
  EXPECT_FALSE(Hit(Ask("digits-mlp", 42))) << "an answer of the model before its reload";
  // The cache fills again. (A cluster's router reads the model once when its
  // load call returns and again at the catalog's notice, and each read
  // starts the model's answers afresh: allow the second read its miss.)
  bool hit = false;
  for (int i = 0; i < 20 && !hit; ++i) {
    hit = Hit(Ask("digits-mlp", 42));
    if (!hit) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(hit);
}

}  // namespace
}  // namespace somm::testing
