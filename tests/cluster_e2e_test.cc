// somm as a cluster, end to end: a real redis-server, a controller, two
// workers and a router, each a process of the built binary, on loopback.
// Queries go through the router exactly as to `somm serve`; answers must
// equal libtorch's; a worker killed with SIGKILL under load loses no query.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "cluster_process.h"
#include "e2e_fixture.h"

namespace somm::testing {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

std::string DigitBody(const std::vector<float>& pixels) {
  json body;
  body["inputs"] = json::array({{{"name", "pixels"},
                                 {"datatype", "FP32"},
                                 {"shape", {1, 64}},
                                 {"data", pixels}}});
  return body.dump();
}

class ClusterE2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    demo_ = new std::string(DemoRepository());
    digits_ = new HeldOutDigits(LoadHeldOutDigits(*demo_));
    repo_ = new std::string(MakeTestRepository(*demo_, "cluster"));
    cluster_ = new ClusterProcesses(SommBinary(), *repo_);
  }
  static void TearDownTestSuite() {
    delete cluster_;
    if (repo_) std::filesystem::remove_all(*repo_);
    delete repo_;
    delete digits_;
    delete demo_;
  }
  void SetUp() override {
    ASSERT_GE(digits_->pixels.size(), 100u) << "no held-out digits (run scripts/setup first)";
    ASSERT_TRUE(cluster_->ok()) << cluster_->error() << "\n" << cluster_->Logs();
  }
  static inline std::string* demo_ = nullptr;
  static inline std::string* repo_ = nullptr;
  static inline HeldOutDigits* digits_ = nullptr;
  static inline ClusterProcesses* cluster_ = nullptr;
};

TEST_F(ClusterE2eTest, RouterInFrontOfTwoWorkersAnswersAsLibtorchDoes) {
  httplib::Client c("127.0.0.1", cluster_->http_port());
  c.set_read_timeout(60, 0);
  for (const std::string& model : kDigitsModels) {
    const std::string file = *repo_ + "/" + model + "/1/model.pt";
    for (size_t i = 0; i < 20; ++i) {
      const auto expected = TorchReference(file, {digits_->pixels[i]});
      auto r = c.Post("/v2/models/" + model + "/infer", DigitBody(digits_->pixels[i]),
                      "application/json");
      ASSERT_TRUE(r) << model;
      ASSERT_EQ(r->status, 200) << model << ": " << r->body << "\n" << cluster_->Logs();
      const json j = json::parse(r->body);
      const auto got = j["outputs"][0]["data"].get<std::vector<float>>();
      ASSERT_EQ(got.size(), expected.size());
      for (size_t k = 0; k < got.size(); ++k) EXPECT_NEAR(got[k], expected[k], 1e-5) << model;
      EXPECT_FALSE(j["parameters"]["somm_worker"].get<std::string>().empty());
    }
  }
}

TEST_F(ClusterE2eTest, BadInputGetsTheSameClearErrorThroughTheRouter) {
  httplib::Client c("127.0.0.1", cluster_->http_port());
  json bad = json::parse(DigitBody(digits_->pixels[0]));
  bad["inputs"][0]["name"] = "nope";
  auto r = c.Post("/v2/models/digits-mlp/infer", bad.dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400) << r->body;
  EXPECT_NE(r->body.find("pixels"), std::string::npos) << r->body;
  auto missing = c.Post("/v2/models/no-such-model/infer", DigitBody(digits_->pixels[0]),
                        "application/json");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404) << missing->body;
}

// Last: it kills a worker.
TEST_F(ClusterE2eTest, ZKillingAWorkerUnderLoadLosesNoQuery) {
  // Open-loop load on two models from four clients; one worker is killed
  // (SIGKILL) a second in.
  const std::vector<std::string> models = {"digits-mlp", "digits-cnn"};
  std::atomic<bool> stop{false};
  std::mutex mu;
  std::map<int, int> by_status;  // HTTP status (0 = no answer) -> count
  int sent = 0;
  std::vector<std::thread> clients;
  for (int t = 0; t < 4; ++t) {
    clients.emplace_back([&, t] {
      httplib::Client c("127.0.0.1", cluster_->http_port());
      c.set_read_timeout(30, 0);
      size_t i = static_cast<size_t>(t);
      while (!stop.load()) {
        const std::string& model = models[i % models.size()];
        auto r = c.Post("/v2/models/" + model + "/infer",
                        DigitBody(digits_->pixels[i % digits_->pixels.size()]), "application/json");
        {
          std::lock_guard lock(mu);
          ++sent;
          ++by_status[r ? r->status : 0];
        }
        ++i;
        std::this_thread::sleep_for(10ms);  // about 100 q/s per client
      }
    });
  }
  std::this_thread::sleep_for(1s);
  // The worker that holds digits-mlp's group dies.
  const auto& victim = cluster_->workers()[0];
  ASSERT_EQ(kill(victim.pid, SIGKILL), 0);
  const auto killed_at = std::chrono::steady_clock::now();
  double left_after_s = -1;
  while (std::chrono::steady_clock::now() - killed_at < 6s) {
    const auto ids = cluster_->RegisteredWorkers();
    if (left_after_s < 0 && std::find(ids.begin(), ids.end(), victim.id) == ids.end()) {
      left_after_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed_at).count();
    }
    std::this_thread::sleep_for(50ms);
  }
  stop = true;
  for (auto& t : clients) t.join();

  int ok = by_status[200];
  std::string summary = "sent " + std::to_string(sent) + ":";
  for (const auto& [status, n] : by_status) summary += " " + std::to_string(status) + "=" + std::to_string(n);
  std::printf("[cluster kill -9] %s; the dead worker left routing after %.2f s (lease 1.5 s)\n",
              summary.c_str(), left_after_s);
  EXPECT_EQ(by_status[0], 0) << "unanswered queries: " << summary;
  EXPECT_GE(ok, sent * 99 / 100) << summary << "\n" << cluster_->Logs();
  ASSERT_GE(left_after_s, 0) << "the dead worker never left routing";
  EXPECT_LE(left_after_s, 1.5 + 1.0);
}

}  // namespace
}  // namespace somm::testing
