// End-to-end, warm-up (docs/lifecycle.md): a model whose model.yaml asks for
// `warmup: {runs, batch_sizes}` runs them on each loaded instance before the
// instance takes queries, and says so in the log of the process that loaded
// it (`somm serve`, or a worker). Runs embedded and, registered a second
// time, through a router in front of two workers (tests/server_process.h).
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "e2e_fixture.h"

namespace somm::testing {
namespace {

namespace fs = std::filesystem;

TEST(WarmupE2ETest, AnInstanceRunsItsConfiguredWarmupBeforeItTakesQueries) {
  const std::string demo = DemoRepository();
  const HeldOutDigits digits = LoadHeldOutDigits(demo);
  ASSERT_GE(digits.pixels.size(), 1u) << "no held-out digits under " << demo << " (run scripts/setup first)";
  const std::string repo = MakeOneModelRepository(demo, "digits-mlp", "warmup");
  {
    std::ofstream yaml(fs::path(repo) / "digits-mlp" / "model.yaml", std::ios::app);
    yaml << "\nwarmup: {runs: 3, batch_sizes: [1, 4]}\n";
  }
  auto server = std::make_unique<ServerProcess>(SommBinary(), repo);
  ASSERT_TRUE(server->ok()) << "server did not start; log: " << server->log();
  httplib::Client client("127.0.0.1", server->http_port());
  client.set_read_timeout(60, 0);

  bool ready = false;
  for (int i = 0; i < 600 && !ready; ++i) {
    auto r = client.Get("/v2/models/digits-mlp/ready");
    ready = r && r->status == 200;
    if (!ready) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  ASSERT_TRUE(ready) << "digits-mlp never became ready; logs in " << server->log();

  // The line is written before the instance is marked ready, so it is there
  // by the time the model answers.
  const std::string logs = server->Logs();
  EXPECT_NE(logs.find("warm-up of digits-mlp"), std::string::npos) << logs.substr(0, 4000);
  EXPECT_NE(logs.find("3 run(s) at batch 1 and at each of model.yaml's sizes"), std::string::npos)
      << logs.substr(0, 4000);

  const nlohmann::json body = {
      {"inputs", {{{"name", "pixels"}, {"datatype", "FP32"}, {"shape", {1, 64}}, {"data", digits.pixels[0]}}}}};
  auto answer = client.Post("/v2/models/digits-mlp/infer", body.dump(), "application/json");
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->status, 200) << answer->body;
  server.reset();
  fs::remove_all(repo);
}

}  // namespace
}  // namespace somm::testing
