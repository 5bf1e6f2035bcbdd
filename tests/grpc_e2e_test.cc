// End-to-end over gRPC with the generated OIP client stub, against the real
// somm binary; plus the concurrency and graceful-shutdown tests.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <algorithm>
#include <filesystem>
#include <future>
#include <random>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/testing/thread_names.h"
#include "e2e_fixture.h"
#include "proto/inference.grpc.pb.h"

namespace somm::testing {
namespace {

using inference::GRPCInferenceService;

class GrpcE2ETest : public DemoServerSuite<GrpcE2ETest> {
 protected:

  static std::unique_ptr<GRPCInferenceService::Stub> Stub() {
    grpc::ChannelArguments args;
    args.SetMaxSendMessageSize(64 << 20);
    auto channel = grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(server_->grpc_port()),
                                             grpc::InsecureChannelCredentials(), args);
    return GRPCInferenceService::NewStub(channel);
  }

  static inference::ModelInferRequest Request(const std::string& model,
                                              const std::vector<std::vector<float>>& rows) {
    inference::ModelInferRequest req;
    req.set_model_name(model);
    auto* in = req.add_inputs();
    in->set_name("pixels");
    in->set_datatype("FP32");
    in->add_shape(static_cast<int64_t>(rows.size()));
    in->add_shape(64);
    std::string raw;
    for (const auto& r : rows) raw.append(reinterpret_cast<const char*>(r.data()), 256);
    req.add_raw_input_contents(raw);
    return req;
  }

  static std::vector<float> Logits(const inference::ModelInferResponse& resp) {
    std::vector<float> out(resp.raw_output_contents(0).size() / 4);
    std::memcpy(out.data(), resp.raw_output_contents(0).data(), out.size() * 4);
    return out;
  }

};

TEST_F(GrpcE2ETest, HealthAndMetadata) {
  auto stub = Stub();
  grpc::ClientContext c1;
  inference::ServerLiveResponse live;
  ASSERT_TRUE(stub->ServerLive(&c1, {}, &live).ok());
  EXPECT_TRUE(live.live());
  grpc::ClientContext c2;
  inference::ModelMetadataRequest mreq;
  mreq.set_name("digits-cnn");
  inference::ModelMetadataResponse md;
  ASSERT_TRUE(stub->ModelMetadata(&c2, mreq, &md).ok());
  EXPECT_EQ(md.inputs(0).name(), "pixels");
  ASSERT_EQ(md.inputs(0).shape_size(), 2);
  EXPECT_EQ(md.inputs(0).shape(0), -1);
  EXPECT_EQ(md.inputs(0).shape(1), 64);
  grpc::ClientContext c3;
  inference::ModelReadyRequest rreq;
  rreq.set_name("digits-cnn");
  rreq.set_version("1");
  inference::ModelReadyResponse ready;
  ASSERT_TRUE(stub->ModelReady(&c3, rreq, &ready).ok());
  EXPECT_TRUE(ready.ready());
}

TEST_F(GrpcE2ETest, EveryDigitsModelMatchesLibtorchElementByElement) {
  auto stub = Stub();
  const std::vector<std::vector<float>> batch(digits_->pixels.begin() + 10, digits_->pixels.begin() + 13);
  for (const auto& model : kDigitsModels) {
    const auto expected = TorchReference(*demo_ + "/" + model + "/1/model.pt", batch);
    grpc::ClientContext ctx;
    inference::ModelInferResponse resp;
    auto status = stub->ModelInfer(&ctx, Request(model, batch), &resp);
    ASSERT_TRUE(status.ok()) << model << ": " << status.error_message();
    ASSERT_EQ(resp.outputs_size(), 1);
    EXPECT_EQ(resp.outputs(0).name(), "logits");
    EXPECT_EQ(resp.outputs(0).shape(0), 3);
    const auto got = Logits(resp);
    ASSERT_EQ(got.size(), 30u);
    for (size_t k = 0; k < 30; ++k) EXPECT_NEAR(got[k], expected[k], 1e-5) << model << " element " << k;
  }
}

TEST_F(GrpcE2ETest, TypedContentsWorkToo) {
  auto stub = Stub();
  inference::ModelInferRequest req;
  req.set_model_name("digits-mlp");
  auto* in = req.add_inputs();
  in->set_name("pixels");
  in->set_datatype("FP32");
  in->add_shape(1);
  in->add_shape(64);
  for (float v : digits_->pixels[20]) in->mutable_contents()->add_fp32_contents(v);
  grpc::ClientContext ctx;
  inference::ModelInferResponse resp;
  ASSERT_TRUE(stub->ModelInfer(&ctx, req, &resp).ok());
  const auto expected = TorchReference(*demo_ + "/digits-mlp/1/model.pt", {digits_->pixels[20]});
  const auto got = Logits(resp);
  for (size_t k = 0; k < 10; ++k) EXPECT_NEAR(got[k], expected[k], 1e-5);
}

TEST_F(GrpcE2ETest, EachBadInputGetsItsOwnCodeAndMessageThenServingGoesOn) {
  auto stub = Stub();
  const auto good = Request("digits-mlp", {digits_->pixels[0]});
  struct Case {
    std::string name;
    inference::ModelInferRequest req;
    grpc::StatusCode code;
    std::string message;
  };
  std::vector<Case> cases;
  {
    auto r = good;
    r.mutable_inputs(0)->set_shape(1, 63);
    cases.push_back({"wrong shape", r, grpc::INVALID_ARGUMENT, "63"});
  }
  {
    auto r = good;
    r.mutable_inputs(0)->set_datatype("INT32");
    cases.push_back({"wrong datatype", r, grpc::INVALID_ARGUMENT, "datatype INT32, expected FP32"});
  }
  {
    auto r = good;
    r.mutable_raw_input_contents(0)->resize(200);
    cases.push_back({"size mismatch", r, grpc::INVALID_ARGUMENT, "200"});
  }
  {
    auto r = good;
    r.mutable_inputs(0)->set_datatype("FLOAT");
    cases.push_back({"unknown datatype", r, grpc::INVALID_ARGUMENT, "FLOAT"});
  }
  {
    auto r = good;
    r.set_model_name("no-such-model");
    cases.push_back({"unknown model", r, grpc::NOT_FOUND, "unknown model 'no-such-model'"});
  }
  {
    auto r = good;
    r.set_model_version("9");
    cases.push_back({"unknown version", r, grpc::NOT_FOUND, "no version 9"});
  }
  {
    auto r = Request("digits-mlp", std::vector<std::vector<float>>(64, digits_->pixels[0]));
    r.mutable_raw_input_contents(0)->append(300000, '\0');
    cases.push_back({"oversized message", r, grpc::RESOURCE_EXHAUSTED, ""});
  }
  {
    inference::ModelInferRequest r;
    r.set_model_name("thrower");
    auto* in = r.add_inputs();
    in->set_name("x");
    in->set_datatype("FP32");
    in->add_shape(1);
    in->add_shape(4);
    for (int i = 0; i < 4; ++i) in->mutable_contents()->add_fp32_contents(1000);
    cases.push_back({"model throws", r, grpc::INTERNAL, "input sum above 1000"});
  }
  for (const auto& c : cases) {
    grpc::ClientContext ctx;
    inference::ModelInferResponse resp;
    auto status = stub->ModelInfer(&ctx, c.req, &resp);
    EXPECT_EQ(status.error_code(), c.code) << c.name << ": " << status.error_message();
    EXPECT_NE(status.error_message().find(c.message), std::string::npos)
        << c.name << ": " << status.error_message();
    grpc::ClientContext ok_ctx;
    ASSERT_TRUE(stub->ModelInfer(&ok_ctx, good, &resp).ok()) << "after " << c.name;
  }
}

// Every completion of gRPC, the server's own calls and (through a router) its
// calls to the workers alike, is taken by the threads of somm's one completion
// queue: gRPC's callback API, whose "nexting" threads would poll the sockets
// beside them and hand wake-ups over, is never used (docs/cluster.md, the
// router hop). Queries of both wires first, so that a router has called its
// workers for both.
TEST_F(GrpcE2ETest, EveryGrpcCompletionIsTakenBySommsQueueThreads) {
  auto stub = Stub();
  httplib::Client http("127.0.0.1", server_->http_port());
  const nlohmann::json body = {{"inputs", {{{"name", "pixels"}, {"datatype", "FP32"},
                                            {"shape", {1, 64}}, {"data", digits_->pixels[0]}}}}};
  for (int q = 0; q < 20; ++q) {
    grpc::ClientContext ctx;
    inference::ModelInferResponse resp;
    ASSERT_TRUE(stub->ModelInfer(&ctx, Request("digits-mlp", {digits_->pixels[q]}), &resp).ok());
    auto r = http.Post("/v2/models/digits-mlp/infer", body.dump(), "application/json");
    ASSERT_TRUE(r && r->status == 200) << (r ? r->body : "no answer");
  }
  const std::vector<std::string> names = testing::ThreadNames(server_->pid());
  EXPECT_EQ(std::count(names.begin(), names.end(), "nexting_thread"), 0);
  // A router serves its frontend and takes its workers' answers on the same
  // queue: at least two threads on it (--grpc-threads).
  const bool through_router = std::getenv("SOMM_E2E_TOPOLOGY") != nullptr &&
                              std::string(std::getenv("SOMM_E2E_TOPOLOGY")) == "cluster";
  EXPECT_GE(std::count(names.begin(), names.end(), "somm-grpc-infer"), through_router ? 2 : 1);
}

// 8 clients x 500 queries, half over REST and half over gRPC, against a
// batching model: every answer must be right, and batches must have formed.
TEST_F(GrpcE2ETest, EightConcurrentClientsGetCorrectAnswersAndBatchesForm) {
  const auto& px = digits_->pixels;
  const auto expected = TorchReference(*demo_ + "/digits-mlp/1/model.pt", px);
  constexpr int kClients = 8, kQueries = 500;
  std::atomic<int> wrong{0}, failed{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      std::mt19937 rng(c);
      auto stub = Stub();
      httplib::Client http("127.0.0.1", server_->http_port());
      for (int q = 0; q < kQueries; ++q) {
        const size_t i = rng() % px.size();
        std::vector<float> got;
        if (c % 2 == 0) {
          grpc::ClientContext ctx;
          inference::ModelInferResponse resp;
          if (!stub->ModelInfer(&ctx, Request("digits-mlp", {px[i]}), &resp).ok()) { ++failed; continue; }
          got = Logits(resp);
        } else {
          nlohmann::json body = {{"inputs", {{{"name", "pixels"}, {"datatype", "FP32"},
                                              {"shape", {1, 64}}, {"data", px[i]}}}}};
          auto r = http.Post("/v2/models/digits-mlp/infer", body.dump(), "application/json");
          if (!r || r->status != 200) { ++failed; continue; }
          got = nlohmann::json::parse(r->body)["outputs"][0]["data"].get<std::vector<float>>();
        }
        bool same = got.size() == 10;
        for (size_t k = 0; same && k < 10; ++k) same = std::abs(got[k] - expected[i * 10 + k]) <= 1e-5;
        if (!same) ++wrong;
      }
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(wrong.load(), 0);

  httplib::Client m("127.0.0.1", server_->metrics_port());
  auto r = m.Get("/metrics");
  ASSERT_TRUE(r && r->status == 200);
  const std::string labels = "model=\"digits-mlp\",version=\"1\"";
  const double batches = MetricValue(r->body, "somm_inference_batch_size_count{" + labels + "}");
  const double singles = MetricValue(r->body, "somm_inference_batch_size_bucket{" + labels + ",le=\"1\"}");
  const double samples = MetricValue(r->body, "somm_inference_batch_size_sum{" + labels + "}");
  ASSERT_GT(batches, 0) << r->body.substr(0, 3000);
  EXPECT_GE(samples, kClients * kQueries);
  EXPECT_LT(singles, batches) << "no batch larger than 1 formed";
  std::printf("batches: %.0f executed for %.0f samples (%.0f of size 1), mean size %.2f\n",
              batches, samples, singles, samples / batches);
}

// SIGTERM: queries in flight finish, then the process exits 0.
TEST(GracefulShutdownTest, InFlightQueriesFinishAndExitIsZero) {
  const std::string demo = DemoRepository();
  const auto digits = LoadHeldOutDigits(demo);
  ASSERT_FALSE(digits.pixels.empty());
  const std::string repo = MakeTestRepository(demo, "shutdown");
  ServerProcess server(SommBinary(), repo);
  ASSERT_TRUE(server.ok());
  nlohmann::json body = {{"inputs", {{{"name", "pixels"}, {"datatype", "FP32"},
                                      {"shape", {1, 64}}, {"data", digits.pixels[0]}}}}};
  // slow-mlp holds queries up to 1.5 s for company, so these are in flight.
  std::vector<std::future<int>> inflight;
  for (int i = 0; i < 3; ++i) {
    inflight.push_back(std::async(std::launch::async, [&] {
      httplib::Client c("127.0.0.1", server.http_port());
      c.set_read_timeout(30, 0);
      auto r = c.Post("/v2/models/slow-mlp/infer", body.dump(), "application/json");
      return r ? r->status : -1;
    }));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  const int exit_code = server.Terminate();
  for (auto& f : inflight) EXPECT_EQ(f.get(), 200);
  EXPECT_EQ(exit_code, 0);
  httplib::Client late("127.0.0.1", server.http_port());
  EXPECT_FALSE(late.Get("/v2/health/live")) << "still accepting after exit";
  std::filesystem::remove_all(repo);
}

}  // namespace
}  // namespace somm::testing
