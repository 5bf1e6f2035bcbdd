// Who calls is known before a message costs anything, on gRPC as on REST
// (security review): a call without a valid key is refused from its
// metadata alone, its message never read; and the byte budget refuses
// messages that would pass it while small ones go on.
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "frontend/grpc/grpc_server.h"
#include "frontend/grpc/key_first.h"
#include "proto/inference.grpc.pb.h"
#include "proto/somm.grpc.pb.h"
#include "serving/byte_budget.h"
#include "api/testing/holding_inference_server.h"
#include "serving/testing/one_key_guard.h"

namespace somm {
namespace {

using inference::ModelInferRequest;
using inference::ModelInferResponse;

using testing::OneKeyGuard;

class GrpcFrontendFixture : public ::testing::Test {
 protected:
  void Start(GrpcFrontendOptions options) {
    options.address = "127.0.0.1";
    options.port = 0;
    auto started = GrpcFrontend::Start(server_, options);
    ASSERT_TRUE(started.ok()) << started.status().ToString();
    frontend_ = std::move(started).value();
    grpc::ChannelArguments args;
    args.SetMaxSendMessageSize(64 << 20);
    args.SetMaxReceiveMessageSize(64 << 20);
    channel_ = grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(frontend_->port()),
                                         grpc::InsecureChannelCredentials(), args);
    stub_ = inference::GRPCInferenceService::NewStub(channel_);
  }
  void TearDown() override {
    server_.Release();
    for (std::thread& t : clients_) t.join();
    frontend_.reset();
  }

  // Opens a call of `path` with `authorization` ("" = none) and sends no
  // message: the status it ends with within `deadline_ms`.
  grpc::Status CallWithoutMessage(const std::string& path, const std::string& authorization,
                                  int deadline_ms) {
    grpc::GenericStub stub(channel_);
    grpc::ClientContext context;
    if (!authorization.empty()) context.AddMetadata("authorization", authorization);
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::milliseconds(deadline_ms));
    grpc::CompletionQueue cq;
    std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call =
        stub.PrepareCall(&context, path, &cq);
    call->StartCall(reinterpret_cast<void*>(1));
    grpc::Status status;
    call->Finish(&status, reinterpret_cast<void*>(2));
    void* tag = nullptr;
    bool ok = false;
    while (cq.Next(&tag, &ok) && tag != reinterpret_cast<void*>(2)) {
    }
    cq.Shutdown();
    while (cq.Next(&tag, &ok)) {
    }
    return status;
  }

  grpc::Status Infer(const ModelInferRequest& request, const std::string& authorization,
                     ModelInferResponse* response = nullptr) {
    grpc::ClientContext context;
    if (!authorization.empty()) context.AddMetadata("authorization", authorization);
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    ModelInferResponse ignored;
    return stub_->ModelInfer(&context, request, response != nullptr ? response : &ignored);
  }

  // An "echo" query of `rows` x 4 FP32 values (16 bytes a row) as raw bytes.
  static ModelInferRequest Echo(int64_t rows) {
    ModelInferRequest r;
    r.set_model_name("echo");
    auto* in = r.add_inputs();
    in->set_name("IN0");
    in->set_datatype("FP32");
    in->add_shape(rows);
    in->add_shape(4);
    r.add_raw_input_contents(std::string(static_cast<size_t>(rows) * 16, '\0'));
    return r;
  }

  testing::HoldingInferenceServer server_;  // declared first: outlives the frontend
  std::unique_ptr<GrpcFrontend> frontend_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<inference::GRPCInferenceService::Stub> stub_;
  std::vector<std::thread> clients_;
};

class GrpcKeyFirstTest : public GrpcFrontendFixture {
 protected:
  void SetUp() override {
    GrpcFrontendOptions options;
    options.guard = &guard_;
    Start(options);
  }
  OneKeyGuard guard_;
};

TEST_F(GrpcKeyFirstTest, AnUnknownCallerIsRefusedBeforeItsMessageIsRead) {
  // The client opens each call and sends no message at all: only a server
  // that decides from the metadata can answer before the deadline.
  for (const std::string path :
       {"/inference.GRPCInferenceService/ModelInfer", "/inference.GRPCInferenceService/ModelReady",
        "/inference.GRPCInferenceService/RepositoryModelLoad", "/somm.SommControl/RegisterModel"}) {
    for (const std::string key : {"", "Bearer wrong"}) {
      const auto start = std::chrono::steady_clock::now();
      const grpc::Status status = CallWithoutMessage(path, key, 3000);
      const double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count();
      EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED)
          << path << " key '" << key << "': " << status.error_message();
      EXPECT_EQ(status.error_message(), "unknown API key") << path;
      EXPECT_LT(ms, 1000) << path << ": answered only at the deadline";
    }
  }
  // A large message without a key is refused the same way, and nothing
  // reaches the full admission.
  const grpc::Status big = Infer(Echo(3 << 20), "");  // 48 MiB
  EXPECT_EQ(big.error_code(), grpc::StatusCode::UNAUTHENTICATED) << big.error_message();
  EXPECT_EQ(guard_.admitted.load(), 0) << "nothing reached the full admission";
  EXPECT_EQ(server_.held(), 0u);
}

TEST_F(GrpcKeyFirstTest, AKnownCallersMessageIsReadAsBefore) {
  // With the key, the server waits for the message it was promised.
  EXPECT_EQ(CallWithoutMessage("/inference.GRPCInferenceService/ModelInfer", "Bearer good", 300)
                .error_code(),
            grpc::StatusCode::DEADLINE_EXCEEDED);
  // Health probes carry no key and are answered.
  grpc::ClientContext context;
  inference::ServerLiveResponse live;
  ASSERT_TRUE(stub_->ServerLive(&context, {}, &live).ok());
  EXPECT_TRUE(live.live());
  // And a keyed query is served: held, then answered.
  grpc::Status status;
  ModelInferResponse response;
  clients_.emplace_back([&] { status = Infer(Echo(2), "Bearer good", &response); });
  ASSERT_TRUE(server_.WaitHeld(1));
  server_.Release();
  clients_.back().join();
  clients_.pop_back();
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.raw_output_contents(0).size(), 32u);
}

TEST_F(GrpcKeyFirstTest, TheKeyIsVerifiedOncePerCall) {
  // The metadata check's verified key is carried into the full admission.
  grpc::Status status;
  clients_.emplace_back([&] { status = Infer(Echo(2), "Bearer good"); });
  ASSERT_TRUE(server_.WaitHeld(1));
  server_.Release();
  clients_.back().join();
  clients_.pop_back();
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(guard_.admitted.load(), 1);
  EXPECT_EQ(guard_.authenticated.load(), 1) << "ModelInfer verified its key twice";
  grpc::ClientContext context;
  context.AddMetadata("authorization", "Bearer good");
  inference::ModelMetadataRequest request;
  request.set_name("echo");
  inference::ModelMetadataResponse metadata;
  ASSERT_TRUE(stub_->ModelMetadata(&context, request, &metadata).ok());
  EXPECT_EQ(guard_.authenticated.load(), 2) << "ModelMetadata verified its key twice";
}

class GrpcByteBudgetTest : public GrpcFrontendFixture {
 protected:
  void SetUp() override {
    GrpcFrontendOptions options;
    options.byte_budget = &budget_;
    options.max_message_bytes = 6 << 20;
    Start(options);
  }
  // Room for the largest message (6 MiB) while one large query is held.
  ByteBudget budget_{ByteBudget::Options{15 << 20, 1, nullptr}};
};

TEST_F(GrpcByteBudgetTest, MessagesPastTheBudgetAreResourceExhaustedWhileSmallOnesPass) {
  // 4 MiB of tensor: its message and its decoded tensor hold about 8 MiB.
  // A second one gets room for its message, but not for its tensor.
  constexpr int64_t kRows = (4 << 20) / 16;
  grpc::Status first;
  clients_.emplace_back([&] { first = Infer(Echo(kRows), ""); });
  ASSERT_TRUE(server_.WaitHeld(1));
  EXPECT_GE(budget_.held(), 8 << 20);

  const grpc::Status second = Infer(Echo(kRows), "");
  EXPECT_EQ(second.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << second.error_message();
  EXPECT_NE(second.error_message().find("max_inflight_bytes"), std::string::npos)
      << second.error_message();
  EXPECT_EQ(budget_.refused(), 1);

  grpc::Status small;
  clients_.emplace_back([&] { small = Infer(Echo(1), ""); });
  ASSERT_TRUE(server_.WaitHeld(2)) << "a small query still fits";
  // Metadata is not refused either.
  {
    grpc::ClientContext context;
    inference::ModelMetadataRequest request;
    request.set_name("echo");
    inference::ModelMetadataResponse metadata;
    EXPECT_TRUE(stub_->ModelMetadata(&context, request, &metadata).ok());
  }
  server_.Release();
  for (std::thread& t : clients_) t.join();
  clients_.clear();
  EXPECT_TRUE(first.ok()) << first.error_message();
  EXPECT_TRUE(small.ok()) << small.error_message();
  // Every byte comes back with the answers; the large query fits again.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (budget_.held() != 0 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(budget_.held(), 0);
  grpc::Status again;
  clients_.emplace_back([&] { again = Infer(Echo(kRows), ""); });
  ASSERT_TRUE(server_.WaitHeld(1));
  server_.Release();
  clients_.back().join();
  clients_.pop_back();
  EXPECT_TRUE(again.ok()) << again.error_message();
}

// gRPC reads a message whole once the server asks for it, and its size is
// known only then: a budget counted at arrival let 8 concurrent 60 MB
// messages be read against a 256 MiB budget. Each call now reserves room
// for the largest message it may send before its message is read, so the
// calls past the budget wait for room, unread (here they never send one),
// and are refused once kRoomWait has passed; what is being received is
// counted in the budget.
TEST_F(GrpcByteBudgetTest, MessagesBeingReceivedAreBoundedAndTheRestRefusedUnread) {
  constexpr int kCalls = 8;
  constexpr int64_t kMaxMessage = 6 << 20;  // the fixture's max_message_bytes
  struct OpenCall {
    grpc::ClientContext context;
    std::unique_ptr<grpc::GenericClientAsyncReaderWriter> stream;
    grpc::Status status;
    bool ended = false;
  };
  grpc::GenericStub stub(channel_);
  grpc::CompletionQueue cq;
  std::vector<std::unique_ptr<OpenCall>> calls;
  // Tags: 2i+1 the start of call i, 2i+2 its end.
  auto tag = [](int i, bool end) { return reinterpret_cast<void*>(uintptr_t(2 * i + 1 + end)); };
  for (int i = 0; i < kCalls; ++i) {
    auto call = std::make_unique<OpenCall>();
    call->stream =
        stub.PrepareCall(&call->context, "/inference.GRPCInferenceService/ModelInfer", &cq);
    call->stream->StartCall(tag(i, false));
    call->stream->Finish(&call->status, tag(i, true));
    calls.push_back(std::move(call));
  }
  auto drain_until = [&](std::chrono::system_clock::time_point deadline) {
    void* got = nullptr;
    bool ok = false;
    while (cq.AsyncNext(&got, &ok, deadline) == grpc::CompletionQueue::GOT_EVENT) {
      const auto n = reinterpret_cast<uintptr_t>(got);
      if (n % 2 == 0) calls[n / 2 - 1]->ended = true;
    }
  };
  // No call sends its message: whatever ends now was refused unread.
  drain_until(std::chrono::system_clock::now() + grpc_async::kRoomWait + std::chrono::seconds(1));
  int refused = 0;
  for (const auto& call : calls) {
    if (!call->ended) continue;
    ++refused;
    EXPECT_EQ(call->status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
        << call->status.error_message();
    EXPECT_NE(call->status.error_message().find("max_inflight_bytes"), std::string::npos);
  }
  const int waiting = static_cast<int>(budget_.max_bytes() / kMaxMessage);  // 2
  EXPECT_EQ(refused, kCalls - waiting) << "calls past the budget waited for their messages";
  EXPECT_EQ(budget_.held(), waiting * kMaxMessage) << "messages being received are not counted";
  EXPECT_LE(budget_.peak(), budget_.max_bytes());
  EXPECT_EQ(budget_.refused(), kCalls - waiting) << "each call's refusal is counted once";
  // The calls that wait end, and give their room back.
  for (const auto& call : calls) call->context.TryCancel();
  drain_until(std::chrono::system_clock::now() + std::chrono::seconds(5));
  for (const auto& call : calls) EXPECT_TRUE(call->ended);
  cq.Shutdown();
  drain_until(std::chrono::system_clock::now() + std::chrono::seconds(1));
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (budget_.held() != 0 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(budget_.held(), 0);
}

}  // namespace
}  // namespace somm
