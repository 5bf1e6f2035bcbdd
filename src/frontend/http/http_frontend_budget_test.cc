// The REST frontend under memory and time pressure (security review):
// bodies past the byte budget get 429 with Retry-After as soon as their head
// is parsed, their bytes unread, while small ones go on; and slow control
// calls (registrations) run on a lane of their own, so metadata keeps
// answering in milliseconds while they are held, and the lane's queue is
// bounded.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "frontend/http/http_frontend.h"
#include "serving/byte_budget.h"
#include "api/testing/holding_inference_server.h"
#include "transport/http/testing/raw_head.h"

namespace somm {
namespace {

constexpr int64_t kMiB = 1 << 20;
constexpr char kSmall[] =
    R"({"inputs":[{"name":"IN0","datatype":"FP32","shape":[1,4],"data":[1,2,3,4]}]})";

// What a request of `rows` x 4 FP32 values looks like with the binary
// extension: a JSON header, then the tensor's bytes (16 a row).
struct BinaryQuery {
  std::string body;
  size_t header_length = 0;
};
BinaryQuery Binary(int64_t rows) {
  BinaryQuery q;
  q.body = R"({"inputs":[{"name":"IN0","datatype":"FP32","shape":[)" + std::to_string(rows) +
           R"(,4],"parameters":{"binary_data_size":)" + std::to_string(rows * 16) + "}}]}";
  q.header_length = q.body.size();
  q.body.append(static_cast<size_t>(rows) * 16, '\0');
  return q;
}

using testing::SendHead;

class HttpByteBudgetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    HttpFrontendOptions options;
    options.address = "127.0.0.1";
    options.port = 0;
    options.byte_budget = &budget_;
    auto frontend = HttpFrontend::Start(server_, options);
    ASSERT_TRUE(frontend.ok()) << frontend.status().ToString();
    frontend_ = std::move(frontend).value();
  }
  void TearDown() override {
    server_.Release();
    for (std::thread& t : clients_) t.join();
    frontend_.reset();
  }
  // Posts on a connection of its own, in a thread; the status lands in *status.
  void PostAsync(std::string body, size_t header_length, int* status) {
    clients_.emplace_back([this, body = std::move(body), header_length, status] {
      httplib::Client c("127.0.0.1", frontend_->port());
      c.set_read_timeout(20, 0);
      httplib::Headers headers;
      if (header_length > 0) {
        headers.emplace("Inference-Header-Content-Length", std::to_string(header_length));
      }
      auto res = c.Post("/v2/models/echo/infer", headers, body,
                        header_length > 0 ? "application/octet-stream" : "application/json");
      *status = res ? res->status : -1;
    });
  }
  int64_t HeldOnceSettled() {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (budget_.held() != 0 && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return budget_.held();
  }

  testing::HoldingInferenceServer server_;  // declared first: outlives the frontend
  ByteBudget budget_{ByteBudget::Options{10 * kMiB, 1, nullptr}};
  std::unique_ptr<HttpFrontend> frontend_;
  std::vector<std::thread> clients_;
};

TEST_F(HttpByteBudgetTest, BodiesPastTheBudgetGet429BeforeTheyAreReadWhileSmallOnesPass) {
  // 4 MiB of tensor: its body and its decoded tensor hold about 8 MiB.
  const BinaryQuery large = Binary(4 * kMiB / 16);
  int first = 0;
  PostAsync(large.body, large.header_length, &first);
  ASSERT_TRUE(server_.WaitHeld(1));
  EXPECT_GE(budget_.held(), 8 * kMiB);

  // The next large body is refused from its head: it declares 4 MiB and
  // sends none, and the 429 comes at once.
  const auto start = std::chrono::steady_clock::now();
  const std::string refused =
      SendHead(frontend_->port(),
               "POST /v2/models/echo/infer HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: " +
                   std::to_string(large.body.size()) + "\r\n\r\n",
               5000);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(refused.rfind("HTTP/1.1 429", 0), 0u) << refused;
  EXPECT_NE(refused.find("Retry-After: 1"), std::string::npos) << refused;
  EXPECT_NE(refused.find("max_inflight_bytes"), std::string::npos) << refused;
  EXPECT_LT(ms, 1000) << "answered only after waiting for the body";
  EXPECT_EQ(budget_.refused(), 1);

  // A small query and metadata still pass.
  int small = 0;
  PostAsync(kSmall, 0, &small);
  ASSERT_TRUE(server_.WaitHeld(2)) << "a small query still fits";
  httplib::Client c("127.0.0.1", frontend_->port());
  auto metadata = c.Get("/v2/models/echo");
  ASSERT_TRUE(metadata);
  EXPECT_EQ(metadata->status, 200);
  auto live = c.Get("/v2/health/live");
  ASSERT_TRUE(live);
  EXPECT_EQ(live->status, 200);

  server_.Release();
  for (std::thread& t : clients_) t.join();
  clients_.clear();
  EXPECT_EQ(first, 200);
  EXPECT_EQ(small, 200);
  EXPECT_EQ(HeldOnceSettled(), 0) << "every byte comes back with the answers";
}

TEST_F(HttpByteBudgetTest, DecodedTensorsPastTheBudgetGet429) {
  // A 0.5 MiB JSON body of 262,144 zeros decodes to 2 MiB of FP64: with 9 MiB
  // held by another body, the body fits and its tensors do not.
  std::string data;
  for (int i = 0; i < 262144; ++i) data += i == 0 ? "0" : ",0";
  const std::string body = R"({"inputs":[{"name":"IN0","datatype":"FP64","shape":[65536,4],"data":[)" +
                           data + "]}]}";
  auto other = budget_.Reserve(10 * kMiB - static_cast<int64_t>(body.size()) - kMiB, "rest");
  ASSERT_TRUE(other.ok());
  httplib::Client c("127.0.0.1", frontend_->port());
  auto res = c.Post("/v2/models/echo/infer", body, "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 429) << res->body;
  EXPECT_EQ(res->get_header_value("Retry-After"), "1");
  EXPECT_NE(res->body.find("this request needs 2.0 MiB"), std::string::npos) << res->body;
  EXPECT_EQ(server_.held(), 0u);
  other->Release();
  EXPECT_EQ(HeldOnceSettled(), 0);
}

// Registrations that take as long as the test wants.
class SlowRegistrations : public testing::FakeInferenceServer {
 public:
  Status RegisterModel(RegistrationRequest request) override {
    std::unique_lock lock(mu_);
    ++entered_;
    cv_.notify_all();
    cv_.wait(lock, [&] { return released_; });
    lock.unlock();
    return FakeInferenceServer::RegisterModel(std::move(request));
  }
  bool WaitEntered(int n) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(10), [&] { return entered_ >= n; });
  }
  void Release() {
    std::lock_guard lock(mu_);
    released_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int entered_ = 0;
  bool released_ = false;
};

std::string Registration() {
  return R"({"task":"classification/digits","inputs":[{"name":"pixels","datatype":"FP32",)"
         R"("shape":[64]}],"outputs":[{"name":"logits","datatype":"FP32","shape":[10]}],)"
         R"("max_batch_size":64,"model":"dG9yY2hzY3JpcHQ=","description":"d"})";
}

TEST(HttpControlLaneTest, MetadataAnswersPromptlyWhileRegistrationsAreHeld) {
  SlowRegistrations server;
  HttpFrontendOptions options;
  options.address = "127.0.0.1";
  options.port = 0;
  options.max_control_queue = 4;
  auto started = HttpFrontend::Start(server, options);
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  std::unique_ptr<HttpFrontend> frontend = std::move(started).value();
  const int port = frontend->port();

  // As many slow registrations as the handler pool has threads, and more.
  constexpr int kRegistrations = 5;
  std::vector<int> statuses(kRegistrations + 1, 0);
  std::vector<std::thread> clients;
  for (int i = 0; i < kRegistrations; ++i) {
    clients.emplace_back([&, i] {
      httplib::Client c("127.0.0.1", port);
      c.set_read_timeout(30, 0);
      auto res = c.Post("/v2/repository/models/m" + std::to_string(i) + "/register",
                        Registration(), "application/json");
      statuses[i] = res ? res->status : -1;
    });
  }
  ASSERT_TRUE(server.WaitEntered(1));
  // The rest are queued behind it (on a loaded machine they may take a
  // moment to arrive).
  std::this_thread::sleep_for(std::chrono::milliseconds(500));

  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(2, 0);  // no assertion below may stop the test before Release
  for (const char* path : {"/v2/models/echo", "/v2", "/v2/repository/index"}) {
    const auto start = std::chrono::steady_clock::now();
    auto res = std::string(path) == "/v2/repository/index" ? c.Post(path, "{}", "application/json")
                                                          : c.Get(path);
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
            .count();
    EXPECT_TRUE(res && res->status == 200) << path << ": no answer in 2 s, or not 200";
    EXPECT_LT(ms, 1000) << path << " waited behind the registrations";
  }

  // One runs and four wait: the lane is full, and the next is told so.
  auto busy = c.Post("/v2/repository/models/late/register", Registration(), "application/json");
  EXPECT_TRUE(busy && busy->status == 503) << (busy ? busy->body : "no answer in 2 s");
  if (busy) {
    EXPECT_EQ(busy->get_header_value("Retry-After"), "5");
    EXPECT_NE(busy->body.find("4 registrations and repository changes are waiting"),
              std::string::npos)
        << busy->body;
  }

  server.Release();
  for (std::thread& t : clients) t.join();
  for (int i = 0; i < kRegistrations; ++i) EXPECT_EQ(statuses[i], 202) << i;
  frontend.reset();
}

}  // namespace
}  // namespace somm
