#include "client/http_client.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "frontend/http/http_frontend.h"
#include "api/testing/fake_inference_server.h"

namespace somm {
namespace {

using ::somm::testing::FakeInferenceServer;

template <typename T>
std::string Raw(const std::vector<T>& values) {
  std::string out(values.size() * sizeof(T), '\0');
  if (!values.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

std::string RawBytes(const std::vector<std::string>& elements) {
  std::string out;
  for (const std::string& e : elements) {
    const uint32_t n = static_cast<uint32_t>(e.size());
    out.append(reinterpret_cast<const char*>(&n), 4);
    out += e;
  }
  return out;
}

// Over loopback against the real HttpFrontend and a fake InferenceServer.
class HttpClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    HttpFrontendOptions options;
    options.address = "127.0.0.1";
    options.port = 0;
    auto frontend = HttpFrontend::Start(server_, options);
    ASSERT_TRUE(frontend.ok()) << frontend.status().ToString();
    frontend_ = std::move(frontend).value();
    client_ = std::make_unique<HttpClient>("127.0.0.1", frontend_->port());
  }

  static InferenceRequest EchoRequest() {
    InferenceRequest r;
    r.model_name = "echo";
    r.id = "id-7";
    r.inputs = {
        {"IN0", DataType::kFp32, {1, 4}, Raw<float>({0.1f, -2.0f, 3.5f, 1e-3f})},
        {"IN1", DataType::kInt64, {2}, Raw<int64_t>({INT64_MIN, 42})},
        {"IN2", DataType::kBool, {3}, Raw<uint8_t>({1, 0, 1})},
        {"IN3", DataType::kFp16, {2}, Raw<uint16_t>({FloatToHalf(0.5f), FloatToHalf(-8.0f)})},
        {"IN4", DataType::kBytes, {2}, RawBytes({"hello", "world!"})},
        {"IN5", DataType::kUint8, {2, 2}, Raw<uint8_t>({0, 1, 254, 255})},
    };
    return r;
  }

  FakeInferenceServer server_;
  std::unique_ptr<HttpFrontend> frontend_;
  std::unique_ptr<HttpClient> client_;
};

TEST_F(HttpClientTest, Health) {
  EXPECT_TRUE(client_->ServerLive().value());
  EXPECT_TRUE(client_->ServerReady().value());
  server_.ready = false;
  EXPECT_FALSE(client_->ServerReady().value());
  EXPECT_TRUE(client_->ModelReady("echo").value());
  EXPECT_TRUE(client_->ModelReady("echo", "1").value());
  EXPECT_FALSE(client_->ModelReady("cold").value());
  const StatusOr<bool> unknown = client_->ModelReady("nope");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(unknown.status().message(), "unknown model 'nope'");
}

TEST_F(HttpClientTest, Metadata) {
  const StatusOr<ServerMetadata> server = client_->ServerMetadata();
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  EXPECT_EQ(server.value().name, "somm");
  EXPECT_EQ(server.value().extensions,
            (std::vector<std::string>{"binary_tensor_data", "model_repository"}));

  const StatusOr<ModelMetadata> model = client_->ModelMetadata("echo", "");
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  EXPECT_EQ(model.value().versions, (std::vector<std::string>{"1", "2"}));
  EXPECT_EQ(model.value().inputs[0].shape, Shape({-1, 4}));
  EXPECT_EQ(std::get<std::string>(model.value().parameters.at("task")), "test/echo");

  const StatusOr<ModelMetadata> missing = client_->ModelMetadata("a b", "");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(), "unknown model 'a b'");
}

TEST_F(HttpClientTest, InferRoundTripsEveryTensorJsonAndBinary) {
  for (const bool binary : {false, true}) {
    SCOPED_TRACE(binary);
    const InferenceRequest request = EchoRequest();
    const StatusOr<InferenceResponse> response = client_->Infer(request, binary);
    ASSERT_TRUE(response.ok()) << response.status().ToString();
    EXPECT_EQ(response.value().model_name, "echo");
    EXPECT_EQ(response.value().model_version, "2");
    EXPECT_EQ(response.value().id, "id-7");
    EXPECT_EQ(std::get<std::string>(response.value().parameters.at("somm_device")), "cpu");
    ASSERT_EQ(response.value().outputs.size(), request.inputs.size());
    for (size_t i = 0; i < request.inputs.size(); ++i) {
      const Tensor& out = response.value().outputs[i];
      EXPECT_EQ(out.name, "OUT" + std::to_string(i));
      EXPECT_EQ(out.datatype, request.inputs[i].datatype);
      EXPECT_EQ(out.shape, request.inputs[i].shape);
      EXPECT_EQ(out.data, request.inputs[i].data) << out.name;
    }
    // The server saw exactly the bytes the client sent.
    EXPECT_EQ(server_.last_request().inputs[4].data, request.inputs[4].data);
  }
}

TEST_F(HttpClientTest, InferWithVersionAndRequestedOutputs) {
  InferenceRequest request = EchoRequest();
  request.model_version = "1";
  request.outputs = {{"OUT1", {}}};
  const StatusOr<InferenceResponse> response = client_->Infer(request, true);
  ASSERT_TRUE(response.ok()) << response.status().ToString();
  EXPECT_EQ(response.value().model_version, "1");
  ASSERT_EQ(response.value().outputs.size(), 1u);
  EXPECT_EQ(response.value().outputs[0].name, "OUT1");
}

TEST_F(HttpClientTest, InferErrorsMapBackToStatus) {
  server_.set_infer_status(ResourceExhausted("queue of model 'echo' is full"));
  StatusOr<InferenceResponse> r = client_->Infer(EchoRequest(), true);
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(r.status().message(), "queue of model 'echo' is full");
  server_.set_infer_status(Unavailable("shutting down"));
  EXPECT_EQ(client_->Infer(EchoRequest(), false).status().code(), StatusCode::kUnavailable);
  server_.set_infer_status(Status::Ok());

  InferenceRequest bad = EchoRequest();
  bad.model_name = "nope";
  r = client_->Infer(bad, false);
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(r.status().message(), "unknown model 'nope'");

  bad = EchoRequest();
  bad.model_name.clear();
  EXPECT_EQ(client_->Infer(bad, false).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(HttpClientTest, RepositoryExtension) {
  const StatusOr<std::vector<RepositoryEntry>> all = client_->RepositoryIndex();
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  ASSERT_EQ(all.value().size(), 2u);
  EXPECT_EQ(all.value()[0].name, "cold");
  EXPECT_EQ(all.value()[0].reason, "not loaded");
  const StatusOr<std::vector<RepositoryEntry>> ready = client_->RepositoryIndex(true);
  ASSERT_TRUE(ready.ok());
  ASSERT_EQ(ready.value().size(), 1u);
  EXPECT_EQ(ready.value()[0].version, "2");

  EXPECT_TRUE(client_->Load("echo").ok());
  EXPECT_TRUE(client_->Unload("echo").ok());
  const Status missing = client_->Load("nope");
  EXPECT_EQ(missing.code(), StatusCode::kNotFound);
  EXPECT_EQ(missing.message(), "no model 'nope' in the repository");
  EXPECT_EQ(client_->Unload("cold").code(), StatusCode::kInvalidArgument);
}

TEST_F(HttpClientTest, UnreachableServerIsUnavailable) {
  const int port = frontend_->port();
  frontend_->Shutdown();
  HttpClientOptions options;
  options.connect_timeout_ms = 500;
  HttpClient client("127.0.0.1", port, options);
  const StatusOr<bool> live = client.ServerLive();
  ASSERT_FALSE(live.ok());
  EXPECT_EQ(live.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(live.status().message().find("127.0.0.1:" + std::to_string(port)), std::string::npos);
}

RegistrationRequest Registration(const std::string& name) {
  RegistrationRequest r;
  r.name = name;
  r.task = "classification/digits";
  r.inputs = {{"pixels", DataType::kFp32, {64}}};
  r.outputs = {{"logits", DataType::kFp32, {10}}};
  r.max_batch_size = 16;
  r.model_bytes = std::string("\0\1\2 model", 9);
  r.validation_count = 1;
  r.validation_inputs = std::string(256, '\7');
  r.validation_labels = Raw<int64_t>({4});
  r.preprocessing = ImagePreprocessing{1, 8, 8, 0.0625f, {}, {}, false};
  return r;
}

TEST_F(HttpClientTest, InferTaskLetsTheServerPickTheModel) {
  InferenceRequest request = EchoRequest();
  request.model_name = "ignored";
  request.parameters["latency_slo_ms"] = 2.5;
  auto response = client_->InferTask("test/echo", request);
  ASSERT_TRUE(response.ok()) << response.status().ToString();
  EXPECT_EQ(response->model_name, "echo");
  EXPECT_EQ(response->outputs.size(), request.inputs.size());
  const InferenceRequest seen = server_.last_request();
  EXPECT_EQ(seen.task, "test/echo");
  EXPECT_EQ(seen.model_name, "");
  EXPECT_DOUBLE_EQ(std::get<double>(seen.parameters.at("latency_slo_ms")), 2.5);

  const auto unknown = client_->InferTask("test/other", request, /*binary=*/false);
  EXPECT_EQ(unknown.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(client_->InferTask("", request).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(HttpClientTest, RegisterThenWatchTheVariants) {
  ASSERT_TRUE(client_->Register(Registration("fresh")).ok());
  const RegistrationRequest seen = server_.calls().last_registration;
  EXPECT_EQ(seen.name, "fresh");
  EXPECT_EQ(seen.model_bytes, Registration("fresh").model_bytes);
  EXPECT_EQ(seen.validation_inputs, std::string(256, '\7'));
  ASSERT_TRUE(seen.preprocessing.has_value());
  EXPECT_FLOAT_EQ(seen.preprocessing->scale, 0.0625f);

  StatusOr<RegistrationStatus> status = client_->GetVariants("fresh");
  ASSERT_TRUE(status.ok()) << status.status().ToString();
  EXPECT_EQ(status->state, "GENERATING");

  const Status again = client_->Register(Registration("fresh"));
  EXPECT_EQ(again.code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(again.message(), "model 'fresh' already exists");
  EXPECT_EQ(client_->GetVariants("nope").status().code(), StatusCode::kNotFound);

  RegistrationRequest bad = Registration("bad");
  bad.validation_labels.pop_back();  // the frontend names the field
  const Status refused = client_->Register(bad);
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("field 'validation.labels'"), std::string::npos)
      << refused.message();
}

TEST_F(HttpClientTest, RecentDecisions) {
  std::vector<DecisionRecord> log(5);
  for (int i = 0; i < 5; ++i) log[i] = {i, "digits", "none", "default", "v", "cpu1", 1, 0, "r"};
  server_.Configure([&](FakeInferenceServer::Config& c) { c.decisions = log; });
  auto got = client_->RecentDecisions(3);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->size(), 3u);
  EXPECT_EQ((*got)[2].unix_ms, 2);
  EXPECT_EQ((*got)[2].hardware, "cpu1");
  EXPECT_EQ(client_->RecentDecisions(20000).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace somm
