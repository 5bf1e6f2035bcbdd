// The demo pipeline digits-png (tools/make_demo_repo.py; docs/pipelines.md)
// end to end against the real somm binary: PNG bytes in over REST (the
// binary tensor extension) and gRPC (raw contents, as stock OIP clients
// send BYTES), the top classes with their names out, each step's choice in
// the explanation, and hostile images refused with 400 / INVALID_ARGUMENT
// naming the step.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include <filesystem>
#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "e2e_fixture.h"
#include "proto/inference.grpc.pb.h"

namespace somm::testing {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

const std::vector<std::string> kNames = {"zero", "one", "two", "three", "four",
                                         "five", "six", "seven", "eight", "nine"};

// A PNG signature and an IHDR chunk declaring width x height, nothing else
// (the CRC is not checked before the size is).
std::string HugePngHeader(uint32_t width, uint32_t height) {
  std::string png = "\x89PNG\r\n\x1a\n";
  auto be32 = [&png](uint32_t v) {
    for (int s = 24; s >= 0; s -= 8) png.push_back(static_cast<char>((v >> s) & 0xFF));
  };
  be32(13);
  png += "IHDR";
  be32(width);
  be32(height);
  png += std::string{8, 0, 0, 0, 0};
  be32(0);
  return png;
}

class PipelineE2ETest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    demo_ = new std::string(DemoRepository());
    repo_ = new std::string(MakeTestRepository(*demo_, "pipeline"));
    const fs::path from = fs::path(*demo_) / "digits-png";
    if (fs::exists(from / "pipeline.yaml")) {
      fs::copy(from, fs::path(*repo_) / "digits-png", fs::copy_options::recursive);
    }
    // The digits models' profiled variants, where scripts/setup left them:
    // the task step can be served at once instead of after variant
    // generation (copied, so the server never writes into the demo).
    for (const std::string& m : kDigitsModels) {
      const fs::path profiles = fs::path(*demo_) / ".somm" / "variants" / m;
      if (!fs::exists(profiles)) continue;
      const fs::path to = fs::path(*repo_) / ".somm" / "variants" / m;
      fs::create_directories(to.parent_path());
      fs::copy(profiles, to, fs::copy_options::recursive);
    }
    server_ = new ServerProcess(SommBinary(), *repo_,
                                {"--max-body-bytes", "200000", "--auto-variants", "true"});
    // Where no profiles were left (a clean clone: scripts/setup measures
    // none), the server generates them in the background (--auto-variants):
    // the task step can serve once every digits model's variants are READY.
    if (!server_->ok()) return;
    for (const std::string& m : kDigitsModels) WaitForVariantsReady(server_->http_port(), m);
  }
  void SetUp() override {
    ASSERT_TRUE(fs::exists(fs::path(*demo_) / "digits-png" / "pipeline.yaml"))
        << "no digits-png pipeline under " << *demo_ << " (run scripts/setup)";
    ASSERT_TRUE(server_->ok()) << "server did not start; log: " << server_->log();
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

  static httplib::Client Rest() {
    httplib::Client c("127.0.0.1", server_->http_port());
    c.set_read_timeout(60);
    return c;
  }
  static std::unique_ptr<inference::GRPCInferenceService::Stub> Grpc() {
    return inference::GRPCInferenceService::NewStub(grpc::CreateChannel(
        "127.0.0.1:" + std::to_string(server_->grpc_port()), grpc::InsecureChannelCredentials()));
  }
  static std::string Example(int digit) {
    return ReadFileBytes(fs::path(*demo_) / ".examples" / ("digit_" + std::to_string(digit) + ".png"));
  }
  // The digits whose example PNG every digits model classifies right
  // (.examples/expected.json's class_from_png): whichever model the task
  // step picks, the top label is the digit's name.
  static std::vector<int> AgreedDigits() {
    const json expected = json::parse(ReadFileBytes(fs::path(*demo_) / ".examples" / "expected.json"));
    std::vector<int> digits;
    for (int d = 0; d < 10; ++d) {
      bool all = true;
      for (const auto& [model, e] : expected["digit_" + std::to_string(d) + ".json"]["models"].items()) {
        all = all && e["class_from_png"].get<int>() == d;
      }
      if (all) digits.push_back(d);
    }
    return digits;
  }
  // POSTs images with the binary tensor extension; the answer in JSON.
  static httplib::Result PostImages(const std::vector<std::string>& images) {
    std::string data;
    for (const auto& image : images) data += OipBytesElement(image);
    json header = {{"inputs",
                    {{{"name", "image"}, {"datatype", "BYTES"},
                      {"shape", {static_cast<int64_t>(images.size()), 1}},
                      {"parameters", {{"binary_data_size", data.size()}}}}}}};
    const std::string h = header.dump();
    httplib::Headers headers = {{"Inference-Header-Content-Length", std::to_string(h.size())}};
    auto c = Rest();
    return c.Post("/v2/models/digits-png/infer", headers, h + data, "application/octet-stream");
  }

  static inline std::string* demo_ = nullptr;
  static inline std::string* repo_ = nullptr;
  static inline ServerProcess* server_ = nullptr;
};

TEST_F(PipelineE2ETest, PngDigitsGetTheirNamesOverRest) {
  const std::vector<int> digits = AgreedDigits();
  ASSERT_GE(digits.size(), 5u);
  std::vector<std::string> images;
  for (int d : digits) images.push_back(Example(d));
  auto r = PostImages(images);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json answer = json::parse(r->body);
  EXPECT_EQ(answer["model_name"], "digits-png");
  json label;
  for (const auto& out : answer["outputs"]) {
    if (out["name"] == "label") label = out;
  }
  ASSERT_FALSE(label.is_null()) << r->body;
  EXPECT_EQ(label["shape"], json({static_cast<int64_t>(digits.size()), 3}));
  for (size_t i = 0; i < digits.size(); ++i) {
    EXPECT_EQ(label["data"][i * 3], kNames[static_cast<size_t>(digits[i])]) << "image " << i;
  }
  // Each step's choice: the task step names the model and variant it ran.
  const std::string somm = answer["parameters"]["somm"];
  EXPECT_NE(somm.find("steps=decode,classify,top"), std::string::npos) << somm;
  const std::string classify = answer["parameters"]["somm_step_classify"];
  EXPECT_NE(classify.find("variant=digits-"), std::string::npos) << classify;
}

TEST_F(PipelineE2ETest, PngDigitGetsItsNameOverGrpc) {
  const int digit = AgreedDigits().at(0);
  inference::ModelInferRequest req;
  req.set_model_name("digits-png");
  auto* in = req.add_inputs();
  in->set_name("image");
  in->set_datatype("BYTES");
  in->add_shape(1);
  in->add_shape(1);
  req.add_raw_input_contents(OipBytesElement(Example(digit)));
  req.add_outputs()->set_name("label");
  grpc::ClientContext ctx;
  inference::ModelInferResponse resp;
  const grpc::Status s = Grpc()->ModelInfer(&ctx, req, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(resp.outputs_size(), 1);
  EXPECT_EQ(resp.outputs(0).name(), "label");
  ASSERT_EQ(resp.raw_output_contents_size(), 1);
  const std::string& raw = resp.raw_output_contents(0);
  ASSERT_GT(raw.size(), 4u);
  const uint32_t n = static_cast<unsigned char>(raw[0]) | (static_cast<unsigned char>(raw[1]) << 8);
  EXPECT_EQ(raw.substr(4, n), kNames[static_cast<size_t>(digit)]);
}

TEST_F(PipelineE2ETest, IsAModelOnBothWires) {
  auto c = Rest();
  auto md = c.Get("/v2/models/digits-png");
  ASSERT_EQ(md->status, 200) << md->body;
  const json m = json::parse(md->body);
  EXPECT_EQ(m["inputs"][0]["datatype"], "BYTES");
  EXPECT_EQ(m["inputs"][0]["shape"], json({-1, 1}));
  EXPECT_EQ(c.Get("/v2/models/digits-png/ready")->status, 200);
  auto index = c.Post("/v2/repository/index", "{}", "application/json");
  ASSERT_EQ(index->status, 200);
  // Listed once, as a pipeline: its folder is not also a model that
  // failed to load (which would make the server never ready).
  int rows = 0;
  bool ready = false;
  for (const auto& row : json::parse(index->body)) {
    rows += row["name"] == "digits-png";
    ready = ready || (row["name"] == "digits-png" && row["state"] == "READY");
  }
  EXPECT_EQ(rows, 1) << index->body;
  EXPECT_TRUE(ready) << index->body;
  grpc::ClientContext ctx;
  inference::ModelMetadataRequest mreq;
  mreq.set_name("digits-png");
  inference::ModelMetadataResponse mresp;
  ASSERT_TRUE(Grpc()->ModelMetadata(&ctx, mreq, &mresp).ok());
  EXPECT_EQ(mresp.outputs(0).name(), "label");
  EXPECT_EQ(mresp.outputs(0).datatype(), "BYTES");
}

// Hostile images: clear 400s that name the step, and a 100k x 100k PNG is
// refused from its header (the server does not try to allocate it).
TEST_F(PipelineE2ETest, HostileImagesGetClearRefusals) {
  const std::string png = Example(3);
  struct Case {
    std::string image;
    std::string says;
  } cases[] = {{HugePngHeader(100000, 100000), "100000x100000"},
               {png.substr(0, png.size() / 2), "cannot decode"},
               {png.substr(0, 12), "cut short"},
               {"GIF89a not an image", "not a PNG or JPEG"}};
  for (const Case& k : cases) {
    auto r = PostImages({k.image});
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << r->body;
    EXPECT_NE(r->body.find("step 'decode'"), std::string::npos) << r->body;
    EXPECT_NE(r->body.find(k.says), std::string::npos) << r->body;
  }
  inference::ModelInferRequest req;
  req.set_model_name("digits-png");
  auto* in = req.add_inputs();
  in->set_name("image");
  in->set_datatype("BYTES");
  in->add_shape(1);
  in->add_shape(1);
  req.add_raw_input_contents(OipBytesElement(HugePngHeader(100000, 100000)));
  grpc::ClientContext ctx;
  inference::ModelInferResponse resp;
  const grpc::Status s = Grpc()->ModelInfer(&ctx, req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("limit"), std::string::npos) << s.error_message();
  // The server is still up and answering.
  EXPECT_EQ(PostImages({png})->status, 200);
}

}  // namespace
}  // namespace somm::testing
