// somm.SommControl/OperatorCall (frontend/grpc/operator_call.h) over
// loopback: a mount's GET and POST answered with its body, the query
// string and the key handed on as REST would, a path no mount answers and a
// wrong method refused, an HTTP error mapped to its gRPC code, and the key
// checked before the message is read.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <memory>
#include <mutex>
#include <string>

#include "api/testing/fake_inference_server.h"
#include "frontend/grpc/grpc_server.h"
#include "frontend/http/rest_mount.h"
#include "proto/somm.grpc.pb.h"
#include "serving/testing/one_key_guard.h"

namespace somm {
namespace {

// What the mount saw of the last call.
struct Seen {
  std::mutex mu;
  std::string method, path, query, body, authorization, job;
  int calls = 0;
};

RestMount RecordingMount(Seen* seen) {
  RestMount mount;
  mount.endpoints = {oip::RestEndpoint::kActions, oip::RestEndpoint::kBatchSubmit,
                     oip::RestEndpoint::kBatchJob};
  mount.handler = [seen](const oip::RestRoute& route, const http::Request& request,
                         const Caller&) {
    std::lock_guard lock(seen->mu);
    ++seen->calls;
    seen->method = request.head.method;
    seen->path = request.head.path;
    seen->query = request.head.query;
    seen->body = request.body;
    const std::string* authorization = request.head.Find("authorization");
    seen->authorization = authorization ? *authorization : "";
    seen->job = route.job;
    if (route.job == "missing") return rest::ErrorResponse(404, "no batch job 'missing'");
    return rest::JsonResponse(route.endpoint == oip::RestEndpoint::kBatchSubmit ? 202 : 200,
                              R"({"answered":")" + request.head.path + R"("})");
  };
  return mount;
}

class OperatorCallTest : public ::testing::Test {
 protected:
  void Start(CallGuard* guard = nullptr) {
    GrpcFrontendOptions options;
    options.address = "127.0.0.1";
    options.port = 0;
    options.guard = guard;
    options.mounts = {RecordingMount(&seen_)};
    auto started = GrpcFrontend::Start(fake_, options);
    ASSERT_TRUE(started.ok()) << started.status().ToString();
    frontend_ = std::move(started).value();
    stub_ = somm::SommControl::NewStub(grpc::CreateChannel(
        "127.0.0.1:" + std::to_string(frontend_->port()), grpc::InsecureChannelCredentials()));
  }
  grpc::Status Call(const std::string& method, const std::string& path, const std::string& body,
                    somm::OperatorCallResponse* response, const std::string& key = "") {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    if (!key.empty()) ctx.AddMetadata("authorization", key);
    somm::OperatorCallRequest request;
    request.set_method(method);
    request.set_path(path);
    request.set_body(body);
    return stub_->OperatorCall(&ctx, request, response);
  }

  testing::FakeInferenceServer fake_;
  Seen seen_;
  std::unique_ptr<GrpcFrontend> frontend_;
  std::unique_ptr<somm::SommControl::Stub> stub_;
};

TEST_F(OperatorCallTest, AMountAnswersGetAndPostWithItsBodyAsRestWould) {
  Start();
  somm::OperatorCallResponse response;
  grpc::Status status = Call("GET", "/v2/somm/actions?limit=20", "", &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.body(), R"({"answered":"/v2/somm/actions"})");
  {
    std::lock_guard lock(seen_.mu);
    EXPECT_EQ(seen_.method, "GET");
    EXPECT_EQ(seen_.query, "limit=20");
  }
  status = Call("POST", "/v2/somm/batch", R"({"model":"echo"})", &response);
  ASSERT_TRUE(status.ok()) << status.error_message();  // 202 is a success
  std::lock_guard lock(seen_.mu);
  EXPECT_EQ(seen_.method, "POST");
  EXPECT_EQ(seen_.body, R"({"model":"echo"})");
}

TEST_F(OperatorCallTest, APathNoMountAnswersAndAWrongMethodAreRefusedUnseen) {
  Start();
  somm::OperatorCallResponse response;
  // Answered by REST, but by no mount: the model's metadata has an RPC.
  grpc::Status status = Call("GET", "/v2/models/echo", "", &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND) << status.error_message();
  status = Call("GET", "/v2/somm/overview", "", &response);  // a view not mounted here
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND) << status.error_message();
  status = Call("DELETE", "/v2/somm/actions", "", &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  status = Call("GET", "/v2/somm/batch/%zz", "", &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  std::lock_guard lock(seen_.mu);
  EXPECT_EQ(seen_.calls, 0);
}

TEST_F(OperatorCallTest, AnHttpErrorComesAsItsCodeWithRestsMessage) {
  Start();
  somm::OperatorCallResponse response;
  // The job's name is percent-encoded as in a URL, and decoded for the mount.
  const grpc::Status status = Call("GET", "/v2/somm/batch/missin%67", "", &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(status.error_message(), "no batch job 'missing'");
  std::lock_guard lock(seen_.mu);
  EXPECT_EQ(seen_.job, "missing");
}

TEST_F(OperatorCallTest, TheKeyIsCheckedFirstAndHandedToTheMount) {
  testing::OneKeyGuard guard;
  Start(&guard);
  somm::OperatorCallResponse response;
  grpc::Status status = Call("GET", "/v2/somm/actions", "", &response, "Bearer wrong");
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << status.error_message();
  EXPECT_EQ(guard.admitted.load(), 0);  // refused from the metadata, unread
  {
    std::lock_guard lock(seen_.mu);
    EXPECT_EQ(seen_.calls, 0);
  }
  status = Call("GET", "/v2/somm/actions", "", &response, "Bearer good");
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(guard.admitted.load(), 1);
  std::lock_guard lock(seen_.mu);
  EXPECT_EQ(seen_.authorization, "Bearer good");  // for a submission's own admission
}

}  // namespace
}  // namespace somm
