// Hostile model files against a real `somm serve` (docs/security.md): a
// truncated file, random bytes, a zip whose records are corrupted, and
// TorchScript archives that declare huge storages or views over small ones
// (tests/make_hostile_models.py). Each registration over REST and gRPC gets
// a clear 400 / INVALID_ARGUMENT naming the problem; nothing is left in the
// repository; the server keeps answering; an over-size registration gets 413.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "common/base64.h"
#include "e2e_fixture.h"
#include "proto/somm.grpc.pb.h"

namespace somm::testing {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::string ReadAll(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}
void WriteAll(const fs::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

struct HostileFile {
  std::string name;    // registered as hostile-<name>
  std::string expect;  // a phrase the refusal must contain
};

class HostileModelE2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    demo_ = new std::string(DemoRepository());
    repo_ = new std::string(MakeTestRepository(*demo_, "hostile-models"));
    files_ = new fs::path(fs::path(*repo_).parent_path() / (fs::path(*repo_).filename().string() + "-files"));
    fs::create_directories(*files_);
    const fs::path model = fs::path(*demo_) / "digits-mlp" / "1" / "model.pt";
    const std::string command = "/usr/bin/python3 " + std::string(SOMM_SOURCE_DIR) +
                                "/tests/make_hostile_models.py " + model.string() + " " +
                                files_->string();
    generated_ = std::system(command.c_str()) == 0;
    const std::string good = ReadAll(model);
    WriteAll(*files_ / "truncated.pt", good.substr(0, good.size() / 2));
    std::mt19937 rng(7);
    std::string noise(200000, '\0');
    for (char& c : noise) c = static_cast<char>(rng());
    WriteAll(*files_ / "random.pt", noise);
    // A zip with a bad archive inside: its central directory overwritten,
    // and (the zip intact) its data.pkl garbled after the first opcodes.
    // (Garbled weights alone make a valid model that answers wrongly: libtorch
    // checks no CRC of a stored record.)
    std::string directory = good;
    for (size_t i = directory.size() - 120; i < directory.size(); ++i) directory[i] ^= 0x5a;
    WriteAll(*files_ / "corrupt_directory.pt", directory);
    std::string pickle = good;
    const size_t at = pickle.find(std::string("\x80\x02" "c__torch__", 12));
    if (at != std::string::npos) {
      for (size_t i = at + 24; i < at + 88 && i < pickle.size(); ++i) pickle[i] = '\xf7';
    }
    WriteAll(*files_ / "corrupt_pickle.pt", pickle);
    // A small body limit, so that an over-size registration is cheap to send.
    server_ = new ServerProcess(SommBinary(), *repo_, {"--max-body-bytes", "4194304"});
  }
  static void TearDownTestSuite() {
    delete server_;
    fs::remove_all(*repo_);
    fs::remove_all(*files_);
    delete files_;
    delete repo_;
    delete demo_;
  }
  void SetUp() override {
    ASSERT_TRUE(generated_) << "tests/make_hostile_models.py failed (Debian's python3-torch)";
    ASSERT_TRUE(server_->ok()) << "somm serve did not start; log: " << server_->log();
  }

  static json Registration(const std::string& model_bytes) {
    return {{"task", "classification/digits"},
            {"inputs", {{{"name", "pixels"}, {"datatype", "FP32"}, {"shape", {64}}}}},
            {"outputs", {{{"name", "logits"}, {"datatype", "FP32"}, {"shape", {10}}}}},
            {"max_batch_size", 8},
            {"model", Base64Encode(model_bytes)}};
  }
  // The server still answers a query, and its process is the one started.
  static void ExpectServing(const std::string& after) {
    httplib::Client c("127.0.0.1", server_->http_port());
    c.set_read_timeout(60, 0);
    const auto digits = LoadHeldOutDigits(*demo_);
    json body;
    body["inputs"] = json::array(
        {{{"name", "pixels"}, {"datatype", "FP32"}, {"shape", {1, 64}}, {"data", digits.pixels[0]}}});
    auto r = c.Post("/v2/models/digits-mlp/infer", body.dump(), "application/json");
    ASSERT_TRUE(r) << "no answer after " << after;
    EXPECT_EQ(r->status, 200) << after << ": " << r->body;
    EXPECT_EQ(kill(server_->pid(), 0), 0) << "somm serve died after " << after;
  }

  static inline std::string* demo_ = nullptr;
  static inline std::string* repo_ = nullptr;
  static inline fs::path* files_ = nullptr;
  static inline bool generated_ = false;
  static inline ServerProcess* server_ = nullptr;
};

const HostileFile kHostile[] = {
    {"truncated", "TorchScript archive"},
    {"random", "TorchScript archive"},
    {"corrupt_directory", "TorchScript archive"},
    {"corrupt_pickle", "data.pkl: pickle at byte"},
    {"huge_storage", "declares 2147483647 FloatStorage elements"},
    {"huge_shape", "reaches element"},
    {"huge_view", "tensor 'pad'"},
};

TEST_F(HostileModelE2eTest, EveryHostileFileIsRefusedOverRestAndTheServerGoesOn) {
  httplib::Client c("127.0.0.1", server_->http_port());
  c.set_read_timeout(120, 0);
  for (const HostileFile& f : kHostile) {
    const std::string name = "hostile-" + f.name;
    const std::string bytes = ReadAll(*files_ / (f.name + ".pt"));
    ASSERT_FALSE(bytes.empty()) << f.name;
    auto r = c.Post("/v2/repository/models/" + name + "/register", Registration(bytes).dump(),
                    "application/json");
    ASSERT_TRUE(r) << f.name << ": no answer";
    EXPECT_EQ(r->status, 400) << f.name << ": " << r->body;
    const std::string message = json::parse(r->body).value("error", "");
    EXPECT_NE(message.find("refused"), std::string::npos) << f.name << ": " << message;
    EXPECT_NE(message.find(f.expect), std::string::npos) << f.name << ": " << message;
    EXPECT_FALSE(fs::exists(fs::path(*repo_) / name)) << f.name << " was left in the repository";
    ExpectServing(f.name);
  }
  // No variant job was started for any of them, and nothing is staged.
  std::error_code ec;
  const fs::path staging = fs::path(*repo_) / ".somm" / "staging";
  EXPECT_TRUE(!fs::exists(staging, ec) || fs::is_empty(staging, ec));
}

TEST_F(HostileModelE2eTest, GrpcRegistrationOfAHostileFileIsInvalidArgument) {
  auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(server_->grpc_port()),
                                     grpc::InsecureChannelCredentials());
  auto control = somm::SommControl::NewStub(channel);
  for (const char* file : {"huge_storage", "huge_view"}) {
    somm::RegisterModelRequest req;
    req.set_name(std::string("hostile-grpc-") + file);
    req.set_task("classification/digits");
    auto* in = req.add_inputs();
    in->set_name("pixels");
    in->set_datatype("FP32");
    in->add_shape(64);
    auto* out = req.add_outputs();
    out->set_name("logits");
    out->set_datatype("FP32");
    out->add_shape(10);
    req.set_max_batch_size(8);
    req.set_model(ReadAll(*files_ / (std::string(file) + ".pt")));
    grpc::ClientContext ctx;
    somm::RegisterModelResponse resp;
    const grpc::Status g = control->RegisterModel(&ctx, req, &resp);
    EXPECT_EQ(g.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << file << ": " << g.error_message();
    EXPECT_NE(g.error_message().find("refused"), std::string::npos) << g.error_message();
    ExpectServing(std::string("gRPC ") + file);
  }
}

TEST_F(HostileModelE2eTest, ARegistrationOverTheBodyLimitIs413) {
  httplib::Client c("127.0.0.1", server_->http_port());
  std::string big(5 << 20, 'A');  // 5 MiB of base64 against a 4 MiB limit
  auto r = c.Post("/v2/repository/models/hostile-big/register",
                  R"({"task":"classification/digits","model":")" + big + "\"}", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413) << r->body;
  EXPECT_FALSE(fs::exists(fs::path(*repo_) / "hostile-big"));
  ExpectServing("an over-size registration");
}

}  // namespace
}  // namespace somm::testing
