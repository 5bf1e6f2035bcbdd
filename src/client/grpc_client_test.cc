// GrpcClient against the real GrpcFrontend over loopback, with a
// FakeInferenceServer behind it.
#include "client/grpc_client.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <thread>

#include "frontend/grpc/grpc_server.h"
#include "api/testing/fake_inference_server.h"

namespace somm {
namespace {

using ::somm::testing::FakeInferenceServer;

Tensor FloatTensor(const std::string& name, std::vector<float> values) {
  Tensor t;
  t.name = name;
  t.datatype = DataType::kFp32;
  t.shape = {1, static_cast<int64_t>(values.size())};
  t.data.resize(values.size() * sizeof(float));
  std::memcpy(t.data.data(), values.data(), t.data.size());
  return t;
}

class GrpcClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ModelMetadata m;
    m.name = "digits";
    m.versions = {"1"};
    m.platform = "torchscript";
    m.inputs = {{"INPUT0", "FP32", {-1, 64}}};
    m.outputs = {{"OUTPUT0", "FP32", {-1, 10}}};
    fake_.Configure([&](FakeInferenceServer::Config& c) {
      c.models["digits"] = m;
      c.index = {{"digits", "1", "READY", ""}};
      c.task_model = "digits";  // serves every task
      // Answered as a batcher answers: on another thread, each output named
      // as its input, with the compute time among the parameters.
      c.inline_callback = false;
      c.keep_output_names = true;
      c.response_parameters["somm_compute_ms"] = 0.25;
    });
    GrpcFrontendOptions options;
    options.address = "127.0.0.1";
    options.port = 0;
    auto frontend = GrpcFrontend::Start(fake_, options);
    ASSERT_TRUE(frontend.ok()) << frontend.status().ToString();
    frontend_ = std::move(frontend).value();
    GrpcClientOptions client_options;
    client_options.call_timeout = std::chrono::seconds(10);
    auto client =
        GrpcClient::Connect("127.0.0.1:" + std::to_string(frontend_->port()), client_options);
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    client_ = std::move(client).value();
  }

  FakeInferenceServer fake_;
  std::unique_ptr<GrpcFrontend> frontend_;
  std::unique_ptr<GrpcClient> client_;
};

TEST_F(GrpcClientTest, HealthAndMetadata) {
  EXPECT_TRUE(client_->ServerLive().value());
  EXPECT_TRUE(client_->ServerReady().value());
  EXPECT_TRUE(client_->ModelReady("digits").value());
  EXPECT_EQ(client_->GetServerMetadata()->name, "somm");
  auto m = client_->GetModelMetadata("digits");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->platform, "torchscript");
  ASSERT_EQ(m->inputs.size(), 1u);
  EXPECT_EQ(m->inputs[0].shape, (Shape{-1, 64}));
  auto missing = client_->GetModelMetadata("nope");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
}

TEST_F(GrpcClientTest, InferRoundTrip) {
  InferenceRequest request;
  request.model_name = "digits";
  request.id = "q1";
  request.parameters["latency_slo_ms"] = int64_t{20};
  request.inputs.push_back(FloatTensor("INPUT0", {1.0f, 2.0f, 3.0f}));
  auto response = client_->Infer(request);
  ASSERT_TRUE(response.ok()) << response.status().ToString();
  EXPECT_EQ(response->id, "q1");
  EXPECT_EQ(response->model_version, "1");
  ASSERT_EQ(response->outputs.size(), 1u);
  EXPECT_EQ(response->outputs[0].name, "INPUT0");
  EXPECT_EQ(response->outputs[0].datatype, DataType::kFp32);
  EXPECT_EQ(response->outputs[0].shape, (Shape{1, 3}));
  EXPECT_EQ(response->outputs[0].data, request.inputs[0].data);
  EXPECT_EQ(std::get<std::string>(response->parameters.at("somm_device")), "cpu");
  EXPECT_EQ(std::get<double>(response->parameters.at("somm_compute_ms")), 0.25);
  EXPECT_EQ(std::get<int64_t>(fake_.calls().last_request.parameters.at("latency_slo_ms")), 20);
}

TEST_F(GrpcClientTest, ServerErrorsMapBackToSommCodes) {
  fake_.Configure([](auto& c) { c.infer_status = ResourceExhausted("queue full"); });
  InferenceRequest request;
  request.model_name = "digits";
  request.inputs.push_back(FloatTensor("INPUT0", {1.0f}));
  auto response = client_->Infer(request);
  EXPECT_EQ(response.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(response.status().message(), "queue full");
}

TEST_F(GrpcClientTest, MalformedLocalTensorIsRefusedBeforeSending) {
  InferenceRequest request;
  request.model_name = "digits";
  Tensor t = FloatTensor("INPUT0", {1.0f, 2.0f});
  t.data.pop_back();
  request.inputs.push_back(t);
  EXPECT_EQ(client_->Infer(request).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(fake_.calls().infer_count, 0);
}

TEST_F(GrpcClientTest, MalformedServerAnswerIsInternal) {
  fake_.Configure([](auto& c) { c.corrupt_output = true; });
  InferenceRequest request;
  request.model_name = "digits";
  request.inputs.push_back(FloatTensor("INPUT0", {1.0f}));
  // The frontend itself refuses to send a malformed output.
  EXPECT_EQ(client_->Infer(request).status().code(), StatusCode::kInternal);
}

TEST_F(GrpcClientTest, RepositoryCalls) {
  auto index = client_->RepositoryIndex();
  ASSERT_TRUE(index.ok());
  ASSERT_EQ(index->size(), 1u);
  EXPECT_EQ((*index)[0].state, "READY");
  EXPECT_TRUE(client_->LoadModel("digits").ok());
  fake_.Configure([](auto& c) { c.unload_status = NotFound("no such model"); });
  EXPECT_EQ(client_->UnloadModel("x").code(), StatusCode::kNotFound);
}

TEST_F(GrpcClientTest, SharedAcrossThreads) {
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 25; ++i) {
        InferenceRequest request;
        request.model_name = "digits";
        request.inputs.push_back(FloatTensor("INPUT0", {static_cast<float>(t), 1.0f}));
        auto r = client_->Infer(request);
        if (r.ok() && r->outputs.at(0).data == request.inputs[0].data) ++ok;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(ok.load(), 100);
}

TEST(GrpcClientConnect, NobodyListeningIsUnavailable) {
  GrpcClientOptions options;
  options.connect_timeout = std::chrono::milliseconds(300);
  // Port 1 on loopback: nothing listens there in a test environment.
  auto client = GrpcClient::Connect("127.0.0.1:1", options);
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), StatusCode::kUnavailable);
}

TEST_F(GrpcClientTest, InferTaskSendsTheTaskParameter) {
  InferenceRequest request;
  request.model_name = "ignored";
  request.inputs.push_back(FloatTensor("INPUT0", {1, 2, 3}));
  request.parameters["min_accuracy"] = 0.95;
  auto response = client_->InferTask("classification/digits", request);
  ASSERT_TRUE(response.ok()) << response.status().ToString();
  EXPECT_EQ(response->model_name, "digits");
  const InferenceRequest seen = fake_.calls().last_request;
  EXPECT_EQ(seen.task, "classification/digits");
  EXPECT_EQ(seen.model_name, "");
  EXPECT_DOUBLE_EQ(std::get<double>(seen.parameters.at("min_accuracy")), 0.95);
}

TEST_F(GrpcClientTest, RegisterVariantsDecisions) {
  RegistrationRequest r;
  r.name = "fresh";
  r.task = "classification/digits";
  r.inputs = {{"pixels", DataType::kFp32, {64}}};
  r.outputs = {{"logits", DataType::kFp32, {10}}};
  r.model_bytes = "model";
  ASSERT_TRUE(client_->Register(r).ok());
  EXPECT_EQ(fake_.calls().last_registration.model_bytes, "model");

  StatusOr<RegistrationStatus> status = client_->GetVariants("fresh");
  ASSERT_TRUE(status.ok()) << status.status().ToString();
  EXPECT_EQ(status->state, "GENERATING");
  EXPECT_EQ(status->total, 3);
  EXPECT_EQ(client_->GetVariants("nope").status().code(), StatusCode::kNotFound);

  fake_.Configure([](FakeInferenceServer::Config& c) {
    c.register_status = AlreadyExists("model 'fresh' already exists");
    c.decisions = {{1, "fresh", "none", "default", "fresh:1:ts-fp32", "cpu1", 0.1, 0, "only"},
                   {2, "fresh", "none", "default", "fresh:1:ts-fp32", "cpu1", 0.1, 0, "only"}};
  });
  EXPECT_EQ(client_->Register(r).code(), StatusCode::kAlreadyExists);
  auto decisions = client_->RecentDecisions(1);
  ASSERT_TRUE(decisions.ok()) << decisions.status().ToString();
  ASSERT_EQ(decisions->size(), 1u);
  EXPECT_EQ((*decisions)[0].variant, "fresh:1:ts-fp32");
  EXPECT_EQ(client_->RecentDecisions(0).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace somm
