// The standard gRPC health service on GrpcFrontend's port, driven by a
// client generated from proto/health.proto (grpc.health.v1), against a
// FakeInferenceServer whose readiness the tests move.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "api/testing/fake_inference_server.h"
#include "frontend/grpc/grpc_server.h"
#include "frontend/grpc/health.h"
#include "proto/health.grpc.pb.h"

namespace somm {
namespace {

using grpc::health::v1::Health;
using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;
using ::somm::testing::FakeInferenceServer;
using std::chrono::milliseconds;
using std::chrono::steady_clock;

class GrpcHealthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    GrpcFrontendOptions o;
    o.address = "127.0.0.1";
    o.port = 0;
    auto started = GrpcFrontend::Start(fake_, o);
    ASSERT_TRUE(started.ok()) << started.status().ToString();
    frontend_ = std::move(started).value();
    channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(frontend_->port()),
                                   grpc::InsecureChannelCredentials());
    stub_ = Health::NewStub(channel_);
  }

  // Check(service): the status, or the call's error code as a negative.
  int Check(const std::string& service) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    HealthCheckRequest request;
    request.set_service(service);
    HealthCheckResponse response;
    const grpc::Status s = stub_->Check(&context, request, &response);
    return s.ok() ? static_cast<int>(response.status()) : -static_cast<int>(s.error_code());
  }

  FakeInferenceServer fake_;
  std::unique_ptr<GrpcFrontend> frontend_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<Health::Stub> stub_;
};

TEST_F(GrpcHealthTest, CheckFollowsReadinessPerServiceAndOverall) {
  for (const char* service : {"", "inference.GRPCInferenceService", "somm.SommControl"}) {
    EXPECT_EQ(Check(service), HealthCheckResponse::SERVING) << service;
  }
  fake_.ready = false;
  for (const char* service : {"", "inference.GRPCInferenceService", "somm.SommControl"}) {
    EXPECT_EQ(Check(service), HealthCheckResponse::NOT_SERVING) << service;
  }
  fake_.ready = true;
  EXPECT_EQ(Check(""), HealthCheckResponse::SERVING);
  // The spec's answer for a service the server does not know.
  EXPECT_EQ(Check("no.such.Service"), -static_cast<int>(grpc::StatusCode::NOT_FOUND));
}

TEST_F(GrpcHealthTest, WatchSendsTheStatusThenEachChange) {
  grpc::ClientContext context;
  HealthCheckRequest request;
  auto reader = stub_->Watch(&context, request);
  HealthCheckResponse r;
  ASSERT_TRUE(reader->Read(&r));
  EXPECT_EQ(r.status(), HealthCheckResponse::SERVING);
  fake_.ready = false;
  const auto t0 = steady_clock::now();
  ASSERT_TRUE(reader->Read(&r));
  EXPECT_EQ(r.status(), HealthCheckResponse::NOT_SERVING);
  EXPECT_LT(steady_clock::now() - t0, milliseconds(20 * grpc_async::kHealthWatchPeriod.count()));
  fake_.ready = true;
  ASSERT_TRUE(reader->Read(&r));
  EXPECT_EQ(r.status(), HealthCheckResponse::SERVING);
  context.TryCancel();
  while (reader->Read(&r)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
}

TEST_F(GrpcHealthTest, WatchOfAnUnknownServiceSaysSo) {
  grpc::ClientContext context;
  HealthCheckRequest request;
  request.set_service("no.such.Service");
  auto reader = stub_->Watch(&context, request);
  HealthCheckResponse r;
  ASSERT_TRUE(reader->Read(&r));
  EXPECT_EQ(r.status(), HealthCheckResponse::SERVICE_UNKNOWN);
  context.TryCancel();
  while (reader->Read(&r)) {
  }
}

// A stop with watches open ends them (NOT_SERVING, then OK) instead of
// waiting for its deadline.
TEST_F(GrpcHealthTest, AStopEndsOpenWatchesAtOnce) {
  grpc::ClientContext context;
  HealthCheckRequest request;
  auto reader = stub_->Watch(&context, request);
  HealthCheckResponse r;
  ASSERT_TRUE(reader->Read(&r));
  ASSERT_EQ(r.status(), HealthCheckResponse::SERVING);
  const auto t0 = steady_clock::now();
  std::thread stop([&] { frontend_->Shutdown(std::chrono::seconds(30)); });
  ASSERT_TRUE(reader->Read(&r));
  EXPECT_EQ(r.status(), HealthCheckResponse::NOT_SERVING);
  EXPECT_FALSE(reader->Read(&r));
  EXPECT_TRUE(reader->Finish().ok());
  stop.join();
  EXPECT_LT(steady_clock::now() - t0, std::chrono::seconds(5));
}

// Many watches whose clients read nothing cost one small message each and
// leave the server answering Check.
TEST_F(GrpcHealthTest, WatchesThatAreNotReadDoNotStopTheServer) {
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::unique_ptr<grpc::ClientReader<HealthCheckResponse>>> readers;
  for (int i = 0; i < 50; ++i) {
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    readers.push_back(stub_->Watch(contexts.back().get(), HealthCheckRequest()));
  }
  for (int flip = 0; flip < 10; ++flip) {
    fake_.ready = flip % 2 == 1;
    std::this_thread::sleep_for(grpc_async::kHealthWatchPeriod * 2);
  }
  fake_.ready = true;
  EXPECT_EQ(Check(""), HealthCheckResponse::SERVING);
  for (auto& c : contexts) c->TryCancel();
  for (auto& reader : readers) {
    HealthCheckResponse r;
    while (reader->Read(&r)) {
    }
    reader->Finish();
  }
}

}  // namespace
}  // namespace somm
