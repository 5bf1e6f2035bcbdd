// A cascade step through PipelineServer over a fake server: the threshold
// set at load from validation data, the sub-batch sent on, the merge, the
// explanation and the load errors.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>

#include "pipeline/pipeline_server.h"

namespace somm::pipeline {
namespace {

namespace fs = std::filesystem;

// Every model takes `x` FP32 [-1, 4]: three scores and the true class.
// "cheap" answers the three scores as its logits; "best" answers 10 at the
// true class; "wrong" 10 at the next class; "four" gives four classes,
// "ints" INT64 scores.
class StagesServer : public InferenceServer {
 public:
  bool IsLive() const override { return true; }
  bool IsReady() const override { return true; }
  ServerMetadata GetServerMetadata() const override { return {"somm", "test", {}}; }
  StatusOr<ModelMetadata> GetModelMetadata(const std::string& name,
                                           const std::string&) const override {
    if (name != "cheap" && name != "best" && name != "wrong" && name != "four" && name != "ints") {
      return NotFound("unknown model '" + name + "'");
    }
    ModelMetadata md;
    md.name = name;
    md.versions = {"1", "2"};
    md.inputs = {{"x", "FP32", {-1, 4}}};
    md.outputs = {{"logits", name == "ints" ? "INT64" : "FP32", {-1, name == "four" ? 4 : 3}}};
    md.parameters["max_batch_size"] = int64_t{3};  // calibration goes in several queries
    return md;
  }
  StatusOr<bool> IsModelReady(const std::string& name, const std::string& v) const override {
    return GetModelMetadata(name, v).ok();
  }
  void Infer(InferenceRequest request, InferCallback done) override {
    {
      std::lock_guard<std::mutex> lock(mu);
      requests.push_back(request);
    }
    const Tensor& in = request.inputs.at(0);
    const int64_t batch = in.shape.at(0);
    std::vector<float> x(in.data.size() / 4), logits;
    std::memcpy(x.data(), in.data.data(), in.data.size());
    for (int64_t i = 0; i < batch; ++i) {
      const float* row = x.data() + i * 4;
      const int truth = static_cast<int>(row[3]);
      for (int c = 0; c < 3; ++c) {
        if (request.model_name == "cheap") {
          logits.push_back(row[c]);
        } else {
          const int hot = request.model_name == "wrong" ? (truth + 1) % 3 : truth;
          logits.push_back(c == hot ? 10.0f : 0.0f);
        }
      }
    }
    InferenceResponse r;
    r.model_name = request.model_name;
    r.model_version = "2";
    Tensor out;
    out.name = "logits";
    out.datatype = DataType::kFp32;
    out.shape = {batch, 3};
    out.data.assign(reinterpret_cast<const char*>(logits.data()), logits.size() * 4);
    r.outputs.push_back(std::move(out));
    r.parameters["somm"] = std::string("decision=default compute_us=7 reason=test");
    done(std::move(r));
  }
  std::vector<RepositoryEntry> RepositoryIndex(bool) const override { return {}; }
  Status LoadModel(const std::string& name) override {
    return NotFound("unknown model '" + name + "'");
  }
  Status UnloadModel(const std::string& name) override {
    return NotFound("unknown model '" + name + "'");
  }

  std::mutex mu;
  std::vector<InferenceRequest> requests;
};

// A sample cheap is sure of and right about (class `c`), or one it wavers
// on and gets wrong (true class `c`).
std::vector<float> Sure(int c) {
  std::vector<float> x = {0, 0, 0, static_cast<float>(c)};
  x[static_cast<size_t>(c)] = 8;
  return x;
}
std::vector<float> Unsure(int c) {
  std::vector<float> x = {0.1f, 0.1f, 0.1f, static_cast<float>(c)};
  x[static_cast<size_t>((c + 1) % 3)] = 0.3f;
  return x;
}

constexpr char kCascade[] = R"(
inputs: [{name: x, datatype: FP32, shape: [4]}]
outputs:
  - {name: logits, datatype: FP32, shape: [3], from: c.logits}
  - {name: stage, datatype: INT64, shape: [1], from: c.stage}
steps:
  - {name: c, cascade: {models: [cheap, SECOND], CHOICE}, inputs: {x: x}}
)";

class CascadeStepTest : public ::testing::Test {
 protected:
  void SetUp() override {
    repo_ = fs::temp_directory_path() / ("cascade_step_test_" + std::to_string(::getpid()));
    fs::remove_all(repo_);
    // Validation data of cheap's latest version (2): 6 sure, 2 unsure.
    const fs::path val = repo_ / "cheap" / "2" / "validation";
    fs::create_directories(val);
    std::vector<float> inputs;
    std::vector<int64_t> labels;
    for (int i = 0; i < 8; ++i) {
      const auto x = i % 4 == 3 ? Unsure(i % 3) : Sure(i % 3);
      inputs.insert(inputs.end(), x.begin(), x.end());
      labels.push_back(i % 3);
    }
    std::ofstream(val / "meta.json")
        << R"({"count": 8, "input": "x", "datatype": "FP32", "shape": [4]})";
    std::ofstream(val / "inputs.bin", std::ios::binary)
        .write(reinterpret_cast<const char*>(inputs.data()),
               static_cast<std::streamsize>(inputs.size() * 4));
    std::ofstream(val / "labels.bin", std::ios::binary)
        .write(reinterpret_cast<const char*>(labels.data()),
               static_cast<std::streamsize>(labels.size() * 8));
    Write("p", "best", "min_accuracy: 1.0");
    Write("unmet", "wrong", "min_accuracy: 0.9");
    Write("classes", "four", "min_accuracy: 0.9");
    Write("ints", "ints", "threshold: 0.5");
    Write("given", "best", "threshold: 0.99");
    Write("low", "best", "threshold: 0.0");
    PipelineServerOptions o;
    o.repository_path = repo_.string();
    server_ = std::make_unique<PipelineServer>(o, models_);
    server_->LoadAll();
  }
  void TearDown() override { fs::remove_all(repo_); }

  void Write(const std::string& name, const std::string& second, const std::string& choice) {
    fs::create_directories(repo_ / name);
    std::string text = kCascade;
    text.replace(text.find("SECOND"), 6, second);
    text.replace(text.find("CHOICE"), 6, choice);
    std::ofstream(repo_ / name / "pipeline.yaml") << text;
  }

  std::string Problem(const std::string& name) {
    for (const auto& row : server_->RepositoryIndex(false)) {
      if (row.name == name) return row.state + ": " + row.reason;
    }
    return "not listed";
  }

  StatusOr<InferenceResponse> Call(const std::vector<std::vector<float>>& samples,
                                   const std::string& pipeline = "p",
                                   const Parameters& params = {}) {
    InferenceRequest r;
    r.model_name = pipeline;
    r.parameters = params;
    r.caller.authenticated = true;
    r.caller.tenant = "t1";
    Tensor t;
    t.name = "x";
    t.datatype = DataType::kFp32;
    t.shape = {static_cast<int64_t>(samples.size()), 4};
    for (const auto& s : samples) t.data.append(reinterpret_cast<const char*>(s.data()), 16);
    r.inputs.push_back(std::move(t));
    StatusOr<InferenceResponse> got = Internal("no answer");
    server_->Infer(std::move(r), [&got](StatusOr<InferenceResponse> a) { got = std::move(a); });
    return got;
  }

  fs::path repo_;
  StagesServer models_;
  std::unique_ptr<PipelineServer> server_;
};

TEST_F(CascadeStepTest, TheThresholdIsSetAtLoadOnTheValidationData) {
  auto md = server_->GetModelMetadata("p", "");
  ASSERT_TRUE(md.ok()) << Problem("p");
  const std::string cal = std::get<std::string>(md->parameters.at("cascade_c"));
  // Both unsure samples must go on to meet 1.0; none of the sure ones.
  EXPECT_NE(cal.find("validation_accuracy=1.0000"), std::string::npos) << cal;
  EXPECT_NE(cal.find("reached_best=0.2500"), std::string::npos) << cal;
  EXPECT_NE(cal.find("validation=cheap/2/validation"), std::string::npos) << cal;
  EXPECT_EQ(std::get<std::string>(md->parameters.at("pipeline_steps")), "c=cascade:cheap,best");
  // Calibration ran the validation set through each stage of each pipeline
  // that binds (p, unmet, given, low), 3 samples a query at most.
  std::map<std::string, int> samples;
  for (const auto& r : models_.requests) {
    samples[r.model_name] += static_cast<int>(r.inputs[0].shape[0]);
    EXPECT_LE(r.inputs[0].shape[0], 3);
  }
  EXPECT_EQ(samples, (std::map<std::string, int>{{"best", 24}, {"cheap", 32}, {"wrong", 8}}));
}

TEST_F(CascadeStepTest, OnlyTheUnsureSamplesGoOnAndAreMergedBackInOrder) {
  models_.requests.clear();
  auto a = Call({Sure(0), Unsure(1), Sure(2), Unsure(0)});
  ASSERT_TRUE(a.ok()) << a.status().message();
  ASSERT_EQ(models_.requests.size(), 2u);
  EXPECT_EQ(models_.requests[0].model_name, "cheap");
  EXPECT_EQ(models_.requests[0].inputs[0].shape, (Shape{4, 4}));
  const InferenceRequest& second = models_.requests[1];
  EXPECT_EQ(second.model_name, "best");
  EXPECT_EQ(second.caller.tenant, "t1");  // the query's caller, to every stage
  ASSERT_EQ(second.inputs[0].shape, (Shape{2, 4}));
  std::vector<float> sent(8);
  std::memcpy(sent.data(), second.inputs[0].data.data(), 32);
  EXPECT_EQ(sent[3], 1);  // rows 1 and 3, in order
  EXPECT_EQ(sent[7], 0);

  ASSERT_EQ(a->outputs.size(), 2u);
  std::vector<float> logits(12);
  std::memcpy(logits.data(), a->outputs[0].data.data(), 48);
  EXPECT_EQ(logits[0], 8);   // row 0: cheap's
  EXPECT_EQ(logits[4], 10);  // row 1: best's, class 1
  EXPECT_EQ(logits[8], 8);   // row 2: cheap's, class 2
  EXPECT_EQ(logits[9], 10);  // row 3: best's, class 0
  std::vector<int64_t> stage(4);
  std::memcpy(stage.data(), a->outputs[1].data.data(), 32);
  EXPECT_EQ(stage, (std::vector<int64_t>{0, 1, 0, 1}));
  EXPECT_EQ(a->outputs[1].shape, (Shape{4, 1}));
  const std::string why = std::get<std::string>(a->parameters.at("somm_step_c"));
  EXPECT_NE(why.find("validation_accuracy=1.0000 validation_reached_best=0.2500 "
                     "answered_by=0,1,0,1 reached_best=2/4"),
            std::string::npos)
      << why;
  EXPECT_NE(why.find("stage1: model=best:2 rows=2"), std::string::npos) << why;

  // All sure: the second stage is not asked.
  models_.requests.clear();
  a = Call({Sure(1), Sure(2)});
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(models_.requests.size(), 1u);
}

// A query's min_accuracy is the cascade's: met by its calibration, each
// stage asked only for the accuracy it was calibrated at (the cheap one
// alone never meets it); refused when the calibration falls short.
TEST_F(CascadeStepTest, AQuerysMinAccuracyIsTheCascades) {
  models_.requests.clear();
  auto a = Call({Sure(0), Unsure(1)}, "p", {{"min_accuracy", 1.0}});
  ASSERT_TRUE(a.ok()) << a.status().message();
  ASSERT_EQ(models_.requests.size(), 2u);
  EXPECT_NEAR(std::get<double>(models_.requests[0].parameters.at("min_accuracy")), 0.75, 1e-5);
  EXPECT_NEAR(std::get<double>(models_.requests[1].parameters.at("min_accuracy")), 1.0, 1e-5);
  EXPECT_LE(std::get<double>(models_.requests[1].parameters.at("min_accuracy")), 1.0);
  // Nothing escalates under "low": 6 of 8 right.
  a = Call({Sure(0)}, "low", {{"min_accuracy", 0.9}});
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(a.status().message(),
            "pipeline 'low' step 'c': cannot meet min_accuracy=0.9000: the cascade "
            "reaches 0.7500 on its validation data");
  EXPECT_TRUE(Call({Sure(0)}, "low", {{"min_accuracy", 0.75}}).ok());
}

// Under a latency_slo_ms each stage is sent what is left of it; a budget
// already spent is refused before a stage is asked.
TEST_F(CascadeStepTest, EachStageGetsWhatIsLeftOfTheSlo) {
  models_.requests.clear();
  auto a = Call({Sure(0), Unsure(1)}, "p", {{"latency_slo_ms", 1000.0}});
  ASSERT_TRUE(a.ok()) << a.status().message();
  ASSERT_EQ(models_.requests.size(), 2u);
  double before = 1000.0;
  for (const auto& r : models_.requests) {
    const double got = std::get<double>(r.parameters.at("latency_slo_ms"));
    EXPECT_GT(got, 0);
    EXPECT_LE(got, before);  // the second stage gets no more than the first
    before = got;
  }
  a = Call({Sure(0)}, "p", {{"latency_slo_ms", 1e-6}});
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(a.status().message().find("pipeline 'p' step 'c': its latency_slo_ms"),
            std::string::npos)
      << a.status().message();
}

TEST_F(CascadeStepTest, AGivenThresholdIsUsedAndEvaluated) {
  auto md = server_->GetModelMetadata("given", "");
  ASSERT_TRUE(md.ok()) << Problem("given");
  const std::string cal = std::get<std::string>(md->parameters.at("cascade_c"));
  // 0.99 sends the unsure samples on (softmax of [8, 0, 0] tops at 0.9993).
  EXPECT_NE(cal.find("threshold=0.990000"), std::string::npos) << cal;
  EXPECT_NE(cal.find("validation_accuracy=1.0000 reached_best=0.2500"), std::string::npos) << cal;
  EXPECT_NE(cal.find("(threshold given)"), std::string::npos) << cal;
}

TEST_F(CascadeStepTest, LoadErrorsNameTheStep) {
  EXPECT_NE(
      Problem("unmet").find("UNAVAILABLE: pipeline 'unmet': field 'steps[0] (step 'c')"
                            ".cascade.min_accuracy': on cheap/2/validation, no threshold meets"),
      std::string::npos)
      << Problem("unmet");
  EXPECT_NE(Problem("classes").find("field 'steps[0] (step 'c').cascade.models[1]': model 'four' "
                                    "scores 4 classes where the first stage scores 3"),
            std::string::npos)
      << Problem("classes");
  EXPECT_NE(Problem("ints").find("cascade.models[1]': model 'ints' gives logits; a cascade stage "
                                 "gives one FP32 output"),
            std::string::npos)
      << Problem("ints");
}

}  // namespace
}  // namespace somm::pipeline
