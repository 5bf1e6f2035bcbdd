// GrpcFrontend over loopback against a FakeInferenceServer: health, metadata,
// inference with raw and typed contents, the status mapping, the repository
// extension, and malformed or hostile requests.
#include "frontend/grpc/grpc_server.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <random>
#include <thread>

#include "common/testing/thread_names.h"
#include "frontend/grpc/grpc_codec.h"
#include "proto/inference.grpc.pb.h"
#include "proto/somm.grpc.pb.h"
#include "api/testing/fake_inference_server.h"
#include "transport/grpc/grpc_runtime.h"

namespace somm {
namespace {

using inference::ModelInferRequest;
using inference::ModelInferResponse;
using ::somm::testing::FakeInferenceServer;

template <typename T>
std::string Pack(const std::vector<T>& values) {
  std::string out(values.size() * sizeof(T), '\0');
  if (!values.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

std::string PackStrings(const std::vector<std::string>& values) {
  std::string out;
  for (const std::string& v : values) {
    const uint32_t len = static_cast<uint32_t>(v.size());
    out.append(reinterpret_cast<const char*>(&len), 4);
    out.append(v);
  }
  return out;
}

ModelInferRequest::InferInputTensor* AddInput(ModelInferRequest* r, const std::string& name,
                                              const std::string& datatype,
                                              std::vector<int64_t> shape) {
  auto* in = r->add_inputs();
  in->set_name(name);
  in->set_datatype(datatype);
  for (int64_t d : shape) in->add_shape(d);
  return in;
}

class GrpcFrontendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ModelMetadata m;
    m.name = "digits";
    m.versions = {"1", "2"};
    m.platform = "torchscript";
    m.inputs = {{"INPUT0", "FP32", {-1, 64}}};
    m.outputs = {{"OUTPUT0", "FP32", {-1, 10}}};
    fake_.Configure([&](FakeInferenceServer::Config& c) {
      c.models["digits"] = m;
      c.server.extensions = {"model_repository"};
      // Answered as a batcher answers: on another thread, each output named
      // as its input, with parameters of several types.
      c.inline_callback = false;
      c.keep_output_names = true;
      c.response_parameters["somm_fake"] = true;
      c.response_parameters["somm_compute_ms"] = 0.25;
    });
    StartFrontend(GrpcFrontendOptions{});
  }

  void StartFrontend(GrpcFrontendOptions options) {
    stub_.reset();
    frontend_.reset();
    options.address = "127.0.0.1";
    options.port = 0;
    auto started = GrpcFrontend::Start(fake_, options);
    ASSERT_TRUE(started.ok()) << started.status().ToString();
    frontend_ = std::move(started).value();
    ASSERT_GT(frontend_->port(), 0);
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(-1);
    args.SetMaxSendMessageSize(-1);
    auto channel = grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(frontend_->port()),
                                             grpc::InsecureChannelCredentials(), args);
    stub_ = inference::GRPCInferenceService::NewStub(channel);
  }

  static void SetDeadline(grpc::ClientContext* ctx) {
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  }

  // One unary call of `method` on `stub`; true when it answered OK.
  template <typename Stub, typename Request, typename Response>
  static bool Call(Stub* stub,
                   grpc::Status (Stub::*method)(grpc::ClientContext*, const Request&, Response*),
                   const Request& request) {
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    Response response;
    const grpc::Status status = (stub->*method)(&ctx, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return status.ok();
  }

  grpc::Status Infer(const ModelInferRequest& request, ModelInferResponse* response) {
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    return stub_->ModelInfer(&ctx, request, response);
  }

  // Sends `request`, expects INVALID_ARGUMENT, returns the message.
  std::string ExpectInvalid(const ModelInferRequest& request) {
    ModelInferResponse response;
    grpc::Status s = Infer(request, &response);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
    return s.error_message();
  }

  static ModelInferRequest Request() {
    ModelInferRequest r;
    r.set_model_name("digits");
    return r;
  }

  FakeInferenceServer fake_;  // declared first: outlives the frontend
  std::unique_ptr<GrpcFrontend> frontend_;
  std::unique_ptr<inference::GRPCInferenceService::Stub> stub_;
};

TEST_F(GrpcFrontendTest, HealthReflectsTheServer) {
  {
    grpc::ClientContext ctx;
    inference::ServerLiveResponse r;
    ASSERT_TRUE(stub_->ServerLive(&ctx, {}, &r).ok());
    EXPECT_TRUE(r.live());
  }
  fake_.ready = false;
  grpc::ClientContext ctx;
  inference::ServerReadyResponse r;
  ASSERT_TRUE(stub_->ServerReady(&ctx, {}, &r).ok());
  EXPECT_FALSE(r.ready());
}

TEST_F(GrpcFrontendTest, ServerMetadataComesFromTheServer) {
  grpc::ClientContext ctx;
  inference::ServerMetadataResponse r;
  ASSERT_TRUE(stub_->ServerMetadata(&ctx, {}, &r).ok());
  EXPECT_EQ(r.name(), "somm");
  EXPECT_EQ(r.version(), "0.1.0-test");
  ASSERT_EQ(r.extensions_size(), 1);
  EXPECT_EQ(r.extensions(0), "model_repository");
}

TEST_F(GrpcFrontendTest, ModelMetadataWithEmptyVersionMeansDefault) {
  grpc::ClientContext ctx;
  inference::ModelMetadataRequest req;
  req.set_name("digits");
  inference::ModelMetadataResponse r;
  ASSERT_TRUE(stub_->ModelMetadata(&ctx, req, &r).ok());
  EXPECT_EQ(fake_.calls().last_metadata_version, "");
  EXPECT_EQ(r.name(), "digits");
  EXPECT_EQ(r.platform(), "torchscript");
  ASSERT_EQ(r.versions_size(), 2);
  ASSERT_EQ(r.inputs_size(), 1);
  EXPECT_EQ(r.inputs(0).name(), "INPUT0");
  EXPECT_EQ(r.inputs(0).datatype(), "FP32");
  ASSERT_EQ(r.inputs(0).shape_size(), 2);
  EXPECT_EQ(r.inputs(0).shape(0), -1);
  EXPECT_EQ(r.outputs(0).shape(1), 10);
}

TEST_F(GrpcFrontendTest, ModelMetadataUnknownModelIsNotFound) {
  grpc::ClientContext ctx;
  inference::ModelMetadataRequest req;
  req.set_name("nope");
  inference::ModelMetadataResponse r;
  grpc::Status s = stub_->ModelMetadata(&ctx, req, &r);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(s.error_message().find("nope"), std::string::npos);
}

TEST_F(GrpcFrontendTest, ModelReadyHonoursVersion) {
  for (auto [version, ready] : {std::pair{"", true}, {"1", true}, {"7", false}}) {
    grpc::ClientContext ctx;
    inference::ModelReadyRequest req;
    req.set_name("digits");
    req.set_version(version);
    inference::ModelReadyResponse r;
    ASSERT_TRUE(stub_->ModelReady(&ctx, req, &r).ok());
    EXPECT_EQ(r.ready(), ready) << "version '" << version << "'";
    EXPECT_EQ(fake_.calls().last_metadata_version, version);
  }
}

struct RawCase {
  const char* datatype;
  std::string bytes;  // little-endian payload for shape [2, 2]
};

TEST_F(GrpcFrontendTest, InferRawRoundTripsEveryDatatype) {
  const std::vector<RawCase> cases = {
      {"BOOL", Pack<uint8_t>({1, 0, 0, 1})},
      {"UINT8", Pack<uint8_t>({0, 1, 128, 255})},
      {"INT8", Pack<int8_t>({-128, -1, 0, 127})},
      {"UINT16", Pack<uint16_t>({0, 1, 300, 65535})},
      {"INT16", Pack<int16_t>({-32768, -1, 0, 32767})},
      {"INT32", Pack<int32_t>({INT32_MIN, -1, 0, INT32_MAX})},
      {"UINT32", Pack<uint32_t>({0, 1, 7, UINT32_MAX})},
      {"INT64", Pack<int64_t>({INT64_MIN, -1, 0, INT64_MAX})},
      {"UINT64", Pack<uint64_t>({0, 1, 7, UINT64_MAX})},
      {"FP16", Pack<uint16_t>({FloatToHalf(1.5f), FloatToHalf(-2.0f), 0, FloatToHalf(65504.0f)})},
      {"BF16", Pack<uint16_t>({FloatToBf16(1.5f), FloatToBf16(-2.0f), 0, FloatToBf16(3.0f)})},
      {"FP32", Pack<float>({1.5f, -2.25f, 0.0f, 1e30f})},
      {"FP64", Pack<double>({1.5, -2.25, 0.0, 1e300})},
      {"BYTES", PackStrings({"a", "", "hello", std::string("\0z", 2)})},
  };
  for (const RawCase& c : cases) {
    SCOPED_TRACE(c.datatype);
    ModelInferRequest req = Request();
    req.set_id(std::string("id-") + c.datatype);
    AddInput(&req, "x", c.datatype, {2, 2});
    req.add_raw_input_contents(c.bytes);
    ModelInferResponse resp;
    grpc::Status s = Infer(req, &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(resp.model_name(), "digits");
    EXPECT_EQ(resp.id(), std::string("id-") + c.datatype);
    ASSERT_EQ(resp.outputs_size(), 1);
    EXPECT_EQ(resp.outputs(0).name(), "x");
    EXPECT_EQ(resp.outputs(0).datatype(), c.datatype);
    ASSERT_EQ(resp.outputs(0).shape_size(), 2);
    EXPECT_EQ(resp.outputs(0).shape(0), 2);
    ASSERT_EQ(resp.raw_output_contents_size(), 1);
    EXPECT_EQ(resp.raw_output_contents(0), c.bytes);
    // The server saw exactly the bytes that were sent.
    const InferenceRequest seen = fake_.calls().last_request;
    ASSERT_EQ(seen.inputs.size(), 1u);
    EXPECT_EQ(seen.inputs[0].datatype, DataTypeFromString(c.datatype));
    EXPECT_EQ(seen.inputs[0].data, c.bytes);
  }
}

struct TypedCase {
  const char* datatype;
  std::function<void(inference::InferTensorContents*)> fill;  // 4 elements
  std::string expected;
};

TEST_F(GrpcFrontendTest, InferTypedContentsBecomeRawOutputs) {
  using C = inference::InferTensorContents;
  const std::vector<TypedCase> cases = {
      {"BOOL",
       [](C* c) {
         for (bool b : {true, false, false, true}) c->add_bool_contents(b);
       },
       Pack<uint8_t>({1, 0, 0, 1})},
      {"UINT8",
       [](C* c) {
         for (uint32_t v : {0u, 1u, 128u, 255u}) c->add_uint_contents(v);
       },
       Pack<uint8_t>({0, 1, 128, 255})},
      {"UINT16",
       [](C* c) {
         for (uint32_t v : {0u, 1u, 300u, 65535u}) c->add_uint_contents(v);
       },
       Pack<uint16_t>({0, 1, 300, 65535})},
      {"UINT32",
       [](C* c) {
         for (uint32_t v : {0u, 1u, 7u, UINT32_MAX}) c->add_uint_contents(v);
       },
       Pack<uint32_t>({0, 1, 7, UINT32_MAX})},
      {"UINT64",
       [](C* c) {
         for (uint64_t v : {uint64_t{0}, uint64_t{1}, uint64_t{7}, UINT64_MAX})
           c->add_uint64_contents(v);
       },
       Pack<uint64_t>({0, 1, 7, UINT64_MAX})},
      {"INT8",
       [](C* c) {
         for (int v : {-128, -1, 0, 127}) c->add_int_contents(v);
       },
       Pack<int8_t>({-128, -1, 0, 127})},
      {"INT16",
       [](C* c) {
         for (int v : {-32768, -1, 0, 32767}) c->add_int_contents(v);
       },
       Pack<int16_t>({-32768, -1, 0, 32767})},
      {"INT32",
       [](C* c) {
         for (int v : {INT32_MIN, -1, 0, INT32_MAX}) c->add_int_contents(v);
       },
       Pack<int32_t>({INT32_MIN, -1, 0, INT32_MAX})},
      {"INT64",
       [](C* c) {
         for (int64_t v : {INT64_MIN, int64_t{-1}, int64_t{0}, INT64_MAX}) c->add_int64_contents(v);
       },
       Pack<int64_t>({INT64_MIN, -1, 0, INT64_MAX})},
      {"FP32",
       [](C* c) {
         for (float v : {1.5f, -2.25f, 0.0f, 1e30f}) c->add_fp32_contents(v);
       },
       Pack<float>({1.5f, -2.25f, 0.0f, 1e30f})},
      {"FP64",
       [](C* c) {
         for (double v : {1.5, -2.25, 0.0, 1e300}) c->add_fp64_contents(v);
       },
       Pack<double>({1.5, -2.25, 0.0, 1e300})},
      {"BYTES",
       [](C* c) {
         for (const char* v : {"a", "", "hello", "zz"}) c->add_bytes_contents(v);
       },
       PackStrings({"a", "", "hello", "zz"})},
  };
  for (const TypedCase& c : cases) {
    SCOPED_TRACE(c.datatype);
    ModelInferRequest req = Request();
    c.fill(AddInput(&req, "x", c.datatype, {2, 2})->mutable_contents());
    ModelInferResponse resp;
    grpc::Status s = Infer(req, &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
    ASSERT_EQ(resp.raw_output_contents_size(), 1);
    EXPECT_EQ(resp.raw_output_contents(0), c.expected);
    EXPECT_EQ(resp.outputs(0).datatype(), c.datatype);
  }
}

TEST_F(GrpcFrontendTest, ParametersAndRequestedOutputsPassThrough) {
  ModelInferRequest req = Request();
  req.set_model_version("2");
  (*req.mutable_parameters())["latency_slo_ms"].set_int64_param(50);
  (*req.mutable_parameters())["min_accuracy"].set_double_param(0.9);
  (*req.mutable_parameters())["tag"].set_string_param("t");
  (*req.mutable_parameters())["trace"].set_bool_param(true);
  (*req.mutable_parameters())["seq"].set_uint64_param(7);
  AddInput(&req, "a", "INT32", {1})->mutable_contents()->add_int_contents(1);
  AddInput(&req, "b", "INT32", {1})->mutable_contents()->add_int_contents(2);
  auto* out = req.add_outputs();
  out->set_name("b");
  (*out->mutable_parameters())["classification"].set_int64_param(3);

  ModelInferResponse resp;
  ASSERT_TRUE(Infer(req, &resp).ok());
  const InferenceRequest seen = fake_.calls().last_request;
  EXPECT_EQ(seen.model_version, "2");
  EXPECT_EQ(std::get<int64_t>(seen.parameters.at("latency_slo_ms")), 50);
  EXPECT_EQ(std::get<double>(seen.parameters.at("min_accuracy")), 0.9);
  EXPECT_EQ(std::get<std::string>(seen.parameters.at("tag")), "t");
  EXPECT_EQ(std::get<bool>(seen.parameters.at("trace")), true);
  EXPECT_EQ(std::get<int64_t>(seen.parameters.at("seq")), 7);
  ASSERT_EQ(seen.outputs.size(), 1u);
  EXPECT_EQ(seen.outputs[0].name, "b");
  EXPECT_EQ(std::get<int64_t>(seen.outputs[0].parameters.at("classification")), 3);

  // Only the requested output comes back; response parameters keep types.
  ASSERT_EQ(resp.outputs_size(), 1);
  EXPECT_EQ(resp.outputs(0).name(), "b");
  EXPECT_EQ(resp.model_version(), "2");
  const auto& p = resp.parameters();
  EXPECT_EQ(p.at("somm_device").string_param(), "cpu");
  EXPECT_EQ(p.at("somm_batch_size").int64_param(), 1);
  EXPECT_EQ(p.at("somm_fake").bool_param(), true);
  EXPECT_EQ(p.at("somm_compute_ms").double_param(), 0.25);
}

TEST_F(GrpcFrontendTest, InlineCallbackWorks) {
  fake_.Configure([](auto& c) { c.inline_callback = true; });
  ModelInferRequest req = Request();
  AddInput(&req, "x", "FP32", {1})->mutable_contents()->add_fp32_contents(3.0f);
  ModelInferResponse resp;
  ASSERT_TRUE(Infer(req, &resp).ok());
  EXPECT_EQ(resp.raw_output_contents(0), Pack<float>({3.0f}));
}

TEST_F(GrpcFrontendTest, StatusCodesMapOneToOne) {
  const std::vector<std::pair<StatusCode, grpc::StatusCode>> mapping = {
      {StatusCode::kInvalidArgument, grpc::StatusCode::INVALID_ARGUMENT},
      {StatusCode::kNotFound, grpc::StatusCode::NOT_FOUND},
      {StatusCode::kAlreadyExists, grpc::StatusCode::ALREADY_EXISTS},
      {StatusCode::kFailedPrecondition, grpc::StatusCode::FAILED_PRECONDITION},
      {StatusCode::kResourceExhausted, grpc::StatusCode::RESOURCE_EXHAUSTED},
      {StatusCode::kUnavailable, grpc::StatusCode::UNAVAILABLE},
      {StatusCode::kDeadlineExceeded, grpc::StatusCode::DEADLINE_EXCEEDED},
      {StatusCode::kUnimplemented, grpc::StatusCode::UNIMPLEMENTED},
      {StatusCode::kInternal, grpc::StatusCode::INTERNAL},
  };
  for (auto [ours, theirs] : mapping) {
    SCOPED_TRACE(StatusCodeName(ours));
    const std::string message = std::string("because ") + StatusCodeName(ours);
    fake_.Configure([&](auto& c) { c.infer_status = Status(ours, message); });
    ModelInferRequest req = Request();
    AddInput(&req, "x", "FP32", {1})->mutable_contents()->add_fp32_contents(1.0f);
    ModelInferResponse resp;
    grpc::Status s = Infer(req, &resp);
    EXPECT_EQ(s.error_code(), theirs);
    EXPECT_EQ(s.error_message(), message);
    // And the client-side inverse gives the somm code back.
    EXPECT_EQ(grpc_transport::FromGrpcStatus(s).code(), ours);
  }
  EXPECT_TRUE(grpc_transport::ToGrpcStatus(Status::Ok()).ok());
}

TEST_F(GrpcFrontendTest, MalformedOutputFromServerIsInternal) {
  fake_.Configure([](auto& c) { c.corrupt_output = true; });
  ModelInferRequest req = Request();
  AddInput(&req, "x", "FP32", {1})->mutable_contents()->add_fp32_contents(1.0f);
  ModelInferResponse resp;
  EXPECT_EQ(Infer(req, &resp).error_code(), grpc::StatusCode::INTERNAL);
}

TEST_F(GrpcFrontendTest, RawCountMismatchIsInvalid) {
  ModelInferRequest req = Request();
  AddInput(&req, "a", "FP32", {1});
  AddInput(&req, "b", "FP32", {1});
  req.add_raw_input_contents(Pack<float>({1.0f}));
  const std::string m = ExpectInvalid(req);
  EXPECT_NE(m.find("raw_input_contents has 1 entries but the request has 2 inputs"),
            std::string::npos)
      << m;
}

TEST_F(GrpcFrontendTest, WrongElementCountIsInvalid) {
  ModelInferRequest req = Request();
  auto* in = AddInput(&req, "x", "FP32", {1, 64});
  for (int i = 0; i < 63; ++i) in->mutable_contents()->add_fp32_contents(0.0f);
  EXPECT_EQ(ExpectInvalid(req), "input 'x': shape [1,64] needs 64 elements, got 63");
}

TEST_F(GrpcFrontendTest, WrongRawByteCountIsInvalid) {
  ModelInferRequest req = Request();
  AddInput(&req, "x", "FP32", {1, 64});
  req.add_raw_input_contents(std::string(252, '\0'));
  EXPECT_EQ(ExpectInvalid(req), "input 'x': shape [1,64] of FP32 needs 256 bytes, got 252");
}

TEST_F(GrpcFrontendTest, UnknownDatatypeIsInvalid) {
  ModelInferRequest req = Request();
  AddInput(&req, "x", "FLOAT32", {1});
  req.add_raw_input_contents(Pack<float>({1.0f}));
  EXPECT_EQ(ExpectInvalid(req), "input 'x': unknown datatype 'FLOAT32'");
}

TEST_F(GrpcFrontendTest, HostileRequestsAreRefusedNotCrashed) {
  struct Case {
    const char* what;
    std::function<void(ModelInferRequest*)> build;
    const char* expect;  // substring of the message
  };
  const std::vector<Case> cases = {
      {"negative dim",
       [](ModelInferRequest* r) {
         AddInput(r, "x", "FP32", {-1, 4});
       },
       "negative dimension"},
      {"overflowing shape",
       [](ModelInferRequest* r) {
         AddInput(r, "x", "FP32", {int64_t{1} << 40, int64_t{1} << 40});
         r->add_raw_input_contents("abcd");
       },
       "too many elements"},
      {"product wraps to small",
       [](ModelInferRequest* r) {
         AddInput(r, "x", "FP32", {int64_t{1} << 32, int64_t{1} << 32, 2});
       },
       "too many elements"},
      {"FP16 typed",
       [](ModelInferRequest* r) {
         AddInput(r, "x", "FP16", {1})->mutable_contents()->add_fp32_contents(1.0f);
       },
       "raw contents"},
      {"INT8 out of range",
       [](ModelInferRequest* r) {
         AddInput(r, "x", "INT8", {1})->mutable_contents()->add_int_contents(300);
       },
       "out of range for INT8"},
      {"UINT16 out of range",
       [](ModelInferRequest* r) {
         AddInput(r, "x", "UINT16", {1})->mutable_contents()->add_uint_contents(70000);
       },
       "out of range for UINT16"},
      {"wrong typed field",
       [](ModelInferRequest* r) {
         AddInput(r, "x", "FP32", {1})->mutable_contents()->add_int_contents(1);
       },
       "FP32 elements belong in fp32_contents"},
      {"raw and typed mixed",
       [](ModelInferRequest* r) {
         AddInput(r, "x", "FP32", {1})->mutable_contents()->add_fp32_contents(1.0f);
         r->add_raw_input_contents(Pack<float>({1.0f}));
       },
       "use one or the other"},
      {"duplicate input",
       [](ModelInferRequest* r) {
         AddInput(r, "x", "FP32", {1})->mutable_contents()->add_fp32_contents(1.0f);
         AddInput(r, "x", "FP32", {1})->mutable_contents()->add_fp32_contents(1.0f);
       },
       "appears twice"},
      {"unnamed input",
       [](ModelInferRequest* r) {
         AddInput(r, "", "FP32", {1})->mutable_contents()->add_fp32_contents(1.0f);
       },
       "has no name"},
      {"no model", [](ModelInferRequest* r) { r->clear_model_name(); }, "names no model"},
      {"parameter without value", [](ModelInferRequest* r) { (*r->mutable_parameters())["p"]; },
       "parameter 'p' has no value"},
      {"uint64 parameter too big",
       [](ModelInferRequest* r) { (*r->mutable_parameters())["p"].set_uint64_param(UINT64_MAX); },
       "exceeds the int64 range"},
      {"BYTES prefix overruns",
       [](ModelInferRequest* r) {
         AddInput(r, "x", "BYTES", {1});
         r->add_raw_input_contents(PackStrings({"hello"}).substr(0, 7));
       },
       "claims 5 bytes"},
      {"BYTES truncated prefix",
       [](ModelInferRequest* r) {
         AddInput(r, "x", "BYTES", {2});
         r->add_raw_input_contents(PackStrings({"a"}) + "\x01\x00");
       },
       "inside a length prefix"},
      {"BYTES too few elements",
       [](ModelInferRequest* r) {
         AddInput(r, "x", "BYTES", {3});
         r->add_raw_input_contents(PackStrings({"a", "b"}));
       },
       "needs 3 elements, got 2"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    ModelInferRequest req = Request();
    c.build(&req);
    const std::string m = ExpectInvalid(req);
    EXPECT_NE(m.find(c.expect), std::string::npos) << m;
  }
  EXPECT_EQ(fake_.calls().infer_count, 0);
}

TEST_F(GrpcFrontendTest, SharedMemoryIsUnimplemented) {
  ModelInferRequest req = Request();
  auto* in = AddInput(&req, "x", "FP32", {1});
  (*in->mutable_parameters())["shared_memory_region"].set_string_param("r0");
  ModelInferResponse resp;
  EXPECT_EQ(Infer(req, &resp).error_code(), grpc::StatusCode::UNIMPLEMENTED);
}

TEST_F(GrpcFrontendTest, ZeroElementTensorIsFine) {
  ModelInferRequest req = Request();
  AddInput(&req, "x", "FP16", {0, 4});
  ModelInferResponse resp;
  grpc::Status s = Infer(req, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(resp.raw_output_contents(0), "");
}

TEST_F(GrpcFrontendTest, OversizedMessageIsResourceExhausted) {
  GrpcFrontendOptions options;
  options.max_message_bytes = 1 << 20;
  StartFrontend(options);
  ModelInferRequest req = Request();
  AddInput(&req, "x", "UINT8", {2 << 20});
  req.add_raw_input_contents(std::string(2 << 20, '\1'));
  ModelInferResponse resp;
  EXPECT_EQ(Infer(req, &resp).error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(fake_.calls().infer_count, 0);
}

TEST_F(GrpcFrontendTest, RepositoryIndexLoadUnload) {
  fake_.Configure([](auto& c) {
    c.index = {{"digits", "1", "READY", ""}, {"broken", "", "UNAVAILABLE", "bad yaml"}};
  });
  {
    grpc::ClientContext ctx;
    inference::RepositoryIndexRequest req;
    req.set_ready(true);
    inference::RepositoryIndexResponse r;
    ASSERT_TRUE(stub_->RepositoryIndex(&ctx, req, &r).ok());
    EXPECT_TRUE(fake_.calls().last_index_ready_only);
    ASSERT_EQ(r.models_size(), 2);
    EXPECT_EQ(r.models(1).name(), "broken");
    EXPECT_EQ(r.models(1).state(), "UNAVAILABLE");
    EXPECT_EQ(r.models(1).reason(), "bad yaml");
  }
  {
    grpc::ClientContext ctx;
    inference::RepositoryModelLoadRequest req;
    req.set_model_name("digits");
    inference::RepositoryModelLoadResponse r;
    ASSERT_TRUE(stub_->RepositoryModelLoad(&ctx, req, &r).ok());
  }
  {
    fake_.Configure([](auto& c) { c.unload_status = NotFound("model 'x' is not loaded"); });
    grpc::ClientContext ctx;
    inference::RepositoryModelUnloadRequest req;
    req.set_model_name("x");
    (*req.mutable_parameters())["unload_dependents"].set_bool_param(true);
    inference::RepositoryModelUnloadResponse r;
    grpc::Status s = stub_->RepositoryModelUnload(&ctx, req, &r);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
    EXPECT_EQ(s.error_message(), "model 'x' is not loaded");
  }
  {
    grpc::ClientContext ctx;
    inference::RepositoryModelLoadRequest req;
    req.set_model_name("digits");
    (*req.mutable_parameters())["config"].set_string_param("{}");
    inference::RepositoryModelLoadResponse r;
    EXPECT_EQ(stub_->RepositoryModelLoad(&ctx, req, &r).error_code(),
              grpc::StatusCode::UNIMPLEMENTED);
  }
  const auto calls = fake_.calls();
  EXPECT_EQ(calls.loaded, std::vector<std::string>{"digits"});
  EXPECT_EQ(calls.unloaded, std::vector<std::string>{"x"});
}

// Every method is served from the frontend's own completion queue. gRPC's
// callback API, whose "nexting" threads would poll the process's sockets
// beside the queue's threads and hand answers over between threads
// (async_unary.h), is never started: a method left on it would start them
// on its first call.
TEST_F(GrpcFrontendTest, EveryMethodIsServedByTheQueueThreadsAlone) {
  using Oip = inference::GRPCInferenceService::Stub;
  EXPECT_TRUE(Call(stub_.get(), &Oip::ServerLive, inference::ServerLiveRequest()));
  EXPECT_TRUE(Call(stub_.get(), &Oip::ServerReady, inference::ServerReadyRequest()));
  inference::ModelReadyRequest model_ready;
  model_ready.set_name("digits");
  EXPECT_TRUE(Call(stub_.get(), &Oip::ModelReady, model_ready));
  EXPECT_TRUE(Call(stub_.get(), &Oip::ServerMetadata, inference::ServerMetadataRequest()));
  inference::ModelMetadataRequest model_metadata;
  model_metadata.set_name("digits");
  EXPECT_TRUE(Call(stub_.get(), &Oip::ModelMetadata, model_metadata));
  EXPECT_TRUE(Call(stub_.get(), &Oip::RepositoryIndex, inference::RepositoryIndexRequest()));
  inference::RepositoryModelLoadRequest load;
  load.set_model_name("digits");
  EXPECT_TRUE(Call(stub_.get(), &Oip::RepositoryModelLoad, load));
  inference::RepositoryModelUnloadRequest unload;
  unload.set_model_name("digits");
  EXPECT_TRUE(Call(stub_.get(), &Oip::RepositoryModelUnload, unload));
  ModelInferRequest infer = Request();
  AddInput(&infer, "x", "FP32", {1, 1});
  infer.add_raw_input_contents(Pack<float>({1.0f}));
  EXPECT_TRUE(Call(stub_.get(), &Oip::ModelInfer, infer));
  // And somm's control service, on the same port.
  auto control = somm::SommControl::NewStub(grpc::CreateChannel(
      "127.0.0.1:" + std::to_string(frontend_->port()), grpc::InsecureChannelCredentials()));
  EXPECT_TRUE(Call(control.get(), &somm::SommControl::Stub::RecentDecisions,
                   somm::RecentDecisionsRequest()));

  const std::vector<std::string> names = testing::ThreadNames();
  EXPECT_EQ(std::count(names.begin(), names.end(), "nexting_thread"), 0);
  EXPECT_GE(std::count(names.begin(), names.end(), "somm-grpc-infer"), 1);
}

TEST_F(GrpcFrontendTest, TakenPortIsUnavailable) {
  GrpcFrontendOptions options;
  options.address = "127.0.0.1";
  options.port = frontend_->port();
  auto second = GrpcFrontend::Start(fake_, options);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kUnavailable);
}

TEST_F(GrpcFrontendTest, BadOptionsAreInvalid) {
  GrpcFrontendOptions options;
  options.port = 70000;
  EXPECT_EQ(GrpcFrontend::Start(fake_, options).status().code(), StatusCode::kInvalidArgument);
  options.port = 0;
  options.max_message_bytes = 0;
  EXPECT_EQ(GrpcFrontend::Start(fake_, options).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(GrpcFrontendTest, ShutdownLetsInFlightQueriesFinish) {
  fake_.Configure([](auto& c) { c.infer_delay = std::chrono::milliseconds(300); });
  ModelInferRequest req = Request();
  AddInput(&req, "x", "FP32", {1})->mutable_contents()->add_fp32_contents(1.0f);
  grpc::Status status;
  std::thread client([&] {
    ModelInferResponse resp;
    status = Infer(req, &resp);
  });
  while (fake_.calls().infer_count == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  frontend_->Shutdown(std::chrono::seconds(5));
  client.join();
  EXPECT_TRUE(status.ok()) << status.error_message();
  frontend_->Shutdown(std::chrono::seconds(1));  // idempotent
}

// Random mutations of a valid request, decoded directly: whatever parses
// must decode to a Status, never a crash (run under ASan to mean more).
TEST(GrpcCodecFuzz, MutatedRequestsNeverCrash) {
  ModelInferRequest base;
  base.set_model_name("m");
  AddInput(&base, "a", "FP32", {2, 2});
  AddInput(&base, "b", "BYTES", {2});
  base.add_raw_input_contents(Pack<float>({1, 2, 3, 4}));
  base.add_raw_input_contents(PackStrings({"xy", "z"}));
  (*base.mutable_parameters())["k"].set_int64_param(3);
  const std::string wire = base.SerializeAsString();
  std::mt19937 rng(1234);
  google::protobuf::LogSilencer quiet;  // invalid UTF-8 in mutated strings is expected
  int parsed = 0;
  for (int i = 0; i < 5000; ++i) {
    std::string bytes = wire;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) bytes[rng() % bytes.size()] = static_cast<char>(rng());
    ModelInferRequest mutated;
    if (!mutated.ParseFromString(bytes)) continue;
    ++parsed;
    InferenceRequest out;
    (void)grpc_codec::DecodeInferRequest(mutated, &out);
  }
  EXPECT_GT(parsed, 100);
}

// Structurally valid messages with hostile values: random datatypes, shapes
// (negative, huge, overflowing) and content sizes, raw or typed.
TEST(GrpcCodecFuzz, RandomShapesAndSizesNeverCrash) {
  const char* kTypes[] = {"BOOL",  "UINT8", "UINT16", "UINT32", "UINT64", "INT8",  "INT16", "INT32",
                          "INT64", "FP16",  "BF16",   "FP32",   "FP64",   "BYTES", "",      "X"};
  const int64_t kDims[] = {0,         1,        2, 3, 7, -1, -7, int64_t{1} << 31, int64_t{1} << 62,
                           INT64_MAX, INT64_MIN};
  std::mt19937 rng(99);
  int accepted = 0;
  for (int i = 0; i < 5000; ++i) {
    ModelInferRequest r;
    r.set_model_name("m");
    const bool raw = rng() % 2;
    const int inputs = static_cast<int>(rng() % 3);
    for (int k = 0; k < inputs; ++k) {
      std::vector<int64_t> shape;
      for (int d = static_cast<int>(rng() % 4); d > 0; --d) shape.push_back(kDims[rng() % 11]);
      auto* in = AddInput(&r, "t" + std::to_string(k), kTypes[rng() % 16], shape);
      const size_t n = rng() % 12;
      if (raw) {
        std::string bytes(n * (1 + rng() % 8), '\0');
        for (char& b : bytes) b = static_cast<char>(rng() % 3);  // small length prefixes
        r.add_raw_input_contents(bytes);
      } else {
        auto* c = in->mutable_contents();
        for (size_t e = 0; e < n; ++e) {
          switch (rng() % 5) {
            case 0:
              c->add_int_contents(static_cast<int32_t>(rng()));
              break;
            case 1:
              c->add_uint_contents(static_cast<uint32_t>(rng()));
              break;
            case 2:
              c->add_fp32_contents(1.0f);
              break;
            case 3:
              c->add_bool_contents(true);
              break;
            default:
              c->add_bytes_contents(std::string(rng() % 4, 'b'));
              break;
          }
        }
      }
    }
    if (rng() % 8 == 0) r.add_raw_input_contents("extra");
    InferenceRequest out;
    if (grpc_codec::DecodeInferRequest(r, &out).ok()) {
      ++accepted;
      for (const Tensor& t : out.inputs) EXPECT_TRUE(t.CheckByteSize().ok()) << t.name;
    }
  }
  EXPECT_GT(accepted, 0);
}

}  // namespace
}  // namespace somm
