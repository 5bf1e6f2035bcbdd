#include "pipeline/pipeline_server.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>

#include "image/testing/png_writer.h"
#include "pipeline/builtin_steps.h"

namespace somm::pipeline {
namespace {

namespace fs = std::filesystem;

// The models a pipeline calls: "digits" (and the private "private", of
// tenant t1) take `pixels` FP32 [-1, 4] and answer `logits` FP32 [-1, 3],
// each sample's first three pixels; the task "classification/x" is served
// by "digits". Every query is recorded.
class ModelsServer : public InferenceServer {
 public:
  bool IsLive() const override { return true; }
  bool IsReady() const override { return true; }
  ServerMetadata GetServerMetadata() const override { return {"somm", "test", {}}; }
  StatusOr<ModelMetadata> GetModelMetadata(const std::string& name,
                                           const std::string& version) const override {
    if (name != "digits" && name != "private" && name != late_model) {
      return NotFound("unknown model '" + name + "'");
    }
    ModelMetadata md;
    md.name = name;
    md.versions = {"1"};
    md.inputs = {{"pixels", "FP32", {-1, 4}}};
    md.outputs = {{"logits", "FP32", {-1, 3}}};
    md.parameters["max_batch_size"] = int64_t{8};
    return md;
  }
  StatusOr<bool> IsModelReady(const std::string& name, const std::string& version) const override {
    return GetModelMetadata(name, version).ok();
  }
  StatusOr<TaskDescription> DescribeTask(const std::string& task, const Caller&) const override {
    if (task != "classification/x") return NotFound("no model serves task '" + task + "'");
    TaskDescription d;
    d.task = task;
    d.signature.inputs = {{"pixels", DataType::kFp32, {4}}};
    d.signature.outputs = {{"logits", DataType::kFp32, {3}}};
    d.signature.batched = true;
    return d;
  }
  void Infer(InferenceRequest request, InferCallback done) override {
    {
      std::lock_guard<std::mutex> lock(mu);
      requests.push_back(request);
    }
    if (!fail.ok()) return done(fail);
    const std::string model = request.task.empty() ? request.model_name : "digits";
    if (model == "private" && !request.caller.MayUse("t1")) return done(NotFound("unknown model 'private'"));
    if (model != "digits" && model != "private" && model != late_model) {
      return done(NotFound("unknown model '" + model + "'"));
    }
    const Tensor& in = request.inputs.at(0);
    const int64_t batch = in.shape.at(0);
    std::vector<float> pixels(in.data.size() / 4), logits;
    std::memcpy(pixels.data(), in.data.data(), in.data.size());
    for (int64_t i = 0; i < batch; ++i) {
      for (int c = 0; c < 3; ++c) logits.push_back(pixels[static_cast<size_t>(i * 4 + c)]);
    }
    InferenceResponse r;
    r.model_name = model;
    r.model_version = "1";
    Tensor out;
    out.name = "logits";
    out.datatype = DataType::kFp32;
    out.shape = {batch, 3};
    out.data.assign(reinterpret_cast<const char*>(logits.data()), logits.size() * 4);
    r.outputs.push_back(std::move(out));
    r.parameters["somm"] = std::string("decision=default variant=" + model + ":1:ts-fp32 reason=test");
    done(std::move(r));
  }
  StatusOr<std::vector<ModelStatistics>> GetModelStatistics(const std::string& name,
                                                            const std::string&) const override {
    ModelStatistics row;
    row.name = name.empty() ? "digits" : name;
    row.version = "1";
    return std::vector<ModelStatistics>{row};
  }
  std::vector<RepositoryEntry> RepositoryIndex(bool) const override {
    return {{"digits", "1", "READY", ""}};
  }
  Status LoadModel(const std::string& name) override { return NotFound("unknown model '" + name + "'"); }
  Status UnloadModel(const std::string& name) override { return NotFound("unknown model '" + name + "'"); }

  std::mutex mu;
  std::vector<InferenceRequest> requests;
  // A model known only once a test names it (a router's catalog filling late).
  std::string late_model;
  Status fail;
};

constexpr char kPipeline[] = R"(
inputs: [{name: image, datatype: BYTES, shape: [1]}]
outputs:
  - {name: label, datatype: BYTES, shape: [2], from: top.labels}
  - {name: logits, datatype: FP32, shape: [3], from: classify.logits}
steps:
  - {name: decode, preprocess: {channels: 1, height: 2, width: 2, scale: 1.0}, inputs: {image: image}}
  - {name: classify, model: MODEL, inputs: {pixels: decode.pixels}}
  - {name: top, postprocess: {top_k: 2, labels: labels.txt}, inputs: {logits: classify.logits}}
)";

class PipelineServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    repo_ = fs::temp_directory_path() / ("pipeline_server_test_" + std::to_string(::getpid()));
    fs::remove_all(repo_);
    Write("p", "digits");
    Write("mine", "private");
    Write("broken", "nothing");
    PipelineServerOptions o;
    o.repository_path = repo_.string();
    o.model_owner = [](const std::string& m) -> std::optional<std::string> {
      if (m == "private") return "t1";
      if (m == "digits") return "";
      return std::nullopt;
    };
    server_ = std::make_unique<PipelineServer>(o, models_);
    server_->LoadAll();
  }
  void TearDown() override { fs::remove_all(repo_); }

  void Write(const std::string& name, const std::string& model) {
    fs::create_directories(repo_ / name);
    std::string text = kPipeline;
    text.replace(text.find("MODEL"), 5, model);
    std::ofstream(repo_ / name / "pipeline.yaml") << text;
    std::ofstream(repo_ / name / "labels.txt") << "a\nb\nc\n";
  }

  static InferenceRequest Request(const std::string& pipeline, const std::vector<std::string>& images) {
    InferenceRequest r;
    r.model_name = pipeline;
    Tensor t;
    t.name = "image";
    t.datatype = DataType::kBytes;
    t.shape = {static_cast<int64_t>(images.size()), 1};
    t.data = JoinBytes(images);
    r.inputs.push_back(std::move(t));
    return r;
  }

  StatusOr<InferenceResponse> Call(InferenceRequest r) {
    StatusOr<InferenceResponse> got = Internal("no answer");
    server_->Infer(std::move(r), [&got](StatusOr<InferenceResponse> a) { got = std::move(a); });
    return got;
  }

  fs::path repo_;
  ModelsServer models_;
  std::unique_ptr<PipelineServer> server_;
};

TEST_F(PipelineServerTest, RunsTheStepsAndExplainsEach) {
  // Pixels 10, 30, 20, 0: logits 10, 30, 20; the top two are b, then c.
  auto a = Call(Request("p", {image::testing::PngBytes(2, 2, 1, {10, 30, 20, 0})}));
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a->model_name, "p");
  EXPECT_EQ(a->model_version, "1");
  ASSERT_EQ(a->outputs.size(), 2u);
  EXPECT_EQ(a->outputs[0].name, "label");
  EXPECT_EQ(a->outputs[0].shape, (Shape{1, 2}));
  auto labels = SplitBytes(a->outputs[0]);
  ASSERT_TRUE(labels.ok());
  EXPECT_EQ(*labels, (std::vector<std::string_view>{"b", "c"}));
  EXPECT_EQ(a->outputs[1].name, "logits");
  // The model got the step's input by its own name, reshaped [1,1,2,2] -> [1,4].
  ASSERT_EQ(models_.requests.size(), 1u);
  EXPECT_EQ(models_.requests[0].inputs[0].name, "pixels");
  EXPECT_EQ(models_.requests[0].inputs[0].shape, (Shape{1, 4}));
  const std::string somm = std::get<std::string>(a->parameters.at("somm"));
  EXPECT_NE(somm.find("steps=decode,classify,top"), std::string::npos) << somm;
  const std::string step = std::get<std::string>(a->parameters.at("somm_step_classify"));
  EXPECT_NE(step.find("variant=digits:1:ts-fp32"), std::string::npos) << step;
  EXPECT_NE(std::get<std::string>(a->parameters.at("somm_step_decode")).find("preprocess"), std::string::npos);
}

TEST_F(PipelineServerTest, IsAModelToClients) {
  auto md = server_->GetModelMetadata("p", "");
  ASSERT_TRUE(md.ok()) << md.status().message();
  ASSERT_EQ(md->inputs.size(), 1u);
  EXPECT_EQ(md->inputs[0].datatype, "BYTES");
  EXPECT_EQ(md->inputs[0].shape, (Shape{-1, 1}));
  EXPECT_EQ(md->outputs[0].shape, (Shape{-1, 2}));
  EXPECT_TRUE(server_->IsModelReady("p", "1").value());
  EXPECT_EQ(server_->IsModelReady("p", "2").status().code(), StatusCode::kNotFound);
  // Everything else passes through.
  EXPECT_EQ(server_->GetModelMetadata("digits", "")->inputs[0].name, "pixels");
  auto rows = server_->RepositoryIndex(false);
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0].name, "broken");
  EXPECT_EQ(rows[0].state, "UNAVAILABLE");
  EXPECT_NE(rows[0].reason.find("steps[1] (step 'classify').model"), std::string::npos) << rows[0].reason;
  EXPECT_NE(rows[0].reason.find("unknown model 'nothing'"), std::string::npos) << rows[0].reason;
  EXPECT_EQ(rows[0].reason.find(repo_.string()), std::string::npos) << rows[0].reason;
  EXPECT_EQ(rows[1].name, "digits");
  EXPECT_EQ(rows[3].name, "p");
  EXPECT_EQ(rows[3].state, "READY");
  EXPECT_EQ(Call(Request("broken", {"x"})).status().code(), StatusCode::kUnavailable);
}

// A router reads its pipelines before its catalog has the models: one that
// failed for a model not known yet binds once the model is, and one the
// repository API unloaded stays unloaded.
TEST_F(PipelineServerTest, AnUnavailablePipelineBindsOnceItsModelIsKnown) {
  const std::string png = image::testing::PngBytes(2, 2, 1, {10, 30, 20, 0});
  EXPECT_EQ(Call(Request("broken", {png})).status().code(), StatusCode::kUnavailable);
  ASSERT_TRUE(server_->UnloadModel("p").ok());
  server_->RebindUnavailable();  // nothing new: both stay as they are
  EXPECT_EQ(Call(Request("broken", {png})).status().code(), StatusCode::kUnavailable);
  models_.late_model = "nothing";
  server_->RebindUnavailable();
  auto a = Call(Request("broken", {png}));
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(server_->RepositoryIndex(false)[0].state, "READY");
  auto ready = server_->IsModelReady("p", "");
  EXPECT_TRUE(!ready.ok() || !*ready);
  EXPECT_EQ(Call(Request("p", {png})).status().code(), StatusCode::kUnavailable);
}

// Triton's statistics extension reaches the models through the pipelines
// in front of them (a pipeline keeps none of its own yet).
TEST_F(PipelineServerTest, StatisticsPassThrough) {
  auto all = server_->GetModelStatistics("", "");
  ASSERT_TRUE(all.ok()) << all.status().message();
  ASSERT_EQ(all->size(), 1u);
  EXPECT_EQ((*all)[0].name, "digits");
  EXPECT_EQ(server_->GetModelStatistics("p", "").status().code(), StatusCode::kUnimplemented);
}

TEST_F(PipelineServerTest, ErrorsNameTheStep) {
  auto hostile = Call(Request("p", {image::testing::PngHeaderOnly(100000, 100000)}));
  ASSERT_FALSE(hostile.ok());
  EXPECT_EQ(hostile.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(hostile.status().message().find("pipeline 'p' step 'decode': image 0: "), std::string::npos)
      << hostile.status().message();
  EXPECT_TRUE(models_.requests.empty());  // refused before any model ran
  models_.fail = Internal("the model threw");
  auto failed = Call(Request("p", {image::testing::PngBytes(2, 2, 1, {1, 2, 3, 4})}));
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), StatusCode::kInternal);
  EXPECT_EQ(failed.status().message(), "pipeline 'p' step 'classify': the model threw");
  auto wrong = Request("p", {"x"});
  wrong.inputs[0].name = "picture";
  EXPECT_NE(Call(std::move(wrong)).status().message().find("unknown input 'picture' (it takes image)"),
            std::string::npos);
  auto big = Call(Request("p", std::vector<std::string>(9, "x")));
  EXPECT_NE(big.status().message().find("over its max_batch_size of 8"), std::string::npos);
}

// A caller that may not see a step's model gets the answer of a pipeline
// that does not exist, word for word.
TEST_F(PipelineServerTest, HiddenStepModelAnswersAsAMissingPipeline) {
  EXPECT_EQ(server_->OwnerOf("mine"), "t1");
  EXPECT_EQ(server_->OwnerOf("p"), "");
  EXPECT_FALSE(server_->OwnerOf("digits").has_value());
  Caller other{true, "k2", "t2", false};
  auto r = Request("mine", {image::testing::PngBytes(2, 2, 1, {1, 2, 3, 4})});
  r.caller = other;
  auto hidden = Call(std::move(r));
  auto missing_request = Request("nope", {"x"});
  missing_request.caller = other;
  auto missing = Call(std::move(missing_request));
  ASSERT_FALSE(hidden.ok());
  EXPECT_EQ(hidden.status().code(), missing.status().code());
  EXPECT_EQ(hidden.status().message(), "unknown model 'mine'");
  for (const auto& asked : models_.requests) EXPECT_NE(asked.model_name, "private");
  Caller owner{true, "k1", "t1", false};
  auto mine = Request("mine", {image::testing::PngBytes(2, 2, 1, {1, 2, 3, 4})});
  mine.caller = owner;
  EXPECT_TRUE(Call(std::move(mine)).ok());
}

TEST_F(PipelineServerTest, RequirementsGoToTheModelSteps) {
  auto r = Request("p", {image::testing::PngBytes(2, 2, 1, {1, 2, 3, 4})});
  r.parameters["min_accuracy"] = 0.5;
  r.parameters["latency_slo_ms"] = 1000.0;
  r.parameters["unrelated"] = std::string("x");
  ASSERT_TRUE(Call(std::move(r)).ok());
  ASSERT_EQ(models_.requests.size(), 1u);
  const Parameters& p = models_.requests[0].parameters;
  EXPECT_EQ(std::get<double>(p.at("min_accuracy")), 0.5);
  const double left = std::get<double>(p.at("latency_slo_ms"));
  EXPECT_GT(left, 0);
  EXPECT_LE(left, 1000.0);
  EXPECT_EQ(p.count("unrelated"), 0u);
  EXPECT_EQ(std::get<std::string>(p.at("somm_explain")), "compact");
}

// With the variants' profiles, a query's latency_slo_ms is planned across
// the steps: the model step's share names the variant planned for it.
TEST_F(PipelineServerTest, TheSloIsSplitFromTheProfiles) {
  PipelineServerOptions o;
  o.repository_path = repo_.string();
  o.variant_options = [](const std::string& model, const std::string&) {
    std::vector<cluster::VariantOption> out;
    for (const auto& [variant, ms] : {std::pair<std::string, double>{"ts-fp32", 4.0}, {"ts-int8", 1.0}}) {
      cluster::VariantOption v;
      v.model = model;
      v.variant = variant;
      v.accuracy = 0.9;
      v.latency.intercept_ms = ms;
      v.latency.points = {{1, ms}};
      v.max_batch = 8;
      out.push_back(v);
    }
    return out;
  };
  PipelineServer split(o, models_);
  split.LoadAll();
  auto r = Request("p", {image::testing::PngBytes(2, 2, 1, {1, 2, 3, 4})});
  r.parameters["latency_slo_ms"] = 1000.0;
  StatusOr<InferenceResponse> a = Internal("no answer");
  split.Infer(std::move(r), [&a](StatusOr<InferenceResponse> got) { a = std::move(got); });
  ASSERT_TRUE(a.ok()) << a.status().message();
  const std::string somm = std::get<std::string>(a->parameters.at("somm"));
  EXPECT_NE(somm.find("split=planned"), std::string::npos) << somm;
  const std::string step = std::get<std::string>(a->parameters.at("somm_step_classify"));
  EXPECT_NE(step.find("planned=digits:1:ts-"), std::string::npos) << step;
  EXPECT_NE(step.find("slo_share_ms="), std::string::npos) << step;
}

}  // namespace
}  // namespace somm::pipeline
