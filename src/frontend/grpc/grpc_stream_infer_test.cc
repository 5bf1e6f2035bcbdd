// ModelStreamInfer (frontend/grpc/stream_infer.h) over loopback against a
// fake InferenceServer that holds its queries: answers in the order sent
// whatever order they finish in, a failed request answered in its place,
// the window that bounds what one stream holds, the key checked before a
// message is read, and a stop that ends an idle stream at once.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "api/testing/fake_inference_server.h"
#include "frontend/grpc/grpc_server.h"
#include "frontend/grpc/stream_infer.h"
#include "proto/inference.grpc.pb.h"
#include "serving/testing/one_key_guard.h"

namespace somm {
namespace {

using inference::ModelInferRequest;
using inference::ModelStreamInferResponse;
using Stream = grpc::ClientReaderWriter<ModelInferRequest, ModelStreamInferResponse>;

// Holds every query until the test answers it, in the order it chooses.
class OrderedHoldingServer : public testing::FakeInferenceServer {
 public:
  void Infer(InferenceRequest request, InferCallback done) override {
    std::lock_guard lock(mu_);
    held_.emplace_back(std::move(request), std::move(done));
    ++ever_held_;
    cv_.notify_all();
  }
  bool WaitHeld(size_t n) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(10), [&] { return held_.size() >= n; });
  }
  size_t held() {
    std::lock_guard lock(mu_);
    return held_.size();
  }
  int ever_held() {
    std::lock_guard lock(mu_);
    return ever_held_;
  }
  // Answers every query held, last first.
  void ReleaseNewestFirst() {
    std::vector<std::pair<InferenceRequest, InferCallback>> held;
    {
      std::lock_guard lock(mu_);
      held.swap(held_);
    }
    for (auto it = held.rbegin(); it != held.rend(); ++it) {
      FakeInferenceServer::Infer(std::move(it->first), it->second);
    }
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::pair<InferenceRequest, InferCallback>> held_;
  int ever_held_ = 0;
};

ModelInferRequest EchoRequest(const std::string& model, const std::string& id) {
  ModelInferRequest r;
  r.set_model_name(model);
  r.set_id(id);
  auto* in = r.add_inputs();
  in->set_name("IN0");
  in->set_datatype("FP32");
  in->add_shape(1);
  in->add_shape(4);
  for (float v : {1.f, 2.f, 3.f, 4.f}) in->mutable_contents()->add_fp32_contents(v);
  return r;
}

class GrpcStreamInferTest : public ::testing::Test {
 protected:
  void Start(GrpcFrontendOptions options = {}) {
    options.address = "127.0.0.1";
    options.port = 0;
    auto started = GrpcFrontend::Start(fake_, options);
    ASSERT_TRUE(started.ok()) << started.status().ToString();
    frontend_ = std::move(started).value();
    auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(frontend_->port()),
                                       grpc::InsecureChannelCredentials());
    stub_ = inference::GRPCInferenceService::NewStub(channel);
  }
  std::unique_ptr<Stream> Open(grpc::ClientContext* ctx, const std::string& key = "") {
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    if (!key.empty()) ctx->AddMetadata("authorization", key);
    return stub_->ModelStreamInfer(ctx);
  }

  OrderedHoldingServer fake_;
  std::unique_ptr<GrpcFrontend> frontend_;
  std::unique_ptr<inference::GRPCInferenceService::Stub> stub_;
};

TEST_F(GrpcStreamInferTest, AnswersComeInTheOrderSentWhateverOrderTheyFinish) {
  Start();
  grpc::ClientContext ctx;
  auto stream = Open(&ctx);
  constexpr int kRequests = 8;
  for (int i = 0; i < kRequests; ++i) {
    ASSERT_TRUE(stream->Write(EchoRequest("echo", std::to_string(i))));
  }
  ASSERT_TRUE(fake_.WaitHeld(kRequests));
  fake_.ReleaseNewestFirst();  // the last sent finishes first
  for (int i = 0; i < kRequests; ++i) {
    ModelStreamInferResponse answer;
    ASSERT_TRUE(stream->Read(&answer)) << "answer " << i;
    EXPECT_EQ(answer.error_message(), "");
    EXPECT_EQ(answer.infer_response().id(), std::to_string(i));
    EXPECT_EQ(answer.infer_response().model_name(), "echo");
    ASSERT_EQ(answer.infer_response().outputs_size(), 1);
  }
  stream->WritesDone();
  ModelStreamInferResponse extra;
  EXPECT_FALSE(stream->Read(&extra));
  const grpc::Status status = stream->Finish();
  EXPECT_TRUE(status.ok()) << status.error_message();
}

TEST_F(GrpcStreamInferTest, AFailedRequestIsAnsweredInItsPlaceAndTheStreamGoesOn) {
  fake_.Configure([](testing::FakeInferenceServer::Config& c) { c.inline_callback = false; });
  Start();
  // What the unary call says of a model that does not exist.
  inference::ModelInferResponse unary;
  grpc::ClientContext unary_ctx;
  ModelInferRequest missing = EchoRequest("no-such-model", "b");
  std::thread answer_unary([&] {
    ASSERT_TRUE(fake_.WaitHeld(1));
    fake_.ReleaseNewestFirst();
  });
  const grpc::Status unary_status = stub_->ModelInfer(&unary_ctx, missing, &unary);
  answer_unary.join();
  ASSERT_FALSE(unary_status.ok());

  grpc::ClientContext ctx;
  auto stream = Open(&ctx);
  ASSERT_TRUE(stream->Write(EchoRequest("echo", "a")));
  ASSERT_TRUE(stream->Write(missing));
  ModelInferRequest malformed = EchoRequest("echo", "c");
  malformed.mutable_inputs(0)->set_datatype("NOT_A_TYPE");
  ASSERT_TRUE(stream->Write(malformed));
  ASSERT_TRUE(stream->Write(EchoRequest("echo", "d")));
  stream->WritesDone();
  // The unary call's query, then a, b and d reach the server; c does not
  // decode.
  std::thread answer_all([&] {
    for (int i = 0; i < 250 && fake_.ever_held() < 4; ++i) {
      fake_.ReleaseNewestFirst();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    fake_.ReleaseNewestFirst();
  });
  std::vector<ModelStreamInferResponse> answers;
  ModelStreamInferResponse answer;
  while (stream->Read(&answer)) answers.push_back(answer);
  answer_all.join();
  const grpc::Status status = stream->Finish();
  EXPECT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(answers.size(), 4u);
  EXPECT_EQ(answers[0].error_message(), "");
  EXPECT_EQ(answers[0].infer_response().id(), "a");
  // The missing model: its answer carries the unary call's message, and
  // names the request it answers.
  EXPECT_NE(answers[1].error_message().find(unary_status.error_message()), std::string::npos)
      << answers[1].error_message() << " vs " << unary_status.error_message();
  EXPECT_EQ(answers[1].infer_response().id(), "b");
  EXPECT_EQ(answers[1].infer_response().model_name(), "no-such-model");
  EXPECT_NE(answers[2].error_message().find("NOT_A_TYPE"), std::string::npos)
      << answers[2].error_message();
  EXPECT_EQ(answers[2].infer_response().id(), "c");
  EXPECT_EQ(answers[3].error_message(), "");
  EXPECT_EQ(answers[3].infer_response().id(), "d");
}

TEST_F(GrpcStreamInferTest, AStreamHoldsAtMostItsWindowOfRequests) {
  Start();
  grpc::ClientContext ctx;
  auto stream = Open(&ctx);
  const int total = 3 * static_cast<int>(grpc_async::kStreamWindow);
  std::thread writer([&] {
    for (int i = 0; i < total; ++i) {
      if (!stream->Write(EchoRequest("echo", std::to_string(i)))) return;
    }
    stream->WritesDone();
  });
  ASSERT_TRUE(fake_.WaitHeld(grpc_async::kStreamWindow));
  // Every request was sent (small messages: gRPC buffers them), yet the
  // server reads no more while the window is full.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(fake_.held(), grpc_async::kStreamWindow);
  // Answers are read while the server takes the rest, window by window.
  int read = 0;
  std::thread answerer([&] {
    for (int i = 0; i < 500 && fake_.ever_held() < total; ++i) {
      EXPECT_LE(fake_.held(), grpc_async::kStreamWindow);
      fake_.ReleaseNewestFirst();
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    fake_.ReleaseNewestFirst();
  });
  ModelStreamInferResponse answer;
  while (stream->Read(&answer)) {
    EXPECT_EQ(answer.infer_response().id(), std::to_string(read));
    ++read;
  }
  writer.join();
  answerer.join();
  EXPECT_EQ(read, total);
  EXPECT_TRUE(stream->Finish().ok());
}

TEST_F(GrpcStreamInferTest, AStreamWithoutAKeyIsRefusedBeforeAnyMessageIsRead) {
  testing::OneKeyGuard guard;
  GrpcFrontendOptions options;
  options.guard = &guard;
  Start(options);
  {
    grpc::ClientContext ctx;
    auto stream = Open(&ctx, "Bearer wrong");
    stream->Write(EchoRequest("echo", "x"));  // may fail: the stream is refused
    stream->WritesDone();
    ModelStreamInferResponse answer;
    EXPECT_FALSE(stream->Read(&answer));
    const grpc::Status status = stream->Finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << status.error_message();
  }
  EXPECT_EQ(guard.admitted.load(), 0);
  EXPECT_EQ(fake_.ever_held(), 0);
  // With the key, each request is admitted on its own.
  grpc::ClientContext ctx;
  auto stream = Open(&ctx, "Bearer good");
  ASSERT_TRUE(stream->Write(EchoRequest("echo", "1")));
  ASSERT_TRUE(stream->Write(EchoRequest("echo", "2")));
  ASSERT_TRUE(fake_.WaitHeld(2));
  fake_.ReleaseNewestFirst();
  ModelStreamInferResponse answer;
  ASSERT_TRUE(stream->Read(&answer));
  EXPECT_EQ(answer.infer_response().id(), "1");
  ASSERT_TRUE(stream->Read(&answer));
  EXPECT_EQ(answer.infer_response().id(), "2");
  EXPECT_EQ(guard.admitted.load(), 2);
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());
}

TEST_F(GrpcStreamInferTest, AStopEndsAnIdleStreamAtOnceAfterAnsweringWhatItHolds) {
  Start();
  grpc::ClientContext ctx;
  auto stream = Open(&ctx);
  ASSERT_TRUE(stream->Write(EchoRequest("echo", "held")));
  ASSERT_TRUE(fake_.WaitHeld(1));
  // The stop begins while one request is in hand and the stream is idle.
  const auto begun = std::chrono::steady_clock::now();
  std::thread stopper(
      [&] { frontend_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(30)); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  fake_.ReleaseNewestFirst();
  ModelStreamInferResponse answer;
  ASSERT_TRUE(stream->Read(&answer));
  EXPECT_EQ(answer.infer_response().id(), "held");
  EXPECT_EQ(answer.error_message(), "");
  EXPECT_FALSE(stream->Read(&answer));
  const grpc::Status status = stream->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE) << status.error_message();
  stopper.join();
  EXPECT_LT(std::chrono::steady_clock::now() - begun, std::chrono::seconds(5));
}

}  // namespace
}  // namespace somm
