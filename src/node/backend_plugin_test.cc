// The seam of issue #42: a runtime is one folder and one registration line.
// Here a made-up runtime ("echo-test": files named echo.bin, reported as
// echo_runtime, one variant "echo-raw", an echo backend) is added by its one
// line, RegisterBackend below, and nothing else knows of it. A model of that
// platform in the repository, and one registered over the API, are placed
// on the embedded server's worker, loaded on the backend the registry makes
// for their platform, and answer queries end to end; an unknown platform is
// refused at registration with the registered ones listed.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <future>

#include "node/embedded_server.h"
#include "runtime/backend_registry.h"
#include "runtime/backend_set.h"

namespace somm {
namespace {

namespace fs = std::filesystem;

constexpr char kPlatform[] = "echo-test";
constexpr char kFile[] = "echo.bin";
constexpr char kVariant[] = "echo-raw";

std::atomic<int> backends_made{0};

// Answers each query with its first input, named as the config's output.
class EchoModel : public ExecutableModel {
 public:
  explicit EchoModel(std::string output) : output_(std::move(output)) {}
  Status Execute(const std::vector<Tensor>& inputs, std::vector<Tensor>* outputs) override {
    Tensor out = inputs[0];
    out.name = output_;
    outputs->push_back(std::move(out));
    return Status::Ok();
  }

 private:
  const std::string output_;
};

// Loads files that say "echo"; anything else is not its format.
class EchoBackend : public Backend {
 public:
  std::string Name() const override { return "echo"; }
  std::vector<Device> Devices() const override { return {Device{}}; }
  StatusOr<std::unique_ptr<ExecutableModel>> Load(const LoadOptions& o) override {
    std::ifstream in(o.model_path);
    const std::string content((std::istreambuf_iterator<char>(in)),
                              std::istreambuf_iterator<char>());
    if (content != "echo") return InvalidArgument(o.model_path + " is not an echo model");
    return std::unique_ptr<ExecutableModel>(std::make_unique<EchoModel>(o.outputs[0].name));
  }
};

BackendRegistration EchoRuntime() {
  BackendRegistration r;
  r.platform = kPlatform;
  r.model_file = kFile;
  r.metadata_platform = "echo_runtime";
  VariantKind raw;
  raw.name = kVariant;
  raw.precision = "fp32";
  raw.optimization = "as registered";
  r.variants = {raw};
  r.factory = [](const BackendOptions&) {
    ++backends_made;
    return std::make_unique<EchoBackend>();
  };
  return r;
}

// The one registration line.
const bool kEchoRegistered = RegisterBackend(EchoRuntime()).ok();

constexpr char kSignature[] = R"(max_batch_size: 4
inputs: [{name: x, datatype: FP32, shape: [2]}]
outputs: [{name: y, datatype: FP32, shape: [2]}]
)";

class BackendPluginTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(kEchoRegistered);
    repo_ = fs::temp_directory_path() / ("somm_plugin_test_" + std::to_string(getpid()));
    fs::remove_all(repo_);
    fs::create_directories(repo_);
  }
  void TearDown() override {
    server_.reset();
    fs::remove_all(repo_);
  }
  void Write(const fs::path& rel, const std::string& text) {
    fs::create_directories((repo_ / rel).parent_path());
    std::ofstream(repo_ / rel) << text;
  }
  void Start() {
    EmbeddedServerOptions o;
    o.repository_path = repo_.string();
    o.auto_variants = false;
    // Backends through the registry, as a process makes them: no fake is
    // handed in, and this binary links no libtorch.
    server_ = std::make_unique<EmbeddedServer>(o, backends_, metrics_);
    ASSERT_TRUE(server_->Start().ok());
  }
  StatusOr<InferenceResponse> Infer(const std::string& model) {
    InferenceRequest r;
    r.model_name = model;
    r.inputs.push_back(Tensor{"x", DataType::kFp32, {1, 2}, std::string("\1\2\3\4\5\6\7\10", 8)});
    std::promise<StatusOr<InferenceResponse>> p;
    server_->Infer(std::move(r), [&](StatusOr<InferenceResponse> res) { p.set_value(std::move(res)); });
    return p.get_future().get();
  }
  // The answer echoes the query, and the response says the runtime's
  // as-registered variant ran it.
  void ExpectEchoed(const std::string& model) {
    auto r = Infer(model);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_EQ(r->outputs.size(), 1u);
    EXPECT_EQ(r->outputs[0].name, "y");
    EXPECT_EQ(r->outputs[0].data, std::string("\1\2\3\4\5\6\7\10", 8));
    ASSERT_EQ(r->parameters.count("somm_variant"), 1u);
    EXPECT_EQ(std::get<std::string>(r->parameters.at("somm_variant")), model + ":1:" + kVariant);
  }

  fs::path repo_;
  BackendSet backends_;
  NullServingMetrics metrics_;
  std::unique_ptr<EmbeddedServer> server_;
};

TEST_F(BackendPluginTest, AModelOfTheNewPlatformInTheRepositoryIsServedOnItsBackend) {
  Write("echo-model/model.yaml", std::string("platform: ") + kPlatform + "\n" + kSignature);
  Write(fs::path("echo-model") / "1" / kFile, "echo");
  const int made_before = backends_made.load();
  Start();
  ExpectEchoed("echo-model");
  // One backend, made through the registry for this platform only.
  EXPECT_EQ(backends_.Made(), std::vector<std::string>{kPlatform});
  EXPECT_EQ(backends_made.load(), made_before + 1);
  auto metadata = server_->GetModelMetadata("echo-model", "");
  ASSERT_TRUE(metadata.ok()) << metadata.status().ToString();
  EXPECT_EQ(metadata->platform, "echo_runtime");
}

TEST_F(BackendPluginTest, AModelRegisteredForTheNewPlatformIsWrittenUnderItsFileAndServed) {
  Start();
  RegistrationRequest r;
  r.name = "echo-reg";
  r.task = "echo/test";
  r.platform = kPlatform;
  r.inputs = {{"x", DataType::kFp32, {2}}};
  r.outputs = {{"y", DataType::kFp32, {2}}};
  r.max_batch_size = 4;
  r.model_bytes = "echo";
  const Status registered = server_->RegisterModel(r);
  ASSERT_TRUE(registered.ok()) << registered.ToString();
  EXPECT_TRUE(fs::exists(repo_ / "echo-reg" / "1" / kFile));
  EXPECT_FALSE(fs::exists(repo_ / "echo-reg" / "1" / "model.pt"));
  ExpectEchoed("echo-reg");
}

TEST_F(BackendPluginTest, ARegistrationForAnUnknownPlatformIsRefusedWithTheList) {
  Start();
  RegistrationRequest r;
  r.name = "onnx-model";
  r.task = "echo/test";
  r.platform = "onnx";
  r.inputs = {{"x", DataType::kFp32, {2}}};
  r.outputs = {{"y", DataType::kFp32, {2}}};
  r.model_bytes = "echo";
  const Status refused = server_->RegisterModel(r);
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument);
  // Refused by the registration's own check, before anything is staged.
  EXPECT_NE(refused.message().find("registration of 'onnx-model': unsupported platform 'onnx'"),
            std::string::npos)
      << refused.message();
  EXPECT_NE(refused.message().find(std::string("'") + kPlatform + "'"), std::string::npos);
  EXPECT_NE(refused.message().find("'torchscript'"), std::string::npos);
  EXPECT_FALSE(fs::exists(repo_ / "onnx-model"));
}

}  // namespace
}  // namespace somm
