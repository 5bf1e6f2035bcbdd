// Overload shedding on gRPC (issue #16): with an InflightLimit, a ModelInfer
// that finds the limit reached is answered RESOURCE_EXHAUSTED before its
// tensors are decoded; health and metadata are never shed; the slot comes
// back with the answer.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "frontend/grpc/grpc_server.h"
#include "proto/inference.grpc.pb.h"
#include "serving/inflight_limit.h"
#include "api/testing/holding_inference_server.h"

namespace somm {
namespace {

// The server gives a query's inflight slot back once the answer is on its
// way, so a client may see the answer a moment before the count drops: wait
// for it (boundedly) rather than read it once.
int64_t InflightOnceSettled(const InflightLimit& limit) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (limit.inflight() != 0 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return limit.inflight();
}

using inference::ModelInferRequest;
using inference::ModelInferResponse;

class GrpcOverloadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    limit_ = std::make_unique<InflightLimit>(InflightLimit::Options{1, 1, nullptr});
    GrpcFrontendOptions options;
    options.address = "127.0.0.1";
    options.port = 0;
    options.inflight_limit = limit_.get();
    auto started = GrpcFrontend::Start(server_, options);
    ASSERT_TRUE(started.ok()) << started.status().ToString();
    frontend_ = std::move(started).value();
    stub_ = inference::GRPCInferenceService::NewStub(grpc::CreateChannel(
        "127.0.0.1:" + std::to_string(frontend_->port()), grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    server_.Release();
    if (holder_.joinable()) holder_.join();
    frontend_.reset();
  }

  static ModelInferRequest Valid() {
    ModelInferRequest r;
    r.set_model_name("echo");
    auto* in = r.add_inputs();
    in->set_name("IN0");
    in->set_datatype("FP32");
    in->add_shape(1);
    in->add_shape(4);
    for (float v : {1.f, 2.f, 3.f, 4.f}) in->mutable_contents()->add_fp32_contents(v);
    return r;
  }
  grpc::Status Infer(const ModelInferRequest& request) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    ModelInferResponse response;
    return stub_->ModelInfer(&ctx, request, &response);
  }

  testing::HoldingInferenceServer server_;  // declared first: outlives the frontend
  std::unique_ptr<InflightLimit> limit_;
  std::unique_ptr<GrpcFrontend> frontend_;
  std::unique_ptr<inference::GRPCInferenceService::Stub> stub_;
  std::thread holder_;
};

TEST_F(GrpcOverloadTest, ModelInferOverTheInflightLimitIsResourceExhaustedBeforeDecoding) {
  grpc::StatusCode held_code = grpc::StatusCode::UNKNOWN;
  holder_ = std::thread([&] { held_code = Infer(Valid()).error_code(); });
  ASSERT_TRUE(server_.WaitHeld(1));

  // Contents that do not match the shape: decoded, this is INVALID_ARGUMENT.
  ModelInferRequest bad = Valid();
  bad.mutable_inputs(0)->mutable_contents()->add_fp32_contents(5.f);
  grpc::Status s = Infer(bad);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  EXPECT_EQ(s.error_message(),
            "server overloaded: 1 inference requests in flight, its limit (max_inflight); "
            "retry after 1 s");
  EXPECT_EQ(limit_->shed(), 1);
  EXPECT_EQ(server_.held(), 1u);

  {
    grpc::ClientContext ctx;
    inference::ServerLiveResponse live;
    ASSERT_TRUE(stub_->ServerLive(&ctx, {}, &live).ok());
    EXPECT_TRUE(live.live());
  }
  {
    grpc::ClientContext ctx;
    inference::ModelMetadataRequest req;
    req.set_name("echo");
    inference::ModelMetadataResponse metadata;
    EXPECT_TRUE(stub_->ModelMetadata(&ctx, req, &metadata).ok());
  }

  server_.Release();
  holder_.join();
  EXPECT_EQ(held_code, grpc::StatusCode::OK);
  EXPECT_EQ(InflightOnceSettled(*limit_), 0);
  // Recovery at once; the bad request now reaches the decoder.
  EXPECT_EQ(Infer(bad).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(InflightOnceSettled(*limit_), 0);
}

}  // namespace
}  // namespace somm
