// End-to-end, canary rollouts (docs/rollouts.md) against a real somm:
// a good version 2 takes its share of digits-mlp's unversioned queries and
// is promoted step by step; a version that answers wrong is rolled back by
// its accuracy on held-out data; an operator starts, reads and rolls back a
// rollout over REST, gRPC and the CLI; bad requests get 400/404 naming the
// problem. No client query fails in any of it. Runs embedded and, as
// rollout_e2e_cluster_test, through a router in front of two workers
// (tests/server_process.h): the leader controller keeps the rollout and
// every router splits by it.
#include <gtest/gtest.h>
#include <httplib.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "e2e_fixture.h"

namespace somm::testing {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// Short steps, so a test sees a whole rollout in seconds of queries. The
// latency rule is out of these tests' way: a mean over a few queries of a
// fast model on a busy machine (a CI run) differs by more than 1.5x now and
// then, and rolled back the version these tests judge by its accuracy; the
// rule is tested in rollout_policy_test and measured by bench/canary.sh.
constexpr char kQuickBounds[] =
    R"({"min_queries_per_step": 20, "min_queries_to_judge": 10, "min_step_s": 1,)"
    R"( "max_latency_ratio": 1000})";

class RolloutE2ETest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    demo_ = new std::string(DemoRepository());
    digits_ = new HeldOutDigits(LoadHeldOutDigits(*demo_));
    // digits-mlp alone: its variant jobs are the only ones the server runs.
    repo_ = new std::string(MakeOneModelRepository(*demo_, "digits-mlp", "rollout"));
    server_ = new ServerProcess(SommBinary(), *repo_);
  }
  static void TearDownTestSuite() {
    delete server_;
    delete digits_;
    delete demo_;
    if (repo_) fs::remove_all(*repo_);
    delete repo_;
  }
  void SetUp() override {
    ASSERT_GE(digits_->pixels.size(), 100u) << "no held-out digits (run scripts/setup first)";
    ASSERT_TRUE(server_->ok()) << "server did not start; log: " << server_->log();
  }

  static httplib::Client Client() {
    httplib::Client c("127.0.0.1", server_->http_port());
    c.set_read_timeout(180, 0);
    return c;
  }
  // Version N of digits-mlp: the same files as version 1, or (shifted) a
  // classifier one class off, with version 1's held-out data either way.
  static void AddVersion(int n, bool shifted) {
    const fs::path demo_v1 = fs::absolute(fs::path(*demo_) / "digits-mlp" / "1");
    const fs::path dir = fs::path(*repo_) / "digits-mlp" / std::to_string(n);
    if (!shifted) {
      fs::create_directory_symlink(demo_v1, dir);
      return;
    }
    SaveShiftedClassifier((demo_v1 / "model.pt").string(), (dir / "model.pt").string());
    fs::create_directory_symlink(demo_v1 / "validation", dir / "validation");
  }
  static std::pair<int, json> Post(const std::string& body) {
    auto r = Client().Post("/v2/repository/models/digits-mlp/rollout", body, "application/json");
    if (!r) return {-1, json()};
    return {r->status, json::parse(r->body, nullptr, false)};
  }
  static json Get() {
    auto r = Client().Get("/v2/repository/models/digits-mlp/rollout");
    if (!r || r->status != 200) return json::object();
    return json::parse(r->body, nullptr, false);
  }
  // One unversioned query: the version that answered ("" when it failed,
  // which every test counts against it).
  static std::string Ask(size_t digit, std::string* rollout_note = nullptr) {
    json body;
    body["inputs"] = json::array({{{"name", "pixels"},
                                   {"datatype", "FP32"},
                                   {"shape", {1, 64}},
                                   {"data", digits_->pixels[digit % digits_->pixels.size()]}}});
    auto r = Client().Post("/v2/models/digits-mlp/infer", body.dump(), "application/json");
    if (!r || r->status != 200) {
      ADD_FAILURE() << "a client query failed: " << (r ? r->body : "no answer");
      return "";
    }
    const json answer = json::parse(r->body);
    if (rollout_note != nullptr) {
      *rollout_note = answer["parameters"].value("somm_rollout", std::string());
    }
    return answer["model_version"].get<std::string>();
  }
  // Queries until the rollout's state is `state` (or `limit` s pass);
  // answers counted by version.
  static std::map<std::string, int> AskUntil(const std::string& state, int limit_s) {
    std::map<std::string, int> by_version;
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(limit_s);
    size_t digit = 0;
    while (Get().value("state", "") != state && std::chrono::steady_clock::now() < give_up) {
      for (int i = 0; i < 10; ++i) ++by_version[Ask(digit++)];
    }
    return by_version;
  }
  // Every unversioned query goes to `version` now. A cluster's router hears
  // of the leader's step through the catalog's notice: a moment later.
  // Until then it still draws between the versions, so one answer from
  // `version` does not show it has heard: the wait ends after 10 in a row.
  static void ExpectOnly(const std::string& version) {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    int in_a_row = 0;
    while (in_a_row < 10 && std::chrono::steady_clock::now() < give_up) {
      if (Ask(0) == version) {
        ++in_a_row;
      } else {
        in_a_row = 0;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
    for (int i = 0; i < 20; ++i) EXPECT_EQ(Ask(i), version);
  }
  static std::string Actions() {
    auto r = Client().Get("/v2/somm/actions?limit=200");
    return r ? r->body : "";
  }
  static double Metric(const std::string& sample) {
    httplib::Client m("127.0.0.1", server_->metrics_port());
    auto r = m.Get("/metrics");
    return r ? MetricValue(r->body, sample) : -1;
  }
  static std::pair<int, std::string> Run(const std::string& command) { return RunCommand(command); }

  static inline std::string* demo_ = nullptr;
  static inline std::string* repo_ = nullptr;
  static inline HeldOutDigits* digits_ = nullptr;
  static inline ServerProcess* server_ = nullptr;
};

TEST_F(RolloutE2ETest, AGoodCanaryTakesItsShareAndIsPromotedStepByStep) {
  ASSERT_EQ(Ask(0), "1");
  AddVersion(2, /*shifted=*/false);
  auto [status, view] = Post(std::string(R"({"version": "2", "percent": 50, "steps": [50, 100],)") +
                             R"("bounds": )" + kQuickBounds + "}");
  ASSERT_EQ(status, 200) << view.dump();
  EXPECT_EQ(view["state"], "canary");
  EXPECT_EQ(view["stable_version"], "1");
  EXPECT_EQ(view["percent"], 50);
  std::string note;
  Ask(1, &note);
  EXPECT_NE(note.find("canary v2"), std::string::npos) << note;

  const auto by_version = AskUntil("promoted", 240);
  const json done = Get();
  ASSERT_EQ(done.value("state", ""), "promoted") << done.dump();
  EXPECT_EQ(by_version.count(""), 0u) << "no client query fails";
  EXPECT_GT(by_version.count("1") ? by_version.at("1") : 0, 0);
  EXPECT_GT(by_version.count("2") ? by_version.at("2") : 0, 0) << "the canary took its share";
  EXPECT_NE(done["reason"].get<std::string>().find("promoted"), std::string::npos) << done.dump();
  ExpectOnly("2");
  EXPECT_NE(Actions().find("\"canary_promoted\""), std::string::npos);
  if (!IsClusterTopology()) {
    EXPECT_EQ(Metric(R"(somm_canary_promotions_total{model="digits-mlp"})"), 1);
    EXPECT_EQ(Metric(R"(somm_canary_percent{model="digits-mlp"})"), 100);
  }
}

TEST_F(RolloutE2ETest, ACanaryThatAnswersWrongIsRolledBackByItsHeldOutAccuracy) {
  const std::string stable = Ask(0);
  ASSERT_FALSE(stable.empty());
  AddVersion(3, /*shifted=*/true);
  auto [status, view] =
      Post(std::string(R"({"version": 3, "percent": 10, "bounds": )") + kQuickBounds + "}");
  ASSERT_EQ(status, 200) << view.dump();
  const auto by_version = AskUntil("rolled_back", 240);
  const json done = Get();
  ASSERT_EQ(done.value("state", ""), "rolled_back") << done.dump();
  EXPECT_EQ(by_version.count(""), 0u) << "no client query fails";
  EXPECT_NE(done["reason"].get<std::string>().find("held-out top-1"), std::string::npos)
      << done.dump();
  ASSERT_TRUE(done["window"]["canary"]["accuracy"].is_number()) << done.dump();
  EXPECT_LT(done["window"]["canary"]["accuracy"].get<double>(), 0.5) << done.dump();
  ExpectOnly(stable);
  EXPECT_NE(Actions().find("\"canary_rolled_back\""), std::string::npos);
  if (!IsClusterTopology()) {
    EXPECT_EQ(Metric(R"(somm_canary_rollbacks_total{model="digits-mlp"})"), 1);
    EXPECT_EQ(Metric(R"(somm_canary_percent{model="digits-mlp"})"), 0);
  }
}

TEST_F(RolloutE2ETest, AnOperatorStartsReadsAndRollsBackOverRestGrpcAndTheCli) {
  const std::string stable = Ask(0);
  AddVersion(4, /*shifted=*/false);
  const std::string url = "--url 127.0.0.1:" + std::to_string(server_->http_port());
  const std::string grpc = "-i grpc --url 127.0.0.1:" + std::to_string(server_->grpc_port());
  // A bad --bounds is refused before anything is sent.
  auto [rc, out] = Run(SommBinary() + " rollout digits-mlp --version 4 --bounds '[1]' " + url);
  EXPECT_NE(rc, 0) << out;
  EXPECT_NE(out.find("--bounds must be a JSON object"), std::string::npos) << out;
  // The latency rule out of the way, as kQuickBounds says why.
  std::tie(rc, out) = Run(SommBinary() + " rollout digits-mlp --version 4 --percent 30 --manual " +
                          grpc + " --reason 'held by hand' --bounds '{\"max_latency_ratio\": 1000}'");
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("split canary of version 4"), std::string::npos) << out;
  EXPECT_NE(out.find("30%"), std::string::npos) << out;
  std::tie(rc, out) = Run(SommBinary() + " rollout digits-mlp " + url);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("held by hand"), std::string::npos) << out;
  std::tie(rc, out) = Run(SommBinary() + " rollout digits-mlp --json " + grpc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_EQ(json::parse(out).value("canary_version", ""), "4");

  // A manual rollout holds its share however many queries pass.
  std::map<std::string, int> by_version;
  for (int i = 0; i < 60; ++i) ++by_version[Ask(i)];
  EXPECT_EQ(by_version.count(""), 0u);
  EXPECT_EQ(Get().value("percent", -1), 30);

  // Another canary while one runs, then the rollback.
  auto [status, view] = Post(R"({"version": "2"})");
  EXPECT_EQ(status, 400) << view.dump();
  EXPECT_NE(view.value("error", "").find("promote or roll it back first"), std::string::npos);
  std::tie(rc, out) = Run(SommBinary() + " rollout digits-mlp --rollback " + url);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("rolled_back"), std::string::npos) << out;
  ExpectOnly(stable);
  std::tie(status, view) = Post(R"({"action": "promote"})");
  EXPECT_EQ(status, 400) << view.dump();
  EXPECT_NE(view.value("error", "").find("no canary running"), std::string::npos) << view.dump();
}

TEST_F(RolloutE2ETest, BadRequestsNameTheProblem) {
  const std::pair<std::string, std::string> bad[] = {
      {R"({"percent": 10})", "needs 'version'"},
      {R"({"version": "2", "percent": 150})", "'percent'"},
      {R"({"version": "2", "mode": "blue"})", "'mode'"},
      {R"({"version": "2", "steps": [10, 50]})", "'steps'"},
      {R"({"version": "2", "bounds": {"max_latency_ratio": -1}})", "bounds.max_latency_ratio"},
      {R"({"version": "99"})", "no version 99"},
      {"not json", "JSON object"},
  };
  for (const auto& [body, named] : bad) {
    auto [status, answer] = Post(body);
    EXPECT_TRUE(status == 400 || status == 404) << body << " -> " << status;
    EXPECT_NE(answer.value("error", "").find(named), std::string::npos)
        << body << " -> " << answer.dump();
  }
  auto r = Client().Get("/v2/repository/models/no-such-model/rollout");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404) << r->body;
  r = Client().Post("/v2/repository/models/no-such-model/rollout", R"({"version": "2"})",
                    "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404) << r->body;
  r = Client().Delete("/v2/repository/models/digits-mlp/rollout");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 405);
  EXPECT_EQ(r->get_header_value("Allow"), "GET, POST");
  EXPECT_FALSE(Ask(0).empty()) << "the server still answers";
}

}  // namespace
}  // namespace somm::testing
