// Overload shedding on REST (issue #16): with an InflightLimit, an inference
// request that finds the limit reached gets 429, Retry-After and the JSON
// error before its body is decoded; the refusal is counted; other endpoints
// are never shed; the slot comes back however the request ends.
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "frontend/http/http_frontend.h"
#include "frontend/http/oip_json.h"
#include "serving/inflight_limit.h"
#include "api/testing/holding_inference_server.h"

namespace somm {
namespace {

constexpr char kInfer[] = "/v2/models/echo/infer";
constexpr char kBody[] =
    R"({"inputs":[{"name":"IN0","datatype":"FP32","shape":[1,4],"data":[1,2,3,4]}]})";

class ShedCounter : public NullServingMetrics {
 public:
  void RecordShed(const std::string& protocol, const std::string& reason) override {
    std::lock_guard lock(mu_);
    sheds_.push_back(protocol + "/" + reason);
  }
  std::vector<std::string> sheds() {
    std::lock_guard lock(mu_);
    return sheds_;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> sheds_;
};

class HttpOverloadTest : public ::testing::Test {
 protected:
  void Start(int64_t max_inflight, size_t inline_body_bytes = 64 << 10) {
    limit_ = std::make_unique<InflightLimit>(InflightLimit::Options{max_inflight, 1, &metrics_});
    HttpFrontendOptions options;
    options.address = "127.0.0.1";
    options.port = 0;
    options.inflight_limit = limit_.get();
    options.inline_body_bytes = inline_body_bytes;
    auto frontend = HttpFrontend::Start(server_, options);
    ASSERT_TRUE(frontend.ok()) << frontend.status().ToString();
    frontend_ = std::move(frontend).value();
  }
  void TearDown() override {
    server_.Release();
    if (holder_.joinable()) holder_.join();
    frontend_.reset();
  }

  std::unique_ptr<httplib::Client> Client() {
    auto client = std::make_unique<httplib::Client>("127.0.0.1", frontend_->port());
    client->set_keep_alive(true);
    return client;
  }
  // Sends one query on a connection of its own and leaves it in flight.
  void HoldOne(const std::string& body = kBody) {
    holder_ = std::thread([this, body] {
      auto res = Client()->Post(kInfer, body, "application/json");
      held_status_ = res ? res->status : -1;
    });
    ASSERT_TRUE(server_.WaitHeld(1));
  }
  int ReleaseHeld() {
    server_.Release();
    holder_.join();
    return held_status_;
  }

  testing::HoldingInferenceServer server_;
  ShedCounter metrics_;
  std::unique_ptr<InflightLimit> limit_;
  std::unique_ptr<HttpFrontend> frontend_;
  std::thread holder_;
  int held_status_ = 0;
};

TEST_F(HttpOverloadTest, InferOverTheInflightLimitGets429BeforeItsBodyIsDecoded) {
  Start(/*max_inflight=*/1);
  HoldOne();
  auto client = Client();
  // Not JSON at all: a decoded body would get 400, a shed one gets 429.
  auto res = client->Post(kInfer, "this is not json", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 429);
  EXPECT_EQ(res->get_header_value("Content-Type"), "application/json");
  EXPECT_EQ(res->get_header_value("Retry-After"), "1");
  EXPECT_EQ(oip::DecodeError(res->body),
            "server overloaded: 1 inference requests in flight, its limit (max_inflight); "
            "retry after 1 s");
  // The task form is an inference too.
  res = client->Post("/v2/tasks/test/echo/infer", kBody, "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 429);
  EXPECT_EQ(server_.held(), 1u);  // neither reached the server
  EXPECT_EQ(limit_->shed(), 2);
  EXPECT_EQ(metrics_.sheds(), (std::vector<std::string>{"rest/inflight", "rest/inflight"}));

  // Recovery at once: the held answer frees the slot for the next query.
  EXPECT_EQ(ReleaseHeld(), 200);
  EXPECT_EQ(limit_->inflight(), 0);
  std::thread answer([&] {
    EXPECT_TRUE(server_.WaitHeld(1));
    server_.Release();
  });
  res = client->Post(kInfer, kBody, "application/json");
  answer.join();
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200) << res->body;
  EXPECT_EQ(limit_->inflight(), 0);
}

TEST_F(HttpOverloadTest, HealthMetadataAndReadinessAreNeverShed) {
  Start(/*max_inflight=*/1);
  HoldOne();
  auto client = Client();
  for (const char* path :
       {"/v2/health/live", "/v2/health/ready", "/v2", "/v2/models/echo", "/v2/models/echo/ready"}) {
    auto res = client->Get(path);
    ASSERT_TRUE(res) << path;
    EXPECT_EQ(res->status, 200) << path << ": " << res->body;
  }
  auto res = client->Post("/v2/repository/index", "{}", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200) << res->body;
  EXPECT_EQ(limit_->shed(), 0);
  EXPECT_EQ(ReleaseHeld(), 200);
}

TEST_F(HttpOverloadTest, ARequestThatFailsBeforeInferGivesItsSlotBack) {
  Start(/*max_inflight=*/1);
  auto client = Client();
  for (int i = 0; i < 3; ++i) {
    auto res = client->Post(kInfer, "this is not json", "application/json");
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 400) << "attempt " << i << ": " << res->body;
  }
  EXPECT_EQ(limit_->inflight(), 0);
  EXPECT_EQ(limit_->shed(), 0);
}

TEST_F(HttpOverloadTest, LargeBodiesDecodedOnTheHandlerPoolAreShedToo) {
  // Every body is "large": admitted queries go through the handler pool.
  Start(/*max_inflight=*/1, /*inline_body_bytes=*/8);
  HoldOne();
  auto res = Client()->Post(kInfer, kBody, "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 429);
  EXPECT_EQ(ReleaseHeld(), 200);
  EXPECT_EQ(limit_->inflight(), 0);
}

TEST_F(HttpOverloadTest, NoBoundWithoutALimit) {
  Start(/*max_inflight=*/0);
  HoldOne();
  std::thread second([&] {
    auto res = Client()->Post(kInfer, kBody, "application/json");
    EXPECT_TRUE(res && res->status == 200);
  });
  EXPECT_TRUE(server_.WaitHeld(2));
  EXPECT_EQ(limit_->inflight(), 2);
  EXPECT_EQ(ReleaseHeld(), 200);
  second.join();
  EXPECT_EQ(limit_->shed(), 0);
}

}  // namespace
}  // namespace somm
