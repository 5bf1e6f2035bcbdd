// Model control as Triton's (--model-control-mode none|poll|explicit,
// --load-model), the drain's --exit-timeout-secs and --log-format json,
// against `somm serve` (or a cluster's router with
// SOMM_E2E_TOPOLOGY=cluster, tests/server_process.h).
#include <gtest/gtest.h>
#include <httplib.h>
#include <sys/wait.h>

#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "e2e_fixture.h"
#include "server_process.h"

namespace somm::testing {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// A repository of three demo models that all load.
std::string ThreeModelRepository(const std::string& tag) {
  const fs::path repo =
      fs::temp_directory_path() / ("somm-control-" + tag + "-" + std::to_string(::getpid()));
  fs::remove_all(repo);
  fs::create_directories(repo);
  for (const char* model : {"digits-mlp", "digits-logistic", "digits-cnn"}) {
    fs::copy(fs::path(DemoRepository()) / model, repo / model, fs::copy_options::recursive);
  }
  return repo.string();
}

// The READY rows of the repository index, by name.
std::vector<std::string> ReadyModels(httplib::Client& c) {
  auto r = c.Post("/v2/repository/index", R"({"ready": true})", "application/json");
  std::vector<std::string> names;
  if (!r || r->status != 200) return names;
  for (const auto& row : json::parse(r->body)) names.push_back(row["name"]);
  std::sort(names.begin(), names.end());
  return names;
}

TEST(ModelControlE2eTest, NoneLoadsEveryModelAndRefusesTheRepositoryApisLoadAndUnload) {
  const std::string repo = ThreeModelRepository("none");
  ServerProcess server(SommBinary(), repo, {"--model-control-mode", "none"});
  ASSERT_TRUE(server.ok()) << server.Logs();
  httplib::Client c("127.0.0.1", server.http_port());
  c.set_read_timeout(60, 0);
  EXPECT_EQ(ReadyModels(c),
            (std::vector<std::string>{"digits-cnn", "digits-logistic", "digits-mlp"}));
  for (const char* call : {"load", "unload"}) {
    auto r = c.Post(std::string("/v2/repository/models/digits-mlp/") + call, "",
                    "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << call << ": " << r->body;
    EXPECT_NE(r->body.find("--model-control-mode explicit"), std::string::npos) << r->body;
  }
  // A name that does not exist gets the same answer: the mode is checked
  // first, so the refusal says nothing of what the repository holds.
  auto missing = c.Post("/v2/repository/models/no-such-model/load", "", "application/json");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 400) << missing->body;
  // Still served: nothing was unloaded.
  EXPECT_EQ(c.Get("/v2/models/digits-mlp/ready")->status, 200);
  EXPECT_EQ(server.Terminate(), 0);
  fs::remove_all(repo);
}

TEST(ModelControlE2eTest, ExplicitLoadsOnlyTheNamedModelsAndTheApiLoadsAndUnloadsTheRest) {
  const std::string repo = ThreeModelRepository("explicit");
  ServerProcess server(SommBinary(), repo,
                       {"--model-control-mode", "explicit", "--load-model", "digits-mlp"});
  ASSERT_TRUE(server.ok()) << server.Logs();
  httplib::Client c("127.0.0.1", server.http_port());
  c.set_read_timeout(60, 0);
  EXPECT_EQ(ReadyModels(c), (std::vector<std::string>{"digits-mlp"}));
  EXPECT_NE(c.Get("/v2/models/digits-cnn/ready")->status, 200);

  auto load = c.Post("/v2/repository/models/digits-cnn/load", "", "application/json");
  ASSERT_TRUE(load);
  EXPECT_EQ(load->status, 200) << load->body;
  EXPECT_EQ(ReadyModels(c), (std::vector<std::string>{"digits-cnn", "digits-mlp"}));
  auto unload = c.Post("/v2/repository/models/digits-mlp/unload", "", "application/json");
  ASSERT_TRUE(unload);
  EXPECT_EQ(unload->status, 200) << unload->body;
  EXPECT_EQ(ReadyModels(c), (std::vector<std::string>{"digits-cnn"}));
  EXPECT_EQ(server.Terminate(), 0);
  fs::remove_all(repo);
}

TEST(ModelControlE2eTest, ExplicitWithAStarLoadsEveryModel) {
  const std::string repo = ThreeModelRepository("star");
  ServerProcess server(SommBinary(), repo,
                       {"--model-control-mode", "explicit", "--load-model", "*"});
  ASSERT_TRUE(server.ok()) << server.Logs();
  httplib::Client c("127.0.0.1", server.http_port());
  c.set_read_timeout(60, 0);
  EXPECT_EQ(ReadyModels(c),
            (std::vector<std::string>{"digits-cnn", "digits-logistic", "digits-mlp"}));
  EXPECT_EQ(server.Terminate(), 0);
  fs::remove_all(repo);
}

// Refused before anything starts, naming the flag: --load-model outside
// explicit, and a --load-model that names no folder of the repository.
TEST(ModelControlE2eTest, MisusedLoadModelIsRefusedAtStart) {
  const std::string repo = ThreeModelRepository("refused");
  for (const std::string& command : {std::string("serve"), std::string("controller")}) {
    const auto [rc, out] = RunCommand(SommBinary() + " " + command + " --model-repository " + repo +
                                      " --load-model digits-mlp --check-args 2>&1");
    EXPECT_EQ(WEXITSTATUS(rc), 2) << command << ": " << out;
    EXPECT_NE(out.find("needs --model-control-mode explicit"), std::string::npos) << out;
  }
  const auto [rc, out] =
      RunCommand(SommBinary() + " controller --model-repository " + repo +
                 " --model-control-mode explicit --load-model nope --check-args 2>&1");
  EXPECT_EQ(WEXITSTATUS(rc), 2) << out;
  EXPECT_NE(out.find("--load-model nope"), std::string::npos) << out;
  fs::remove_all(repo);
}

// --log-format json: every line the server logs is one JSON object with the
// text form's fields.
TEST(ModelControlE2eTest, JsonLogsAreOneObjectPerLine) {
  const std::string repo = ThreeModelRepository("json");
  ServerProcess server(SommBinary(), repo, {"--log-format", "json"});
  ASSERT_TRUE(server.ok()) << server.Logs();
  EXPECT_EQ(server.Terminate(), 0);
  std::istringstream logs(server.Logs());
  int lines = 0;
  bool saw_stop = false;
  std::string process;
  for (std::string line; std::getline(logs, line);) {
    // A cluster's logs hold each process's lines under a header; Redis
    // writes its own.
    if (line.rfind("==== ", 0) == 0) {
      process = line.substr(5);
      continue;
    }
    if (line.empty() || process == "redis") continue;
    const json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
    ASSERT_TRUE(j.is_object()) << "not JSON: " << line;
    EXPECT_TRUE(j.contains("time") && j.contains("level") && j.contains("logger") &&
                j.contains("message"))
        << line;
    saw_stop = saw_stop || j["message"].get<std::string>().find("stopped cleanly") !=
                               std::string::npos;
    ++lines;
  }
  EXPECT_GT(lines, 3);
  EXPECT_TRUE(saw_stop || IsClusterTopology());
  fs::remove_all(repo);
}

}  // namespace
}  // namespace somm::testing
