// End-to-end, `--model-control-mode poll` (docs/lifecycle.md): a real
// `somm serve` (and, as repository_poll_e2e_cluster_test, a router in front
// of two workers whose leader controller polls) watching its repository
// every 0.5 s. A model folder copied in becomes queryable; a changed
// model.yaml is read again; a broken model.yaml leaves the served version
// serving and says why; a removed folder is unloaded.
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "e2e_fixture.h"

namespace somm::testing {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;

class RepositoryPollE2ETest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    demo_ = new std::string(DemoRepository());
    digits_ = new HeldOutDigits(LoadHeldOutDigits(*demo_));
    repo_ = new std::string(MakeTestRepository(*demo_, "repository-poll"));
    server_ = new ServerProcess(SommBinary(), *repo_,
                                {"--model-control-mode", "poll", "--repository-poll-secs", "0.5"});
  }
  static void TearDownTestSuite() {
    delete server_;
    delete digits_;
    delete demo_;
    if (repo_) fs::remove_all(*repo_);
    delete repo_;
  }
  void SetUp() override {
    ASSERT_GE(digits_->pixels.size(), 10u) << "no held-out digits (run scripts/setup first)";
    ASSERT_TRUE(server_->ok()) << "server did not start; log: " << server_->log();
  }
  static httplib::Result Ask(const std::string& model) {
    httplib::Client c("127.0.0.1", server_->http_port());
    c.set_read_timeout(60, 0);
    json body;
    body["inputs"] = json::array({{{"name", "pixels"},
                                   {"datatype", "FP32"},
                                   {"shape", {1, 64}},
                                   {"data", digits_->pixels[3]}}});
    return c.Post("/v2/models/" + model + "/infer", body.dump(), "application/json");
  }
  static json Metadata(const std::string& model) {
    httplib::Client c("127.0.0.1", server_->http_port());
    auto r = c.Get("/v2/models/" + model);
    return r && r->status == 200 ? json::parse(r->body) : json();
  }
  // Polls `ok` for up to 60 s.
  static bool Eventually(const std::function<bool()>& ok) {
    for (auto until = std::chrono::steady_clock::now() + 60s; std::chrono::steady_clock::now() < until;) {
      if (ok()) return true;
      std::this_thread::sleep_for(250ms);
    }
    return false;
  }
  // A copy of digits-logistic under another name: its own model.yaml, its
  // version folder linked.
  static void AddModel(const std::string& name) {
    const fs::path dir = fs::path(*repo_) / name;
    fs::create_directories(dir);
    std::ifstream in(fs::path(*demo_) / "digits-logistic" / "model.yaml");
    std::ofstream out(dir / "model.yaml.tmp");
    bool skipping = false;  // a skipped key's continuation lines too
    for (std::string line; std::getline(in, line);) {
      if (skipping && !line.empty() && line[0] == ' ') continue;
      // The folder names it; the test writes its own description.
      skipping = line.rfind("name:", 0) == 0 || line.rfind("description:", 0) == 0;
      if (!skipping) out << line << "\n";
    }
    out.close();
    fs::create_directory_symlink(fs::absolute(fs::path(*demo_) / "digits-logistic" / "1"), dir / "1");
    fs::rename(dir / "model.yaml.tmp", dir / "model.yaml");  // whole, at once
  }

  static inline std::string* demo_ = nullptr;
  static inline std::string* repo_ = nullptr;
  static inline HeldOutDigits* digits_ = nullptr;
  static inline ServerProcess* server_ = nullptr;
};

TEST_F(RepositoryPollE2ETest, ANewModelFolderIsLoadedAndARemovedOneUnloaded) {
  auto before = Ask("polled-new");
  ASSERT_TRUE(before);
  EXPECT_EQ(before->status, 404) << before->body;
  AddModel("polled-new");
  EXPECT_TRUE(Eventually([] {
    auto r = Ask("polled-new");
    return r && r->status == 200;
  })) << "the new folder was never loaded; log: " << server_->log();

  fs::remove_all(fs::path(*repo_) / "polled-new");
  EXPECT_TRUE(Eventually([] {
    auto r = Ask("polled-new");
    return r && r->status == 404;
  })) << "the removed folder still answers";
  auto other = Ask("digits-mlp");
  ASSERT_TRUE(other);
  EXPECT_EQ(other->status, 200) << "other models go on: " << other->body;
}

TEST_F(RepositoryPollE2ETest, AChangedModelYamlIsReadAgainAndABrokenOneKeepsTheOldServing) {
  AddModel("polled-edit");
  ASSERT_TRUE(Eventually([] {
    auto r = Ask("polled-edit");
    return r && r->status == 200;
  }));
  const fs::path yaml = fs::path(*repo_) / "polled-edit" / "model.yaml";
  {
    std::ofstream(yaml, std::ios::app) << "description: edited by the poll test\n";
  }
  EXPECT_TRUE(Eventually([] {
    const json m = Metadata("polled-edit");
    return m.is_object() && m.dump().find("edited by the poll test") != std::string::npos;
  })) << "the edited model.yaml was not read again: " << Metadata("polled-edit").dump();

  {
    std::ofstream(yaml, std::ios::app) << "max_batch_size: [this is not a number\n";
  }
  // Past two polls the broken file has been tried; what served still serves.
  std::this_thread::sleep_for(1500ms);
  auto still = Ask("polled-edit");
  ASSERT_TRUE(still);
  EXPECT_EQ(still->status, 200) << "a broken change took down what served: " << still->body;
  httplib::Client c("127.0.0.1", server_->http_port());
  auto index = c.Post("/v2/repository/index", "{}", "application/json");
  ASSERT_TRUE(index);
  EXPECT_NE(index->body.find("polled-edit"), std::string::npos) << index->body;
}

}  // namespace
}  // namespace somm::testing
