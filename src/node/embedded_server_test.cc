#include "node/embedded_server.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <future>

namespace somm {
namespace {

namespace fs = std::filesystem;

// Echoes its first input as its only output. A model file whose content is
// "broken" fails to load, as a corrupt TorchScript file would.
class EchoModel : public ExecutableModel {
 public:
  Status Execute(const std::vector<Tensor>& inputs, std::vector<Tensor>* outputs) override {
    Tensor out = inputs[0];
    out.name = "y";
    outputs->push_back(std::move(out));
    return Status::Ok();
  }
};

class FakeBackend : public Backend {
 public:
  std::string Name() const override { return "fake"; }
  std::vector<Device> Devices() const override { return {Device{}}; }
  StatusOr<std::unique_ptr<ExecutableModel>> Load(const LoadOptions& o) override {
    std::ifstream in(o.model_path);
    std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!in && content.empty()) return NotFound("no file " + o.model_path);
    if (content == "broken") return InvalidArgument("model '" + o.model_name + "': corrupt file");
    return std::unique_ptr<ExecutableModel>(std::make_unique<EchoModel>());
  }
};

// Counts what the pacer test reads; records nothing else.
class CountingMetrics : public NullServingMetrics {
 public:
  void RecordPacedWait(double) override { ++paced_waits; }
  std::atomic<int> paced_waits{0};
};

constexpr char kConfig[] = R"(max_batch_size: 4
inputs: [{name: x, datatype: FP32, shape: [2]}]
outputs: [{name: y, datatype: FP32, shape: [2]}]
)";

class EmbeddedServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    repo_ = fs::temp_directory_path() / ("somm_embedded_test_" + std::to_string(getpid()));
    fs::remove_all(repo_);
  }
  void TearDown() override {
    manager_.reset();
    fs::remove_all(repo_);
  }
  void Write(const fs::path& rel, const std::string& text) {
    fs::create_directories((repo_ / rel).parent_path());
    std::ofstream(repo_ / rel) << text;
  }
  void AddModel(const std::string& name, std::vector<int> versions, const std::string& extra = "") {
    Write(fs::path(name) / "model.yaml", kConfig + extra);
    for (int v : versions) Write(fs::path(name) / std::to_string(v) / "model.pt", "ok");
  }
  void Start(std::shared_ptr<DutyCyclePacer> pacer = nullptr) {
    EmbeddedServerOptions o;
    o.repository_path = repo_.string();
    o.auto_variants = false;  // variant generation has its own tests
    o.background_pacer = std::move(pacer);
    manager_ = std::make_unique<EmbeddedServer>(o, backend_, metrics_);
    ASSERT_TRUE(manager_->Start().ok());
  }
  StatusOr<InferenceResponse> Infer(const std::string& model, const std::string& version,
                                    Tensor x) {
    InferenceRequest r;
    r.model_name = model;
    r.model_version = version;
    r.inputs.push_back(std::move(x));
    std::promise<StatusOr<InferenceResponse>> p;
    manager_->Infer(std::move(r), [&](StatusOr<InferenceResponse> res) { p.set_value(std::move(res)); });
    return p.get_future().get();
  }
  static Tensor X(Shape shape = {1, 2}, DataType type = DataType::kFp32) {
    return Tensor{"x", type, shape,
                  std::string(static_cast<size_t>(ElementCount(shape)) * DataTypeSize(type), '\1')};
  }

  fs::path repo_;
  FakeBackend backend_;
  CountingMetrics metrics_;
  std::unique_ptr<EmbeddedServer> manager_;
};

TEST_F(EmbeddedServerTest, LatestVersionIsServedByDefault) {
  AddModel("m", {1, 2, 3});
  Start();
  auto r = Infer("m", "", X());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->model_version, "3");
  EXPECT_EQ(Infer("m", "1", X()).status().code(), StatusCode::kNotFound);
  auto index = manager_->RepositoryIndex(true);
  ASSERT_EQ(index.size(), 1u);
  EXPECT_EQ(index[0].version, "3");
}

TEST_F(EmbeddedServerTest, SpecificVersionsAreAllServed) {
  AddModel("m", {1, 2, 3}, "version_policy: {specific: [1, 3]}\n");
  Start();
  EXPECT_EQ(Infer("m", "1", X())->model_version, "1");
  EXPECT_EQ(Infer("m", "3", X())->model_version, "3");
  EXPECT_EQ(Infer("m", "2", X()).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(Infer("m", "", X())->model_version, "3");
  EXPECT_EQ(Infer("m", "x1", X()).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(EmbeddedServerTest, BrokenModelsDoNotStopTheOthers) {
  AddModel("good", {1});
  Write("bad-yaml/model.yaml", "inputs: [{name: x, datatype: FLOAT, shape: [2]}]\n");
  Write("bad-yaml/1/model.pt", "ok");
  AddModel("bad-file", {1});
  Write("bad-file/1/model.pt", "broken");
  AddModel("no-versions", {});
  Start();
  EXPECT_TRUE(Infer("good", "", X()).ok());
  std::map<std::string, RepositoryEntry> rows;
  for (const auto& e : manager_->RepositoryIndex(false)) rows[e.name] = e;
  EXPECT_EQ(rows["good"].state, "READY");
  EXPECT_EQ(rows["bad-yaml"].state, "UNAVAILABLE");
  EXPECT_NE(rows["bad-yaml"].reason.find("model.yaml: field 'inputs[0].datatype'"), std::string::npos)
      << rows["bad-yaml"].reason;
  EXPECT_NE(rows["bad-file"].reason.find("corrupt file"), std::string::npos);
  EXPECT_NE(rows["no-versions"].reason.find("no version folders"), std::string::npos);
  EXPECT_EQ(Infer("bad-file", "", X()).status().code(), StatusCode::kUnavailable);
}

TEST_F(EmbeddedServerTest, InputsAreCheckedAgainstTheConfig) {
  AddModel("m", {1});
  Start();
  struct Case { Tensor x; std::string message; };
  Tensor extra = X();
  extra.name = "z";
  const std::vector<Case> cases = {
      {X({1, 3}), "has shape [1,3], expected [-1,2]"},
      {X({2}), "has shape [2], expected [-1,2]"},
      {X({1, 2}, DataType::kInt32), "datatype INT32, expected FP32"},
      {X({5, 2}), "batch size 5, allowed 1..4"},
      {extra, "missing input 'x'"},
  };
  for (const auto& c : cases) {
    auto r = Infer("m", "", c.x);
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << c.message;
    EXPECT_NE(r.status().message().find(c.message), std::string::npos) << r.status().message();
  }
  Tensor short_data = X();
  short_data.data.pop_back();
  EXPECT_NE(Infer("m", "", short_data).status().message().find("need 8 bytes, got 7"), std::string::npos);
}

TEST_F(EmbeddedServerTest, BrokenReloadKeepsTheServingVersions) {
  AddModel("m", {1});
  Start();
  Write("m/1/model.pt", "broken");
  Status s = manager_->LoadModel("m");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("previous versions keep serving"), std::string::npos) << s.message();
  EXPECT_TRUE(Infer("m", "", X()).ok());
}

TEST_F(EmbeddedServerTest, UnloadThenLoad) {
  AddModel("m", {1});
  Start();
  ASSERT_TRUE(manager_->UnloadModel("m").ok());
  EXPECT_EQ(Infer("m", "", X()).status().code(), StatusCode::kNotFound);
  auto index = manager_->RepositoryIndex(false);
  ASSERT_EQ(index.size(), 1u);
  EXPECT_EQ(index[0].reason, "unloaded");
  EXPECT_EQ(manager_->UnloadModel("m").code(), StatusCode::kNotFound);
  ASSERT_TRUE(manager_->LoadModel("m").ok());
  EXPECT_TRUE(Infer("m", "", X()).ok());
  EXPECT_EQ(manager_->LoadModel("../etc").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(manager_->LoadModel("ghost").code(), StatusCode::kNotFound);
}

// Startup loads are urgent (nothing serves yet) and never wait for the
// pacer; a later explicit load is background work and waits out the rest
// that earlier background work earned, and /metrics counts the wait.
TEST_F(EmbeddedServerTest, BackgroundLoadsWaitForThePacerStartupLoadsDoNot) {
  using Clock = DutyCyclePacer::Clock;
  AddModel("m", {1});
  auto pacer = std::make_shared<DutyCyclePacer>(0.5);
  pacer->Record(Clock::now(), std::chrono::milliseconds(300));  // 300 ms of rest owed
  Start(pacer);
  EXPECT_EQ(metrics_.paced_waits, 0);
  ASSERT_TRUE(manager_->UnloadModel("m").ok());
  pacer->Record(Clock::now(), std::chrono::milliseconds(100));
  const auto rest_until = pacer->EarliestStart(Clock::now());
  ASSERT_TRUE(manager_->LoadModel("m").ok());
  EXPECT_GE(Clock::now(), rest_until) << "the explicit load did not wait for the rest";
  EXPECT_EQ(metrics_.paced_waits, 1);
  EXPECT_TRUE(Infer("m", "", X()).ok());
}

TEST_F(EmbeddedServerTest, ShutdownRefusesNewQueries) {
  AddModel("m", {1});
  Start();
  manager_->Shutdown();
  EXPECT_FALSE(manager_->IsReady());
  EXPECT_EQ(Infer("m", "", X()).status().code(), StatusCode::kUnavailable);
}

TEST_F(EmbeddedServerTest, MetadataReportsBatchDimAndParameters) {
  AddModel("m", {1, 2}, "task: classification/toy\naccuracy: {value: 0.5, source: test}\n");
  Start();
  auto md = manager_->GetModelMetadata("m", "");
  ASSERT_TRUE(md.ok());
  EXPECT_EQ(md->inputs[0].shape, (Shape{-1, 2}));
  EXPECT_EQ(md->versions, (std::vector<std::string>{"2"}));
  EXPECT_EQ(std::get<std::string>(md->parameters["task"]), "classification/toy");
  EXPECT_EQ(std::get<double>(md->parameters["accuracy"]), 0.5);
}

}  // namespace
}  // namespace somm
