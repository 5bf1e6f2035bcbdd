// --api-key on every client command (README, "The CLI"): each sends the key
// it is given, ahead of $SOMM_API_KEY, over REST and, where the command has
// a gRPC call, over gRPC; without either it is refused for the missing key.
#include <string>
#include <vector>

#include "auth_e2e_fixture.h"

namespace somm::testing {
namespace {

struct ClientCommand {
  std::string args;  // after `somm`, before the client flags
  bool grpc;         // it has a gRPC call
  bool succeeds;     // with the owner's key it exits 0
  std::string says;  // with the owner's key its output holds this
};

std::vector<ClientCommand> EveryClientCommand() {
  const std::string demo = DemoRepository();
  const std::string digit = demo + "/.examples/digit_3.json";
  const std::string model = (fs::path(demo) / "digits-mlp" / "1" / "model.pt").string();
  return {
      {"infer digits-mlp " + digit, true, true, "model digits-mlp"},
      {"models", true, true, "digits-mlp"},
      {"tasks", true, true, "classification/digits"},
      {"decisions --limit 5", true, true, "TIME (UTC)"},
      // These pass the key check and stop at what they ask: a model with
      // no variants generated and no rollout, a name that is taken.
      {"variants digits-mlp", true, false, "model digits-mlp"},
      {"rollout digits-mlp", true, false, "has no rollout"},
      {"register digits-mlp --model-file " + model +
           " --task classification/digits --input pixels:FP32:64 --output logits:FP32:10"
           " --max-batch-size 8 --private",
       true, false, "already exists"},
      {"status", true, true, "digits-mlp"},
      {"batch status", true, true, "JOB"},
  };
}

bool RefusedForItsKey(const std::string& output) {
  return output.find("missing API key") != std::string::npos ||
         output.find("invalid API key") != std::string::npos;
}

TEST_F(AuthE2ETest, EveryClientCommandSendsItsApiKeyOverBothWires) {
  const std::string somm = SommBinary();
  const std::string wrong = "somm_0123456789abcdef_" + std::string(64, '7');
  for (const ClientCommand& c : EveryClientCommand()) {
    for (const std::string protocol : {"http", "grpc"}) {
      if (protocol == "grpc" && !c.grpc) continue;
      const int port = protocol == "http" ? server_->http_port() : server_->grpc_port();
      const std::string flags = " -i " + protocol + " --url 127.0.0.1:" + std::to_string(port);
      SCOPED_TRACE(c.args + flags);

      auto [none_rc, none] = RunCommand("env -u SOMM_API_KEY " + somm + " " + c.args + flags);
      EXPECT_NE(none_rc, 0) << none;
      EXPECT_NE(none.find("missing API key"), std::string::npos) << none;

      // The flag is sent, and wins over the environment (a wrong key there).
      auto [both_rc, both] = RunCommand("SOMM_API_KEY=" + wrong + " " + somm + " " + c.args +
                                        flags + " --api-key " + *owner_);
      EXPECT_FALSE(RefusedForItsKey(both)) << both;
      EXPECT_NE(both.find(c.says), std::string::npos) << both;
      if (c.succeeds) {
        EXPECT_EQ(both_rc, 0) << both;
      }
      auto [env_rc, env] = RunCommand("SOMM_API_KEY=" + wrong + " " + somm + " " + c.args + flags);
      EXPECT_NE(env_rc, 0) << env;
      EXPECT_NE(env.find("invalid API key"), std::string::npos) << env;
    }
  }
}

}  // namespace
}  // namespace somm::testing
