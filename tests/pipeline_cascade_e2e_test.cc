// The demo cascade digits-cascade (tools/make_demo_repo.py;
// docs/cascades.md) end to end against the real somm binary,
// on a fresh repository without profiles (as on a clean clone): its
// threshold set when it loads, on digits-logistic's validation data, and
// shown in its metadata; the held-out digits over REST and gRPC, each
// sample answered by the stage the answer says, a sample sent on answered
// as digits-cnn answers it, the cascade's accuracy meeting what it
// declared, and a query's min_accuracy held against the cascade's. Beside it, on the same server, a
// switch on a request parameter and a fan-out averaging two models' logits, written here (the demo
// has none), over both wires.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

#include "e2e_fixture.h"
#include "proto/inference.grpc.pb.h"

namespace somm::testing {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr char kPipeline[] = "digits-cascade";
constexpr int64_t kBatch = 64;

class PipelineCascadeE2ETest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    demo_ = new std::string(DemoRepository());
    digits_ = new HeldOutDigits(LoadHeldOutDigits(*demo_));
    repo_ = new std::string(MakeTestRepository(*demo_, "cascade"));
    const fs::path from = fs::path(*demo_) / kPipeline;
    if (fs::exists(from / "pipeline.yaml")) {
      fs::copy(from, fs::path(*repo_) / kPipeline, fs::copy_options::recursive);
    }
    const fs::path branches = fs::path(*repo_);
    fs::create_directories(branches / "digits-switch");
    std::ofstream(branches / "digits-switch" / "pipeline.yaml") << R"(
inputs: [{name: pixels, datatype: FP32, shape: [64]}]
outputs: [{name: logits, datatype: FP32, shape: [10], from: s.logits}]
steps:
  - {name: s, switch: {parameter: tier, cases: {fast: digits-logistic, best: digits-cnn}},
     inputs: {pixels: pixels}}
)";
    fs::create_directories(branches / "digits-ensemble");
    std::ofstream(branches / "digits-ensemble" / "pipeline.yaml") << R"(
inputs: [{name: pixels, datatype: FP32, shape: [64]}]
outputs: [{name: logits, datatype: FP32, shape: [10], from: f.logits}]
steps:
  - {name: f, fanout: {models: [digits-mlp, digits-cnn], join: mean}, inputs: {pixels: pixels}}
)";
    // The digits models' profiled variants, where scripts/setup left them
    // (copied, so the server never writes into the demo); elsewhere (a
    // clean clone) the server generates them in the background: a query
    // with a min_accuracy needs them (MinAccuracyIsTheCascades waits).
    for (const std::string& m : kDigitsModels) {
      const fs::path profiles = fs::path(*demo_) / ".somm" / "variants" / m;
      if (!fs::exists(profiles)) continue;
      const fs::path to = fs::path(*repo_) / ".somm" / "variants" / m;
      fs::create_directories(to.parent_path());
      fs::copy(profiles, to, fs::copy_options::recursive);
    }
    server_ = new ServerProcess(SommBinary(), *repo_,
                                {"--max-body-bytes", "400000", "--auto-variants", "true"});
  }
  void SetUp() override {
    ASSERT_TRUE(fs::exists(fs::path(*demo_) / kPipeline / "pipeline.yaml"))
        << "no " << kPipeline << " pipeline under " << *demo_ << " (run scripts/setup)";
    ASSERT_GE(digits_->pixels.size(), 100u);
    ASSERT_TRUE(server_->ok()) << "server did not start; log: " << server_->log();
  }
  static void TearDownTestSuite() {
    if (server_) {
      EXPECT_EQ(server_->Terminate(), 0);
    }
    delete server_;
    if (repo_) fs::remove_all(*repo_);
    delete repo_;
    delete digits_;
    delete demo_;
  }

  static httplib::Client Rest() {
    httplib::Client c("127.0.0.1", server_->http_port());
    c.set_read_timeout(60);
    return c;
  }

  // Samples [from, from + n) as a JSON infer body for `pixels`.
  static std::string Body(size_t from, size_t n) {
    json data = json::array();
    for (size_t i = from; i < from + n; ++i) {
      for (float v : digits_->pixels[i]) data.push_back(v);
    }
    return json{{"inputs",
                 {{{"name", "pixels"},
                   {"datatype", "FP32"},
                   {"shape", {static_cast<int64_t>(n), 64}},
                   {"data", data}}}}}
        .dump();
  }

  static json Output(const json& answer, const std::string& name) {
    for (const auto& out : answer["outputs"]) {
      if (out["name"] == name) return out["data"];
    }
    return json();
  }

  // A model's (or pipeline's) logits for samples [from, from + n).
  static std::vector<double> Logits(const std::string& model, size_t from, size_t n,
                                    const json& parameters = json::object()) {
    json body = json::parse(Body(from, n));
    if (!parameters.empty()) body["parameters"] = parameters;
    auto r = Rest().Post("/v2/models/" + model + "/infer", body.dump(), "application/json");
    EXPECT_TRUE(r && r->status == 200) << (r ? r->body : "no answer");
    if (!r || r->status != 200) return {};
    return Output(json::parse(r->body), "logits").get<std::vector<double>>();
  }

  // A model's top-1 for samples [from, from + n), asked of the server.
  static std::vector<int64_t> Top1(const std::string& model, size_t from, size_t n) {
    auto r = Rest().Post("/v2/models/" + model + "/infer", Body(from, n), "application/json");
    EXPECT_TRUE(r && r->status == 200) << (r ? r->body : "no answer");
    std::vector<int64_t> top;
    if (!r || r->status != 200) return top;
    const json logits = Output(json::parse(r->body), "logits");
    for (size_t s = 0; s < n; ++s) {
      int64_t best = 0;
      for (int64_t c = 1; c < 10; ++c) {
        if (logits[s * 10 + c].get<double>() > logits[s * 10 + best].get<double>()) best = c;
      }
      top.push_back(best);
    }
    return top;
  }

  // The cascade's reported figure `key` (metadata parameter cascade_classify).
  static double Calibrated(const std::string& key) {
    auto md = Rest().Get(std::string("/v2/models/") + kPipeline);
    if (!md || md->status != 200) return -1;
    const std::string cal = json::parse(md->body)["parameters"].value("cascade_classify", "");
    std::smatch m;
    if (!std::regex_search(cal, m, std::regex(key + "=([0-9.]+)"))) return -1;
    return std::stod(m[1]);
  }

  static inline std::string* demo_ = nullptr;
  static inline std::string* repo_ = nullptr;
  static inline HeldOutDigits* digits_ = nullptr;
  static inline ServerProcess* server_ = nullptr;
};

TEST_F(PipelineCascadeE2ETest, TheThresholdIsSetAtLoadAndShown) {
  auto c = Rest();
  auto md = c.Get(std::string("/v2/models/") + kPipeline);
  ASSERT_TRUE(md && md->status == 200) << (md ? md->body : "no answer") << "\n" << server_->Logs();
  const json m = json::parse(md->body);
  EXPECT_EQ(m["parameters"]["pipeline_steps"],
            "classify=cascade:digits-logistic,digits-cnn top=postprocess");
  const std::string cal = m["parameters"]["cascade_classify"];
  EXPECT_NE(cal.find("validation=digits-logistic/1/validation"), std::string::npos) << cal;
  const double accuracy = Calibrated("validation_accuracy");
  const double floor = Calibrated("min_accuracy");
  EXPECT_GE(accuracy, floor) << cal;
  EXPECT_GT(floor, 0.9) << cal;
  const double reached = Calibrated("reached_digits-cnn");
  EXPECT_GT(reached, 0) << cal;
  EXPECT_LT(reached, 1) << cal;
  EXPECT_EQ(c.Get(std::string("/v2/models/") + kPipeline + "/ready")->status, 200);
}

TEST_F(PipelineCascadeE2ETest, HeldOutDigitsOverRestEachAnsweredByItsStage) {
  const size_t n = digits_->pixels.size();
  int64_t right = 0, escalated = 0;
  for (size_t from = 0; from < n; from += kBatch) {
    const size_t k = std::min<size_t>(kBatch, n - from);
    auto r = Rest().Post(std::string("/v2/models/") + kPipeline + "/infer", Body(from, k),
                         "application/json");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    const json answer = json::parse(r->body);
    const json cls = Output(answer, "class"), stage = Output(answer, "stage");
    ASSERT_EQ(cls.size(), k) << r->body;
    ASSERT_EQ(stage.size(), k) << r->body;
    const std::vector<int64_t> cheap = Top1("digits-logistic", from, k);
    const std::vector<int64_t> best = Top1("digits-cnn", from, k);
    ASSERT_EQ(cheap.size(), k);
    ASSERT_EQ(best.size(), k);
    std::string answered_by;
    int64_t sent_on = 0;
    for (size_t s = 0; s < k; ++s) {
      const int64_t st = stage[s].get<int64_t>();
      ASSERT_TRUE(st == 0 || st == 1) << r->body;
      // The stage that answered is the one whose top-1 came back.
      EXPECT_EQ(cls[s].get<int64_t>(), st == 1 ? best[s] : cheap[s]) << "sample " << from + s;
      answered_by += (s ? "," : "") + std::to_string(st);
      sent_on += st;
      right += cls[s].get<int64_t>() == digits_->labels[from + s];
    }
    escalated += sent_on;
    const std::string why = answer["parameters"]["somm_step_classify"];
    EXPECT_NE(why.find("answered_by=" + answered_by + " "), std::string::npos) << why;
    if (sent_on > 0) {
      EXPECT_NE(why.find("stage1: model=digits-cnn:1 rows=" + std::to_string(sent_on)),
                std::string::npos)
          << why;
    } else {
      EXPECT_EQ(why.find("stage1:"), std::string::npos) << why;
    }
  }
  // The held-out split is the validation data the threshold was set on, so
  // the served cascade must reproduce the calibration's figures.
  const double accuracy = static_cast<double>(right) / static_cast<double>(n);
  const double share = static_cast<double>(escalated) / static_cast<double>(n);
  EXPECT_GE(accuracy, Calibrated("min_accuracy"));
  EXPECT_NEAR(accuracy, Calibrated("validation_accuracy"), 2.0 / static_cast<double>(n));
  EXPECT_NEAR(share, Calibrated("reached_digits-cnn"), 2.0 / static_cast<double>(n));
  EXPECT_GT(escalated, 0);
  EXPECT_LT(escalated, static_cast<int64_t>(n));
}

// A query's min_accuracy is the cascade's own (digits-logistic alone is at
// 0.89): met up to its calibrated accuracy, refused beyond.
TEST_F(PipelineCascadeE2ETest, MinAccuracyIsTheCascades) {
  const double reached = Calibrated("validation_accuracy");
  ASSERT_GT(reached, 0.9);
  // Each stage is then asked for an accuracy, which takes profiled variants.
  ASSERT_TRUE(WaitForVariantsReady(server_->http_port(), "digits-logistic"));
  ASSERT_TRUE(WaitForVariantsReady(server_->http_port(), "digits-cnn"));
  for (const double asked : {0.95, reached, reached + 0.005}) {
    json body = json::parse(Body(0, 4));
    body["parameters"] = {{"min_accuracy", asked}};
    auto r = Rest().Post(std::string("/v2/models/") + kPipeline + "/infer", body.dump(),
                         "application/json");
    ASSERT_TRUE(r);
    if (asked <= reached) {
      EXPECT_EQ(r->status, 200) << asked << ": " << r->body;
    } else {
      EXPECT_EQ(r->status, 400) << r->body;
      EXPECT_NE(r->body.find("step 'classify': cannot meet min_accuracy="), std::string::npos)
          << r->body;
    }
  }
}

TEST_F(PipelineCascadeE2ETest, HeldOutDigitsOverGrpc) {
  inference::ModelInferRequest req;
  req.set_model_name(kPipeline);
  auto* in = req.add_inputs();
  in->set_name("pixels");
  in->set_datatype("FP32");
  in->add_shape(kBatch);
  in->add_shape(64);
  std::string raw;
  for (size_t s = 0; s < static_cast<size_t>(kBatch); ++s) {
    raw.append(reinterpret_cast<const char*>(digits_->pixels[s].data()), 64 * sizeof(float));
  }
  req.add_raw_input_contents(raw);
  req.add_outputs()->set_name("class");
  req.add_outputs()->set_name("stage");
  auto stub = inference::GRPCInferenceService::NewStub(grpc::CreateChannel(
      "127.0.0.1:" + std::to_string(server_->grpc_port()), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  inference::ModelInferResponse resp;
  const grpc::Status s = stub->ModelInfer(&ctx, req, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(resp.raw_output_contents_size(), 2);
  ASSERT_EQ(resp.raw_output_contents(0).size(), static_cast<size_t>(kBatch) * 8);
  ASSERT_EQ(resp.raw_output_contents(1).size(), static_cast<size_t>(kBatch) * 8);
  std::vector<int64_t> cls(kBatch), stage(kBatch);
  std::memcpy(cls.data(), resp.raw_output_contents(0).data(), cls.size() * 8);
  std::memcpy(stage.data(), resp.raw_output_contents(1).data(), stage.size() * 8);
  const std::vector<int64_t> cheap = Top1("digits-logistic", 0, kBatch);
  const std::vector<int64_t> best = Top1("digits-cnn", 0, kBatch);
  ASSERT_EQ(best.size(), static_cast<size_t>(kBatch));
  int64_t sent_on = 0;
  for (size_t i = 0; i < static_cast<size_t>(kBatch); ++i) {
    EXPECT_EQ(cls[i], stage[i] == 1 ? best[i] : cheap[i]) << "sample " << i;
    sent_on += stage[i];
  }
  const auto& params = resp.parameters();
  ASSERT_TRUE(params.count("somm_step_classify"));
  const std::string why = params.at("somm_step_classify").string_param();
  EXPECT_NE(why.find("threshold="), std::string::npos) << why;
  EXPECT_NE(
      why.find("reached_digits-cnn=" + std::to_string(sent_on) + "/" + std::to_string(kBatch)),
      std::string::npos)
      << why;
  if (sent_on > 0) {
    EXPECT_NE(why.find("stage1: model=digits-cnn:1"), std::string::npos) << why;
  }
}

}  // namespace
}  // namespace somm::testing

namespace somm::testing {
namespace {

TEST_F(PipelineCascadeE2ETest, ASwitchSendsTheQueryToTheModelItsParameterNames) {
  const std::vector<double> best = Logits("digits-cnn", 0, 8);
  const std::vector<double> fast = Logits("digits-logistic", 0, 8);
  ASSERT_EQ(best.size(), 80u);
  EXPECT_EQ(Logits("digits-switch", 0, 8, {{"tier", "best"}}), best);
  EXPECT_EQ(Logits("digits-switch", 0, 8, {{"tier", "fast"}}), fast);
  auto refused = Rest().Post(
      "/v2/models/digits-switch/infer",
      [] {
        json b = json::parse(Body(0, 1));
        b["parameters"] = {{"tier", "premium"}};
        return b.dump();
      }(),
      "application/json");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 400) << refused->body;
  EXPECT_NE(refused->body.find("step 's': parameter 'tier' is 'premium', which no case names"),
            std::string::npos)
      << refused->body;

  inference::ModelInferRequest req;
  req.set_model_name("digits-switch");
  (*req.mutable_parameters())["tier"].set_string_param("best");
  auto* in = req.add_inputs();
  in->set_name("pixels");
  in->set_datatype("FP32");
  in->add_shape(1);
  in->add_shape(64);
  req.add_raw_input_contents(
      std::string(reinterpret_cast<const char*>(digits_->pixels[0].data()), 256));
  auto stub = inference::GRPCInferenceService::NewStub(grpc::CreateChannel(
      "127.0.0.1:" + std::to_string(server_->grpc_port()), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  inference::ModelInferResponse resp;
  ASSERT_TRUE(stub->ModelInfer(&ctx, req, &resp).ok());
  const std::string why = resp.parameters().at("somm_step_s").string_param();
  EXPECT_NE(why.find("switch=parameter:tier value=best model=digits-cnn; digits-cnn: "
                     "model=digits-cnn:1 rows=1"),
            std::string::npos)
      << why;
  ASSERT_EQ(resp.raw_output_contents_size(), 1);
  std::vector<float> got(10);
  std::memcpy(got.data(), resp.raw_output_contents(0).data(), 40);
  for (size_t c = 0; c < 10; ++c) EXPECT_NEAR(got[c], best[c], 1e-5) << c;
}

TEST_F(PipelineCascadeE2ETest, AFanoutAveragesItsBranches) {
  const std::vector<double> mlp = Logits("digits-mlp", 0, 8);
  const std::vector<double> cnn = Logits("digits-cnn", 0, 8);
  const std::vector<double> mean = Logits("digits-ensemble", 0, 8);
  ASSERT_EQ(mean.size(), 80u);
  for (size_t i = 0; i < mean.size(); ++i) EXPECT_NEAR(mean[i], (mlp[i] + cnn[i]) / 2, 1e-4) << i;
  auto md = Rest().Get("/v2/models/digits-ensemble");
  ASSERT_EQ(md->status, 200);
  EXPECT_EQ(json::parse(md->body)["parameters"]["pipeline_steps"],
            "f=fanout:digits-mlp,digits-cnn");
}

}  // namespace
}  // namespace somm::testing
