// Switch and fan-out steps through PipelineServer over a fake server: the
// case a parameter or each sample's value picks, the default, a value no
// case names, the sub-batches merged in order, the branches sent at once,
// the joins, and the binding errors.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>

#include "pipeline/builtin_steps.h"
#include "pipeline/pipeline_server.h"

namespace somm::pipeline {
namespace {

namespace fs = std::filesystem;

// Every model takes `x` FP32 [-1, 2]. "a" answers y = [x0 + 100, x1], "b"
// y = [x0 + 200, x1], "wide" y = [x0, x1, 7] (three values), "named" the
// same as "a" but as `z`. While `hold` is set, answers wait for Release().
class BranchServer : public InferenceServer {
 public:
  bool IsLive() const override { return true; }
  bool IsReady() const override { return true; }
  ServerMetadata GetServerMetadata() const override { return {"somm", "test", {}}; }
  StatusOr<ModelMetadata> GetModelMetadata(const std::string& name,
                                           const std::string&) const override {
    if (name != "a" && name != "b" && name != "wide" && name != "named") {
      return NotFound("unknown model '" + name + "'");
    }
    ModelMetadata md;
    md.name = name;
    md.versions = {"1"};
    md.inputs = {{"x", "FP32", {-1, 2}}};
    md.outputs = {{name == "named" ? "z" : "y", "FP32", {-1, name == "wide" ? 3 : 2}}};
    md.parameters["max_batch_size"] = int64_t{8};
    return md;
  }
  StatusOr<bool> IsModelReady(const std::string& name, const std::string& v) const override {
    return GetModelMetadata(name, v).ok();
  }
  void Infer(InferenceRequest request, InferCallback done) override {
    const Tensor& in = request.inputs.at(0);
    const int64_t batch = in.shape.at(0);
    std::vector<float> x(in.data.size() / 4), y;
    std::memcpy(x.data(), in.data.data(), in.data.size());
    const std::string& m = request.model_name;
    for (int64_t i = 0; i < batch; ++i) {
      const float x0 = x[static_cast<size_t>(i * 2)], x1 = x[static_cast<size_t>(i * 2 + 1)];
      if (m == "wide") {
        y.insert(y.end(), {x0, x1, 7});
      } else {
        y.insert(y.end(), {x0 + (m == "b" ? 200.0f : 100.0f), x1});
      }
    }
    InferenceResponse r;
    r.model_name = m;
    r.model_version = "1";
    Tensor out;
    out.name = m == "named" ? "z" : "y";
    out.datatype = DataType::kFp32;
    out.shape = {batch, m == "wide" ? 3 : 2};
    out.data.assign(reinterpret_cast<const char*>(y.data()), y.size() * 4);
    r.outputs.push_back(std::move(out));
    r.parameters["somm"] = std::string("decision=default compute_us=5 reason=test");
    std::unique_lock<std::mutex> lock(mu);
    requests.push_back(request);
    if (hold) {
      held.emplace_back(std::move(done), std::move(r));
      return;
    }
    lock.unlock();
    done(std::move(r));
  }
  void Release() {
    std::vector<std::pair<InferCallback, InferenceResponse>> go;
    {
      std::lock_guard<std::mutex> lock(mu);
      go.swap(held);
      hold = false;
    }
    for (auto& [done, r] : go) done(std::move(r));
  }
  std::vector<RepositoryEntry> RepositoryIndex(bool) const override { return {}; }
  Status LoadModel(const std::string& name) override {
    return NotFound("unknown model '" + name + "'");
  }
  Status UnloadModel(const std::string& name) override {
    return NotFound("unknown model '" + name + "'");
  }

  std::mutex mu;
  bool hold = false;
  std::vector<InferenceRequest> requests;
  std::vector<std::pair<InferCallback, InferenceResponse>> held;
};

constexpr char kHead[] = R"(
inputs:
  - {name: x, datatype: FP32, shape: [2]}
  - {name: route, datatype: ROUTE_TYPE, shape: [1]}
outputs: [OUTPUTS]
steps:
  - {name: s, STEP, inputs: {x: x}}
)";

class BranchStepTest : public ::testing::Test {
 protected:
  void SetUp() override {
    repo_ = fs::temp_directory_path() / ("branch_step_test_" + std::to_string(::getpid()));
    fs::remove_all(repo_);
    const std::string y = "{name: y, datatype: FP32, shape: [2], from: s.y}";
    Write("by-param", "switch: {parameter: tier, cases: {fast: a, best: b, 7: b}}", y);
    Write("with-default", "switch: {parameter: tier, cases: {best: b}, default: a}", y);
    Write("by-input", "switch: {input: route, cases: {fast: a, best: b}}", y);
    Write("by-int", "switch: {input: route, cases: {1: a, 2: b}}", y, "INT64");
    Write("mean", "fanout: {models: [a, b], join: mean}", y);
    Write("each", "fanout: {models: [a, b]}",
          "{name: ya, datatype: FP32, shape: [2], from: s.a.y}, "
          "{name: yb, datatype: FP32, shape: [2], from: s.b.y}");
    Write("concat", "fanout: {models: [a, wide], join: concat}",
          "{name: y, datatype: FP32, shape: [5], from: s.y}");
    Write("switch-differs", "switch: {parameter: tier, cases: {fast: a, wide: wide}}", y);
    Write("switch-float", "switch: {input: route, cases: {fast: a}}", y, "FP32");
    Write("mean-differs", "fanout: {models: [a, named], join: mean}", y);
    PipelineServerOptions o;
    o.repository_path = repo_.string();
    server_ = std::make_unique<PipelineServer>(o, models_);
    server_->LoadAll();
  }
  void TearDown() override { fs::remove_all(repo_); }

  void Write(const std::string& name, const std::string& step, const std::string& outputs,
             const std::string& route_type = "BYTES") {
    fs::create_directories(repo_ / name);
    std::string text = kHead;
    text.replace(text.find("ROUTE_TYPE"), 10, route_type);
    text.replace(text.find("OUTPUTS"), 7, outputs);
    text.replace(text.find("STEP"), 4, step);
    std::ofstream(repo_ / name / "pipeline.yaml") << text;
  }

  std::string Problem(const std::string& name) {
    for (const auto& row : server_->RepositoryIndex(false)) {
      if (row.name == name) return row.state + ": " + row.reason;
    }
    return "not listed";
  }

  // Samples x = (i, 10 + i), with their routes; and the parameters.
  static InferenceRequest Request(const std::string& pipeline,
                                  const std::vector<std::string>& routes,
                                  const Parameters& params = {}) {
    InferenceRequest r;
    r.model_name = pipeline;
    r.parameters = params;
    Tensor x;
    x.name = "x";
    x.datatype = DataType::kFp32;
    x.shape = {static_cast<int64_t>(routes.size()), 2};
    for (size_t i = 0; i < routes.size(); ++i) {
      const float v[2] = {static_cast<float>(i), 10.0f + static_cast<float>(i)};
      x.data.append(reinterpret_cast<const char*>(v), 8);
    }
    Tensor route;
    route.name = "route";
    route.datatype = DataType::kBytes;
    route.shape = {static_cast<int64_t>(routes.size()), 1};
    route.data = JoinBytes(routes);
    r.inputs = {x, route};
    return r;
  }

  StatusOr<InferenceResponse> Call(InferenceRequest r) {
    StatusOr<InferenceResponse> got = Internal("no answer");
    server_->Infer(std::move(r), [&got](StatusOr<InferenceResponse> a) { got = std::move(a); });
    return got;
  }

  static std::vector<float> Floats(const Tensor& t) {
    std::vector<float> v(t.data.size() / 4);
    std::memcpy(v.data(), t.data.data(), t.data.size());
    return v;
  }

  fs::path repo_;
  BranchServer models_;
  std::unique_ptr<PipelineServer> server_;
};

TEST_F(BranchStepTest, ASwitchOnAParameterSendsTheQueryToItsCase) {
  auto a = Call(Request("by-param", {"", ""}, {{"tier", std::string("best")}}));
  ASSERT_TRUE(a.ok()) << a.status().message() << " " << Problem("by-param");
  EXPECT_EQ(Floats(a->outputs.at(0)), (std::vector<float>{200, 10, 201, 11}));
  const std::string why = std::get<std::string>(a->parameters.at("somm_step_s"));
  EXPECT_NE(why.find("switch=parameter:tier value=best model=b; b: model=b:1 rows=2"),
            std::string::npos)
      << why;
  // An integer parameter matches its decimal case.
  a = Call(Request("by-param", {""}, {{"tier", int64_t{7}}}));
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(Floats(a->outputs.at(0))[0], 200);
  auto md = server_->GetModelMetadata("by-param", "");
  ASSERT_TRUE(md.ok());
  EXPECT_EQ(std::get<std::string>(md->parameters.at("switch_s")),
            "parameter=tier fast->a best->b 7->b");
}

TEST_F(BranchStepTest, AValueNoCaseNamesIsRefusedNamingTheStepUnlessThereIsADefault) {
  auto a = Call(Request("by-param", {""}, {{"tier", std::string("cheap")}}));
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(a.status().message(),
            "pipeline 'by-param' step 's': parameter 'tier' is 'cheap', which no case names "
            "(cases: fast, best, 7) and there is no default");
  a = Call(Request("by-param", {""}));
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("step 's': parameter 'tier' is missing"), std::string::npos)
      << a.status().message();
  a = Call(Request("by-input", {"fast", "slow"}));
  ASSERT_FALSE(a.ok());
  EXPECT_NE(
      a.status().message().find("step 's': sample 1: input 'route' is 'slow', which no case names"),
      std::string::npos)
      << a.status().message();
  // With a default: anything else, or nothing, goes there.
  for (const Parameters& p : {Parameters{{"tier", std::string("cheap")}}, Parameters{}}) {
    a = Call(Request("with-default", {""}, p));
    ASSERT_TRUE(a.ok()) << a.status().message();
    EXPECT_EQ(Floats(a->outputs.at(0))[0], 100);
  }
}

TEST_F(BranchStepTest, ASwitchOnAnInputSendsEachCaseItsSamplesAndMergesThemInOrder) {
  models_.hold = true;
  StatusOr<InferenceResponse> a = Internal("no answer");
  server_->Infer(Request("by-input", {"best", "fast", "best", "fast", "fast"}),
                 [&a](StatusOr<InferenceResponse> got) { a = std::move(got); });
  // Both cases asked before either answered.
  ASSERT_EQ(models_.requests.size(), 2u);
  EXPECT_EQ(a.status().message(), "no answer");
  for (const auto& r : models_.requests) {
    const std::vector<float> x = Floats(r.inputs.at(0));
    if (r.model_name == "a") {
      EXPECT_EQ(x, (std::vector<float>{1, 11, 3, 13, 4, 14}));  // rows 1, 3, 4
    } else {
      EXPECT_EQ(x, (std::vector<float>{0, 10, 2, 12}));  // rows 0, 2
    }
  }
  models_.Release();
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a->outputs.at(0).shape, (Shape{5, 2}));
  EXPECT_EQ(Floats(a->outputs.at(0)),
            (std::vector<float>{200, 10, 101, 11, 202, 12, 103, 13, 104, 14}));
  const std::string why = std::get<std::string>(a->parameters.at("somm_step_s"));
  EXPECT_NE(why.find("switch=input:route a=3 b=2"), std::string::npos) << why;

  // INT64 values match their decimal cases; one case for all: the batch as is.
  InferenceRequest r = Request("by-int", {"", ""});
  const int64_t routes[2] = {2, 2};
  r.inputs[1].datatype = DataType::kInt64;
  r.inputs[1].data.assign(reinterpret_cast<const char*>(routes), 16);
  models_.requests.clear();
  a = Call(std::move(r));
  ASSERT_TRUE(a.ok()) << a.status().message() << " " << Problem("by-int");
  EXPECT_EQ(Floats(a->outputs.at(0)), (std::vector<float>{200, 10, 201, 11}));
  ASSERT_EQ(models_.requests.size(), 1u);
  EXPECT_EQ(models_.requests[0].inputs[0].shape, (Shape{2, 2}));
}

TEST_F(BranchStepTest, AFanoutAsksEveryBranchAtOnceAndJoinsThem) {
  models_.hold = true;
  StatusOr<InferenceResponse> a = Internal("no answer");
  server_->Infer(Request("mean", {"", ""}),
                 [&a](StatusOr<InferenceResponse> got) { a = std::move(got); });
  ASSERT_EQ(models_.requests.size(), 2u);  // both sent before either answered
  EXPECT_EQ(a.status().message(), "no answer");
  models_.Release();
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(Floats(a->outputs.at(0)), (std::vector<float>{150, 10, 151, 11}));
  EXPECT_NE(std::get<std::string>(a->parameters.at("somm_step_s"))
                .find("fanout=a,b join=mean; a: model=a:1"),
            std::string::npos);

  a = Call(Request("each", {""}));
  ASSERT_TRUE(a.ok()) << a.status().message() << " " << Problem("each");
  ASSERT_EQ(a->outputs.size(), 2u);
  EXPECT_EQ(Floats(a->outputs[0]), (std::vector<float>{100, 10}));
  EXPECT_EQ(Floats(a->outputs[1]), (std::vector<float>{200, 10}));

  a = Call(Request("concat", {"", ""}));
  ASSERT_TRUE(a.ok()) << a.status().message() << " " << Problem("concat");
  EXPECT_EQ(a->outputs.at(0).shape, (Shape{2, 5}));
  EXPECT_EQ(Floats(a->outputs.at(0)), (std::vector<float>{100, 10, 0, 10, 7, 101, 11, 1, 11, 7}));
}

TEST_F(BranchStepTest, BindingErrorsNameTheStepAndField) {
  EXPECT_NE(Problem("switch-differs")
                .find("field 'steps[0] (step 's').switch': model 'wide' gives y FP32 [3] "
                      "where 'a' gives y FP32 [2]; a switch's models must give the same outputs"),
            std::string::npos)
      << Problem("switch-differs");
  EXPECT_NE(Problem("switch-float")
                .find("field 'steps[0] (step 's').switch.input': a switch reads one BYTES, "
                      "INT32, INT64 or BOOL element per sample, not FP32 [1]"),
            std::string::npos)
      << Problem("switch-float");
  EXPECT_NE(Problem("mean-differs")
                .find("field 'steps[0] (step 's').fanout.join': join mean needs every "
                      "model to give the same FP32 outputs"),
            std::string::npos)
      << Problem("mean-differs");
}

}  // namespace
}  // namespace somm::pipeline
