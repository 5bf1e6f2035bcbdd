// The model-less commands end to end over both protocols: the real clients and
// frontends, with fake InferenceServers behind them.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include "cli/commands.h"
#include "frontend/grpc/grpc_server.h"
#include "frontend/http/http_frontend.h"
#include "api/testing/fake_inference_server.h"

namespace somm {
namespace {

namespace fs = std::filesystem;
using ::somm::testing::FakeInferenceServer;

RegistrationStatus Ready(const std::string& name) {
  RegistrationStatus s;
  s.name = name;
  s.state = "READY";
  s.phase = "done";
  s.done = 2;
  s.total = 2;
  VariantProfile v;
  v.model = name;
  v.variant = "ts-fp32";
  v.precision = "fp32";
  v.accuracy = 0.95;
  HardwareProfile hw;
  hw.latency = LatencyCurve::Fit({{1, 0.5}});
  v.hardware = {hw};
  s.variants = {v};
  return s;
}

class ModelLessCommandsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    HttpFrontendOptions http;
    http.address = "127.0.0.1";
    http.port = 0;
    auto h = HttpFrontend::Start(http_server_, http);
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    http_ = std::move(h).value();
    GrpcFrontendOptions grpc;
    grpc.address = "127.0.0.1";
    grpc.port = 0;
    auto g = GrpcFrontend::Start(grpc_server_, grpc);
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    grpc_ = std::move(g).value();

    dir_ = fs::temp_directory_path() / ("somm_cli_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    std::ofstream(dir_ / "model.pt") << "torchscript";
  }
  void TearDown() override { fs::remove_all(dir_); }

  ClientOptions Http() const { return {"127.0.0.1:" + std::to_string(http_->port()), "http"}; }
  ClientOptions Grpc() const { return {"127.0.0.1:" + std::to_string(grpc_->port()), "grpc"}; }

  RegisterOptions Register(const std::string& name, ClientOptions client) const {
    RegisterOptions o;
    o.client = std::move(client);
    o.name = name;
    o.model_file = (dir_ / "model.pt").string();
    o.task = "classification/digits";
    o.inputs = {"pixels:FP32:64"};
    o.outputs = {"logits:FP32:10"};
    o.max_batch_size = 32;
    o.poll_ms = 20;
    return o;
  }

  FakeInferenceServer http_server_;
  FakeInferenceServer grpc_server_;
  std::unique_ptr<HttpFrontend> http_;
  std::unique_ptr<GrpcFrontend> grpc_;
  fs::path dir_;
};

TEST_F(ModelLessCommandsTest, RegisterOverHttpWaitsForTheVariants) {
  // The fake reports GENERATING 0/3 until this thread marks the model READY.
  std::thread finish([this] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    http_server_.Configure(
        [](FakeInferenceServer::Config& c) { c.registrations["fresh"] = Ready("fresh"); });
  });
  RegisterOptions o = Register("fresh", Http());
  o.wait = true;
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  const int rc = RunRegister(o);
  const std::string out = ::testing::internal::GetCapturedStdout();
  const std::string err = ::testing::internal::GetCapturedStderr();
  finish.join();
  EXPECT_EQ(rc, 0) << err;
  EXPECT_NE(out.find("registered fresh for task classification/digits"), std::string::npos) << out;
  EXPECT_NE(out.find("model fresh: READY (1 variant)"), std::string::npos) << out;
  EXPECT_NE(out.find("fresh:1:ts-fp32"), std::string::npos) << out;
  EXPECT_NE(err.find("\r[..........] 0/3 queued"), std::string::npos) << err;
  // Redrawn only when the line changes.
  EXPECT_EQ(err.find("0/3 queued", err.find("0/3 queued") + 1), std::string::npos) << err;
  EXPECT_NE(err.find("\r[##########] 2/2 done"), std::string::npos) << err;
  EXPECT_EQ(http_server_.calls().last_registration.max_batch_size, 32);

  // Registering the name again fails with the server's message.
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(RunRegister(Register("fresh", Http())), 1);
  EXPECT_NE(::testing::internal::GetCapturedStderr().find("already exists"), std::string::npos);
}

TEST_F(ModelLessCommandsTest, RegisterOverGrpcAndFailedGeneration) {
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(RunRegister(Register("other", Grpc())), 0);
  EXPECT_NE(::testing::internal::GetCapturedStdout().find("somm variants other"),
            std::string::npos);
  EXPECT_EQ(grpc_server_.calls().last_registration.model_bytes, "torchscript");

  // --wait on a model whose generation fails exits 1 and prints why.
  std::thread fail([this] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    grpc_server_.Configure([](FakeInferenceServer::Config& c) {
      c.registrations["broken"] = {
          "broken", "FAILED", "tracing", 1, 4, "model.pt is not TorchScript", {}, {}};
    });
  });
  RegisterOptions o = Register("broken", Grpc());
  o.wait = true;
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  const int rc = RunRegister(o);
  const std::string out = ::testing::internal::GetCapturedStdout();
  const std::string err = ::testing::internal::GetCapturedStderr();
  fail.join();
  EXPECT_EQ(rc, 1);
  EXPECT_NE(err.find("\r[##........] 1/4 tracing"), std::string::npos) << err;
  EXPECT_NE(out.find("model broken: FAILED (tracing)"), std::string::npos) << out;
  EXPECT_NE(out.find("model.pt is not TorchScript"), std::string::npos) << out;
}

TEST_F(ModelLessCommandsTest, VariantsAndDecisionsOverBothProtocols) {
  http_server_.Configure([](FakeInferenceServer::Config& c) { c.registrations["m"] = Ready("m"); });
  grpc_server_.Configure([](FakeInferenceServer::Config& c) {
    c.registrations["m"] = Ready("m");
    c.decisions = {{1767225600000, "m", "none", "default", "m:1:ts-fp32", "cpu1", 0.5, 0, "r"}};
  });
  http_server_.Configure([](FakeInferenceServer::Config& c) {
    c.decisions = {{1767225600000, "m", "none", "default", "m:1:ts-fp32", "cpu1", 0.5, 0, "r"}};
  });
  for (const ClientOptions& client : {Http(), Grpc()}) {
    SCOPED_TRACE(client.protocol);
    ::testing::internal::CaptureStdout();
    EXPECT_EQ(RunVariants({client, "m"}), 0);
    std::string out = ::testing::internal::GetCapturedStdout();
    EXPECT_NE(out.find("model m: READY (1 variant)"), std::string::npos) << out;
    EXPECT_NE(out.find("m:1:ts-fp32  fp32       yes     0.9500"), std::string::npos) << out;

    ::testing::internal::CaptureStdout();
    EXPECT_EQ(RunDecisions({client, 10}), 0);
    out = ::testing::internal::GetCapturedStdout();
    EXPECT_NE(out.find("2026-01-01T00:00:00.000Z  m "), std::string::npos) << out;

    ::testing::internal::CaptureStderr();
    EXPECT_EQ(RunVariants({client, "nope"}), 1);
    EXPECT_NE(::testing::internal::GetCapturedStderr().find("NOT_FOUND"), std::string::npos);
  }
  EXPECT_EQ(http_server_.calls().last_decision_limit, 10u);
  EXPECT_EQ(grpc_server_.calls().last_decision_limit, 10u);
}

}  // namespace
}  // namespace somm
