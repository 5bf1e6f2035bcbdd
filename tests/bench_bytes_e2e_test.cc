// `somm bench --input-bytes` driving a pipeline that takes encoded images:
// a PNG in every sample's BYTES element, over REST (the binary tensor
// extension) and gRPC, against the real somm binary. The pipeline names a
// model (not a task) so that it serves without profiled variants.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "e2e_fixture.h"

namespace somm::testing {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

struct CommandRun {
  int exit_code = -1;
  std::string output;
};

CommandRun Shell(const std::string& command) {
  auto [status, output] = RunCommand(command);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, std::move(output)};
}

class BenchBytesE2ETest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    demo_ = new std::string(DemoRepository());
    repo_ = new std::string(MakeTestRepository(*demo_, "bench-bytes"));
    WritePngMlpPipeline(*repo_);
    server_ = new ServerProcess(SommBinary(), *repo_, {"--max-body-bytes", "200000"});
  }
  static void TearDownTestSuite() {
    if (server_) {
      EXPECT_EQ(server_->Terminate(), 0);
    }
    delete server_;
    if (repo_) fs::remove_all(*repo_);
    delete repo_;
    delete demo_;
  }
  void SetUp() override {
    ASSERT_TRUE(fs::exists(Png())) << "no example PNG under " << *demo_ << " (run scripts/setup)";
    ASSERT_TRUE(server_->ok()) << "server did not start; log: " << server_->log();
  }
  static std::string Png() { return (fs::path(*demo_) / ".examples" / "digit_3.png").string(); }
  static std::string Bench(const std::string& wire, const std::string& file,
                           const std::string& json_file) {
    const int port = wire == "grpc" ? server_->grpc_port() : server_->http_port();
    return SommBinary() + " bench png-mlp -i " + wire + " --url 127.0.0.1:" +
           std::to_string(port) + " --input-bytes " + file + " -b 2 --concurrency 2" +
           " --warmup 200ms --window 500ms --max-windows 2 --json-file " + json_file;
  }

  static inline std::string* demo_ = nullptr;
  static inline std::string* repo_ = nullptr;
  static inline ServerProcess* server_ = nullptr;
};

TEST_F(BenchBytesE2ETest, DrivesAnImagePipelineOnBothWires) {
  for (const std::string wire : {"http", "grpc"}) {
    const std::string out = (fs::temp_directory_path() /
                             ("somm-bench-bytes-" + wire + "-" + std::to_string(getpid()) + ".json"))
                                .string();
    const CommandRun run = Shell(Bench(wire, Png(), out));
    ASSERT_EQ(run.exit_code, 0) << wire << ": " << run.output;
    const json report = json::parse(std::ifstream(out));
    fs::remove(out);
    const json& point = report["points"][0];
    EXPECT_GT(point["count"].get<double>(), 0) << wire << ": " << point.dump();
    EXPECT_TRUE(point["errors"].empty()) << wire << ": " << point.dump();
    // Two images a query: the samples are twice the queries.
    EXPECT_DOUBLE_EQ(point["throughput_sps"].get<double>(),
                     2 * point["throughput_qps"].get<double>());
  }
}

TEST_F(BenchBytesE2ETest, BytesThatAreNoImageAreRefusedByThePipelineBeforeTheLoad) {
  const std::string junk =
      (fs::temp_directory_path() / ("somm-bench-junk-" + std::to_string(getpid()))).string();
  std::ofstream(junk) << "not an image at all";
  const CommandRun run = Shell(Bench("http", junk, junk + ".json"));
  fs::remove(junk);
  // The probe query fails with the pipeline's own refusal, naming the step.
  EXPECT_NE(run.exit_code, 0);
  EXPECT_FALSE(fs::exists(junk + ".json"));
  EXPECT_NE(run.output.find("step 'decode': image 0: not a PNG or JPEG image"), std::string::npos)
      << run.output;
}

TEST_F(BenchBytesE2ETest, AModelWithoutABytesInputIsRefusedBeforeAnyLoad) {
  const CommandRun run = Shell(SommBinary() + " bench digits-mlp --url 127.0.0.1:" +
                        std::to_string(server_->http_port()) + " --input-bytes " + Png());
  EXPECT_NE(run.exit_code, 0);
  EXPECT_NE(run.output.find("takes pixels FP32"), std::string::npos) << run.output;
}

}  // namespace
}  // namespace somm::testing
