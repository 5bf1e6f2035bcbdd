// End-to-end, offline batch jobs (docs/lifecycle.md) against a real somm:
// a job over 300 held-out digits answers every item in a file of its own
// while online queries keep being answered; a job over a folder writes an
// item's error beside the others' answers; a job killed
// with SIGKILL halfway resumes when somm starts again, with no item lost or
// written twice. Submitted and watched with the CLI (somm batch) and REST.
// Runs embedded and, as batch_e2e_cluster_test, through a router in front
// of two workers (the job runs on the router that took it); the kill test
// is embedded only.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "e2e_fixture.h"

namespace somm::testing {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

class BatchE2ETest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    demo_ = new std::string(DemoRepository());
    digits_ = new HeldOutDigits(LoadHeldOutDigits(*demo_));
    repo_ = new std::string(MakeOneModelRepository(*demo_, "digits-mlp", "batch"));
    server_ = new std::unique_ptr<ServerProcess>(new ServerProcess(SommBinary(), *repo_));
  }
  static void TearDownTestSuite() {
    delete server_;
    delete digits_;
    delete demo_;
    if (repo_) fs::remove_all(*repo_);
    delete repo_;
  }
  void SetUp() override {
    ASSERT_GE(digits_->pixels.size(), 300u) << "no held-out digits (run scripts/setup first)";
    ASSERT_TRUE(Server().ok()) << "server did not start; log: " << Server().log();
    // Jobs read and write in the caller's batch folder: with no keys,
    // <repo>/.somm/batch-files/default/ (the router's repository mount too).
    work_ = fs::path(*repo_) / ".somm" / "batch-files" / "default" /
            ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(work_);
    fs::create_directories(work_);
  }
  void TearDown() override { fs::remove_all(work_); }

  static ServerProcess& Server() { return **server_; }
  static std::string Url() { return "127.0.0.1:" + std::to_string(Server().http_port()); }
  static std::string Body(size_t i, const std::string& input = "pixels") {
    json body;
    body["id"] = "d-" + std::to_string(i);
    body["inputs"] = json::array({{{"name", input},
                                   {"datatype", "FP32"},
                                   {"shape", {1, 64}},
                                   {"data", digits_->pixels[i % digits_->pixels.size()]}}});
    return body.dump();
  }
  // A JSONL input of the first `n` held-out digits.
  std::string Jsonl(size_t n) const {
    const fs::path p = work_ / "digits.jsonl";
    std::ofstream out(p);
    for (size_t i = 0; i < n; ++i) out << Body(i) << "\n";
    return p.string();
  }
  static std::pair<int, std::string> Run(const std::string& command) { return RunCommand(command); }
  static std::string LastLine(std::string out) {
    while (!out.empty() && out.back() == '\n') out.pop_back();
    return out.substr(out.rfind('\n') + 1);
  }
  static json Job(const std::string& id) {
    httplib::Client c("127.0.0.1", Server().http_port());
    c.set_read_timeout(30, 0);
    auto r = c.Get("/v2/somm/batch/" + id);
    return r && r->status == 200 ? json::parse(r->body) : json::object();
  }
  static json WaitFor(const std::string& id, int limit_s) {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(limit_s);
    json j;
    do {
      j = Job(id);
      const std::string state = j.value("state", "");
      if (state == "DONE" || state == "FAILED" || state == "CANCELLED") return j;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    } while (std::chrono::steady_clock::now() < give_up);
    return j;
  }
  // The top class of an answer file's logits.
  static int TopClass(const fs::path& file) {
    std::ifstream in(file);
    const json j = json::parse(in, nullptr, false);
    if (!j.is_object() || !j.contains("outputs")) return -1;
    const auto& data = j["outputs"][0]["data"];
    int best = 0;
    for (int k = 1; k < static_cast<int>(data.size()); ++k) {
      if (data[k].get<double>() > data[best].get<double>()) best = k;
    }
    return best;
  }

  static inline std::string* demo_ = nullptr;
  static inline std::string* repo_ = nullptr;
  static inline HeldOutDigits* digits_ = nullptr;
  static inline std::unique_ptr<ServerProcess>* server_ = nullptr;
  fs::path work_;
};

TEST_F(BatchE2ETest, AJobAnswersEveryItemInAFileOfItsOwnBesideOnlineQueries) {
  const std::string out = (work_ / "out").string();
  auto [rc, text] = Run(SommBinary() + " batch submit --model digits-mlp --input " + Jsonl(300) +
                        " --output " + out + " --concurrency 2 --url " + Url());
  ASSERT_EQ(rc, 0) << text;
  const std::string id = LastLine(text);
  ASSERT_EQ(id.rfind("job-", 0), 0u) << text;
  // Online queries meanwhile: every one answered.
  httplib::Client c("127.0.0.1", Server().http_port());
  c.set_read_timeout(30, 0);
  for (size_t i = 0; i < 50; ++i) {
    json q = json::parse(Body(i));
    q.erase("id");
    auto r = c.Post("/v2/models/digits-mlp/infer", q.dump(), "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << r->body;
  }
  const json done = WaitFor(id, 300);
  ASSERT_EQ(done.value("state", ""), "DONE") << done.dump();
  EXPECT_EQ(done["succeeded"], 300);
  EXPECT_EQ(done["failed"], 0);
  int right = 0;
  for (size_t i = 0; i < 300; ++i) {
    const fs::path answer = fs::path(out) / ("d-" + std::to_string(i) + ".json");
    ASSERT_TRUE(fs::exists(answer)) << answer;
    right += TopClass(answer) == digits_->labels[i];
  }
  EXPECT_GE(right, 280) << "digits-mlp's answers, as a query's";
  std::tie(rc, text) = Run(SommBinary() + " batch status " + id + " --url " + Url());
  EXPECT_EQ(rc, 0) << text;
  EXPECT_NE(text.find("DONE"), std::string::npos) << text;
  EXPECT_NE(text.find("300/300"), std::string::npos) << text;
  std::tie(rc, text) = Run(SommBinary() + " batch status --url " + Url());
  EXPECT_NE(text.find(id), std::string::npos) << text;
}

TEST_F(BatchE2ETest, AFolderJobWritesAnItemsErrorBesideTheOthersAnswers) {
  fs::create_directories(work_ / "in");
  for (size_t i = 0; i < 4; ++i) std::ofstream(work_ / "in" / ("ok-" + std::to_string(i) + ".json")) << Body(i);
  std::ofstream(work_ / "in" / "wrong-input.json") << Body(9, "image");
  httplib::Client c("127.0.0.1", Server().http_port());
  c.set_read_timeout(60, 0);
  json submit = {{"model", "digits-mlp"},
                 {"version", "1"},
                 {"input", (work_ / "in").string()},
                 {"output", (work_ / "out").string()}};
  auto r = c.Post("/v2/somm/batch", submit.dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json done = WaitFor(json::parse(r->body)["id"], 300);
  ASSERT_EQ(done.value("state", ""), "DONE") << done.dump();
  EXPECT_EQ(done["succeeded"], 4);
  EXPECT_EQ(done["failed"], 1);
  std::ifstream error(work_ / "out" / "wrong-input.error.json");
  const json e = json::parse(error, nullptr, false);
  EXPECT_NE(e.value("error", "").find("pixels"), std::string::npos) << e.dump();
  EXPECT_EQ(e.value("code", ""), "INVALID_ARGUMENT");
  // Bad submissions name the problem.
  r = c.Post("/v2/somm/batch", R"({"model": "digits-mlp", "input": "no-such-input", "output": "out"})",
             "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_NE(r->body.find("does not exist"), std::string::npos) << r->body;
  // Nothing outside the caller's batch folder: not a server file, not the
  // repository (the review read /etc/passwd and wrote into a model's folder).
  for (const json& outside :
       {json{{"model", "digits-mlp"}, {"input", "/etc/passwd"}, {"output", "out"}},
        json{{"model", "digits-mlp"}, {"input", "../../keys"}, {"output", "out"}},
        json{{"model", "digits-mlp"}, {"input", (work_ / "in").string()},
             {"output", (fs::path(*repo_) / "digits-mlp").string()}},
        json{{"model", "digits-mlp"}, {"input", (work_ / "in").string()}, {"output", "../../../digits-mlp/9"}}}) {
    r = c.Post("/v2/somm/batch", outside.dump(), "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 403) << outside.dump() << ": " << r->body;
    EXPECT_NE(r->body.find("outside this key's batch folder"), std::string::npos) << r->body;
  }
  EXPECT_FALSE(fs::exists(fs::path(*repo_) / "digits-mlp" / "9"));
  r = c.Post("/v2/somm/batch", json{{"model", "no-such-model"}, {"input", (work_ / "in").string()},
                                    {"output", (work_ / "out2").string()}}.dump(),
             "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404) << r->body;
  r = c.Get("/v2/somm/batch/job-nothing");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
}

TEST_F(BatchE2ETest, AJobKilledHalfwayResumesWithNoItemLostOrWrittenTwice) {
  if (IsClusterTopology()) GTEST_SKIP() << "kills and restarts somm serve";
  const std::string out = (work_ / "out").string();
  auto [rc, text] = Run(SommBinary() + " batch submit --model digits-mlp --input " + Jsonl(3000) +
                        " --output " + out + " --concurrency 1 --url " + Url());
  ASSERT_EQ(rc, 0) << text;
  const std::string id = LastLine(text);
  // Until a few hundred answers are written, then SIGKILL.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (Job(id).value("done", 0) < 300 && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(kill(Server().pid(), SIGKILL), 0);
  server_->reset(new ServerProcess(SommBinary(), *repo_));
  ASSERT_TRUE(Server().ok()) << Server().log();
  const json done = WaitFor(id, 300);
  ASSERT_EQ(done.value("state", ""), "DONE") << done.dump();
  EXPECT_GE(done["resumed_from"].get<int>(), 300);
  EXPECT_LT(done["resumed_from"].get<int>(), 3000);
  EXPECT_EQ(done["succeeded"], 3000);
  EXPECT_EQ(done["failed"], 0);
  size_t answers = 0;
  for (const auto& e : fs::directory_iterator(out)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(".tmp-", 0) == 0) continue;  // a write the kill cut short: never linked
    ASSERT_EQ(name.size() > 5 && name.substr(name.size() - 5) == ".json", true) << name;
    ASSERT_EQ(name.find(".error."), std::string::npos) << name;
    ++answers;
  }
  EXPECT_EQ(answers, 3000u) << "one answer per item";
  for (size_t i = 0; i < 3000; i += 97) {
    EXPECT_GE(TopClass(fs::path(out) / ("d-" + std::to_string(i) + ".json")), 0) << i;
  }
}

}  // namespace
}  // namespace somm::testing
