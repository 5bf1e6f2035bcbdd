// The model-less side of the gRPC frontend over loopback against the fake
// server: task-form ModelInfer, SLO parameters, and the SommControl service
// (RegisterModel, GetVariants, RecentDecisions); plus the somm_codec round
// trips.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "frontend/grpc/grpc_server.h"
#include "frontend/grpc/somm_codec.h"
#include "proto/inference.grpc.pb.h"
#include "proto/somm.grpc.pb.h"
#include "api/testing/fake_inference_server.h"

namespace somm {
namespace {

using ::somm::testing::FakeInferenceServer;

RegistrationRequest SampleRegistration() {
  RegistrationRequest r;
  r.name = "digits-new";
  r.task = "classification/digits";
  r.inputs = {{"pixels", DataType::kFp32, {64}}};
  r.outputs = {{"logits", DataType::kFp32, {-1, 10}}};
  r.max_batch_size = 64;
  r.model_bytes = std::string("PK\0\x03torchscript", 15);
  r.validation_count = 1;
  r.validation_inputs = std::string(256, '\x01');
  r.validation_labels = std::string(8, '\0');
  r.preprocessing = ImagePreprocessing{1, 8, 8, 0.0627451f, {0.5f}, {0.25f}, true};
  r.description = "eight by eight";
  return r;
}

VariantProfile SampleProfile() {
  VariantProfile p;
  p.model = "digits-new";
  p.variant = "ts-int8";
  p.precision = "int8";
  p.optimization = "dynamic quantization";
  p.file = "model.pt";
  p.accuracy = 0.97;
  p.accuracy_source = "validation";
  HardwareProfile hw;
  hw.hardware = {DeviceKind::kCpu, 0, 1};
  hw.latency = LatencyCurve::Fit({{1, 0.02}, {64, 0.3}});
  hw.peak_memory_mb = 1.5;
  hw.load_time_ms = 4;
  p.hardware = {hw};
  return p;
}

void ExpectSameRegistration(const RegistrationRequest& a, const RegistrationRequest& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.task, b.task);
  ASSERT_EQ(a.inputs.size(), b.inputs.size());
  for (size_t i = 0; i < a.inputs.size(); ++i) {
    EXPECT_EQ(a.inputs[i].name, b.inputs[i].name);
    EXPECT_EQ(a.inputs[i].datatype, b.inputs[i].datatype);
    EXPECT_EQ(a.inputs[i].shape, b.inputs[i].shape);
  }
  ASSERT_EQ(a.outputs.size(), b.outputs.size());
  EXPECT_EQ(a.outputs[0].shape, b.outputs[0].shape);
  EXPECT_EQ(a.max_batch_size, b.max_batch_size);
  EXPECT_EQ(a.model_bytes, b.model_bytes);
  EXPECT_EQ(a.validation_count, b.validation_count);
  EXPECT_EQ(a.validation_inputs, b.validation_inputs);
  EXPECT_EQ(a.validation_labels, b.validation_labels);
  ASSERT_EQ(a.preprocessing.has_value(), b.preprocessing.has_value());
  if (a.preprocessing) {
    EXPECT_EQ(a.preprocessing->channels, b.preprocessing->channels);
    EXPECT_EQ(a.preprocessing->width, b.preprocessing->width);
    EXPECT_FLOAT_EQ(a.preprocessing->scale, b.preprocessing->scale);
    EXPECT_EQ(a.preprocessing->mean, b.preprocessing->mean);
    EXPECT_EQ(a.preprocessing->stddev, b.preprocessing->stddev);
    EXPECT_EQ(a.preprocessing->invert, b.preprocessing->invert);
  }
  EXPECT_EQ(a.description, b.description);
}

TEST(SommCodecTest, RegistrationRoundTrip) {
  const RegistrationRequest in = SampleRegistration();
  somm::RegisterModelRequest wire;
  grpc_codec::EncodeRegistration(in, &wire);
  RegistrationRequest out;
  ASSERT_TRUE(grpc_codec::DecodeRegistration(wire, &out).ok());
  ExpectSameRegistration(in, out);

  // Without the optional parts nothing optional appears.
  RegistrationRequest bare = SampleRegistration();
  bare.validation_count = 0;
  bare.validation_inputs.clear();
  bare.validation_labels.clear();
  bare.preprocessing.reset();
  wire.Clear();
  grpc_codec::EncodeRegistration(bare, &wire);
  EXPECT_FALSE(wire.has_validation());
  EXPECT_FALSE(wire.has_preprocessing());
  out = {};
  ASSERT_TRUE(grpc_codec::DecodeRegistration(wire, &out).ok());
  ExpectSameRegistration(bare, out);
}

TEST(SommCodecTest, RegistrationCarriesItsPlatformAndLeavesTheDefaultOffTheWire) {
  RegistrationRequest in = SampleRegistration();
  somm::RegisterModelRequest wire;
  grpc_codec::EncodeRegistration(in, &wire);
  EXPECT_TRUE(wire.platform().empty());  // as before the field: old servers see no change
  RegistrationRequest out;
  ASSERT_TRUE(grpc_codec::DecodeRegistration(wire, &out).ok());
  EXPECT_EQ(out.platform, kDefaultPlatform);

  in.platform = "onnx";
  wire.Clear();
  grpc_codec::EncodeRegistration(in, &wire);
  EXPECT_EQ(wire.platform(), "onnx");
  out = {};
  ASSERT_TRUE(grpc_codec::DecodeRegistration(wire, &out).ok());
  EXPECT_EQ(out.platform, "onnx");
}

TEST(SommCodecTest, MalformedRegistrationIsInvalid) {
  struct Case {
    void (*change)(somm::RegisterModelRequest*);
    const char* fragment;
  };
  const Case cases[] = {
      {[](somm::RegisterModelRequest* r) { r->clear_name(); }, "field 'name' is empty"},
      {[](somm::RegisterModelRequest* r) { r->clear_task(); }, "field 'task' is empty"},
      {[](somm::RegisterModelRequest* r) { r->clear_model(); }, "field 'model'"},
      {[](somm::RegisterModelRequest* r) { r->mutable_inputs(0)->set_datatype("FLOAT"); },
       "field 'inputs[0].datatype': unknown datatype 'FLOAT'"},
      {[](somm::RegisterModelRequest* r) { r->mutable_outputs(0)->clear_name(); },
       "field 'outputs[0].name' is empty"},
      {[](somm::RegisterModelRequest* r) { r->mutable_inputs(0)->set_shape(0, -2); },
       "field 'inputs[0].shape': dims must be >= -1"},
      {[](somm::RegisterModelRequest* r) { *r->add_inputs() = r->inputs(0); },
       "'pixels' appears more than once"},
      {[](somm::RegisterModelRequest* r) { r->set_max_batch_size(-1); },
       "field 'max_batch_size' must not be negative"},
  };
  for (const Case& c : cases) {
    somm::RegisterModelRequest wire;
    grpc_codec::EncodeRegistration(SampleRegistration(), &wire);
    c.change(&wire);
    RegistrationRequest out;
    const Status s = grpc_codec::DecodeRegistration(wire, &out);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.fragment;
    EXPECT_NE(s.message().find(c.fragment), std::string::npos) << s.message();
  }
}

TEST(SommCodecTest, StatusAndDecisionsRoundTrip) {
  RegistrationStatus in{"digits-new",        "READY", "done", 3, 3, "ok", {SampleProfile()},
                        {"ts-bf16: no bf16"}};
  somm::GetVariantsResponse wire;
  grpc_codec::EncodeRegistrationStatus(in, &wire);
  ASSERT_EQ(wire.variants_json_size(), 1);
  StatusOr<RegistrationStatus> out = grpc_codec::DecodeRegistrationStatus(wire);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->state, "READY");
  EXPECT_EQ(out->done, 3);
  EXPECT_EQ(out->skipped, in.skipped);
  ASSERT_EQ(out->variants.size(), 1u);
  EXPECT_EQ(ProfileToJson(out->variants[0]), ProfileToJson(in.variants[0]));

  wire.set_variants_json(0, "{not json");
  EXPECT_EQ(grpc_codec::DecodeRegistrationStatus(wire).status().code(),
            StatusCode::kInvalidArgument);

  std::vector<DecisionRecord> decisions = {{7, "task:classification/digits",
                                            "min_accuracy=0.9", "loaded", "m:1:ts-fp32", "cpu1",
                                            0.5, 1e-7, "cheapest"}};
  decisions[0].actual_latency_ms = 0.75;
  decisions[0].status = "OK";
  somm::RecentDecisionsResponse dw;
  grpc_codec::EncodeDecisions(decisions, &dw);
  const std::vector<DecisionRecord> back = grpc_codec::DecodeDecisions(dw);
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0].unix_ms, 7);
  EXPECT_EQ(back[0].target, decisions[0].target);
  EXPECT_EQ(back[0].variant, decisions[0].variant);
  EXPECT_DOUBLE_EQ(back[0].cost_usd, 1e-7);
  EXPECT_EQ(back[0].reason, "cheapest");
  EXPECT_DOUBLE_EQ(back[0].actual_latency_ms, 0.75);
  EXPECT_EQ(back[0].status, "OK");
}

class GrpcSommTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fake_.Configure([](FakeInferenceServer::Config& c) {
      ModelMetadata digits;
      digits.name = "digits";
      digits.versions = {"1"};
      c.models["digits"] = digits;
      c.task_model = "digits";  // serves every task
      c.inline_callback = false;
      c.keep_output_names = true;
    });
    GrpcFrontendOptions options;
    options.address = "127.0.0.1";
    options.port = 0;
    auto started = GrpcFrontend::Start(fake_, options);
    ASSERT_TRUE(started.ok()) << started.status().ToString();
    frontend_ = std::move(started).value();
    auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(frontend_->port()),
                                       grpc::InsecureChannelCredentials());
    oip_ = inference::GRPCInferenceService::NewStub(channel);
    control_ = somm::SommControl::NewStub(channel);
  }

  static std::unique_ptr<grpc::ClientContext> Context() {
    auto ctx = std::make_unique<grpc::ClientContext>();
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    return ctx;
  }

  static inference::ModelInferRequest TaskRequest() {
    inference::ModelInferRequest r;
    (*r.mutable_parameters())["task"].set_string_param("classification/digits");
    auto* in = r.add_inputs();
    in->set_name("INPUT0");
    in->set_datatype("FP32");
    in->add_shape(1);
    in->add_shape(2);
    const float values[2] = {1.5f, -2.0f};
    r.add_raw_input_contents(std::string(reinterpret_cast<const char*>(values), sizeof(values)));
    return r;
  }

  FakeInferenceServer fake_;  // declared first: outlives the frontend
  std::unique_ptr<GrpcFrontend> frontend_;
  std::unique_ptr<inference::GRPCInferenceService::Stub> oip_;
  std::unique_ptr<somm::SommControl::Stub> control_;
};

TEST_F(GrpcSommTest, TaskFormInferNeedsNoModelName) {
  inference::ModelInferRequest request = TaskRequest();
  (*request.mutable_parameters())["latency_slo_ms"].set_int64_param(5);
  (*request.mutable_parameters())["min_accuracy"].set_double_param(0.9);
  inference::ModelInferResponse response;
  const grpc::Status s = oip_->ModelInfer(Context().get(), request, &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(response.model_name(), "digits");  // what the server picked
  const InferenceRequest seen = fake_.calls().last_request;
  EXPECT_EQ(seen.task, "classification/digits");
  EXPECT_EQ(seen.model_name, "");
  EXPECT_EQ(std::get<int64_t>(seen.parameters.at("latency_slo_ms")), 5);
  EXPECT_DOUBLE_EQ(std::get<double>(seen.parameters.at("min_accuracy")), 0.9);
  EXPECT_EQ(std::get<std::string>(seen.parameters.at("task")), "classification/digits");
}

TEST_F(GrpcSommTest, TaskParameterBesideAModelLeavesTheTaskUnset) {
  inference::ModelInferRequest request = TaskRequest();
  request.set_model_name("digits");
  inference::ModelInferResponse response;
  ASSERT_TRUE(oip_->ModelInfer(Context().get(), request, &response).ok());
  EXPECT_EQ(fake_.calls().last_request.task, "");
  EXPECT_EQ(fake_.calls().last_request.model_name, "digits");
}

TEST_F(GrpcSommTest, NoModelAndNoStringTaskIsInvalid) {
  for (int variant = 0; variant < 3; ++variant) {
    inference::ModelInferRequest request = TaskRequest();
    if (variant == 0) request.mutable_parameters()->erase("task");
    if (variant == 1) (*request.mutable_parameters())["task"].set_int64_param(3);
    if (variant == 2) (*request.mutable_parameters())["task"].set_string_param("");
    inference::ModelInferResponse response;
    const grpc::Status s = oip_->ModelInfer(Context().get(), request, &response);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << variant;
    EXPECT_NE(s.error_message().find("names no model"), std::string::npos) << s.error_message();
  }
}

TEST_F(GrpcSommTest, RegisterModelReachesTheServer) {
  somm::RegisterModelRequest request;
  grpc_codec::EncodeRegistration(SampleRegistration(), &request);
  somm::RegisterModelResponse response;
  const grpc::Status s = control_->RegisterModel(Context().get(), request, &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(response.name(), "digits-new");
  EXPECT_EQ(response.state(), "GENERATING");
  ExpectSameRegistration(fake_.calls().last_registration, SampleRegistration());

  fake_.Configure([](FakeInferenceServer::Config& c) {
    c.register_status = AlreadyExists("model 'digits-new' already exists");
  });
  const grpc::Status again = control_->RegisterModel(Context().get(), request, &response);
  EXPECT_EQ(again.error_code(), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_EQ(again.error_message(), "model 'digits-new' already exists");

  request.mutable_inputs(0)->set_datatype("FLOAT");
  const grpc::Status bad = control_->RegisterModel(Context().get(), request, &response);
  EXPECT_EQ(bad.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(bad.error_message().find("inputs[0].datatype"), std::string::npos);
}

TEST_F(GrpcSommTest, GetVariantsReportsProgressAndProfiles) {
  fake_.Configure([](FakeInferenceServer::Config& c) {
    c.registrations["digits-new"] = {
        "digits-new", "GENERATING",      "profiling ts-int8 on cpu1", 2, 5,
        "",           {SampleProfile()}, {"ts-fp16: no GPU"}};
  });
  somm::GetVariantsRequest request;
  request.set_name("digits-new");
  somm::GetVariantsResponse response;
  grpc::Status s = control_->GetVariants(Context().get(), request, &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  StatusOr<RegistrationStatus> status = grpc_codec::DecodeRegistrationStatus(response);
  ASSERT_TRUE(status.ok()) << status.status().ToString();
  EXPECT_EQ(status->phase, "profiling ts-int8 on cpu1");
  EXPECT_EQ(status->done, 2);
  EXPECT_EQ(status->total, 5);
  ASSERT_EQ(status->variants.size(), 1u);
  EXPECT_EQ(status->variants[0].Id(), "digits-new:1:ts-int8");

  request.set_name("nope");
  s = control_->GetVariants(Context().get(), request, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  request.clear_name();
  s = control_->GetVariants(Context().get(), request, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(GrpcSommTest, RecentDecisionsHonourTheLimit) {
  fake_.Configure([](FakeInferenceServer::Config& c) {
    c.decisions.resize(3);
    for (int i = 0; i < 3; ++i) c.decisions[i].unix_ms = 100 + i;
  });
  somm::RecentDecisionsRequest request;
  somm::RecentDecisionsResponse response;
  ASSERT_TRUE(control_->RecentDecisions(Context().get(), request, &response).ok());
  EXPECT_EQ(fake_.calls().last_decision_limit, 100u);
  EXPECT_EQ(response.decisions_size(), 3);

  request.set_limit(2);
  response.Clear();
  ASSERT_TRUE(control_->RecentDecisions(Context().get(), request, &response).ok());
  EXPECT_EQ(response.decisions_size(), 2);
  EXPECT_EQ(response.decisions(1).unix_ms(), 101);

  request.set_limit(10001);
  const grpc::Status s = control_->RecentDecisions(Context().get(), request, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

}  // namespace
}  // namespace somm
