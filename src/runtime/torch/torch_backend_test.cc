#include "runtime/torch/torch_backend.h"

#include <gtest/gtest.h>
#include <torch/script.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "runtime/torch/torch_registration.h"

namespace somm {
namespace {

namespace fs = std::filesystem;

class TorchBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("somm_torch_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Scripts `source` into a module and saves it as TorchScript.
  std::string SaveModule(const std::string& name, const std::string& source) {
    torch::jit::Module m(name);
    m.define(source);
    const std::string path = (dir_ / (name + ".pt")).string();
    m.save(path);
    return path;
  }

  LoadOptions Options(const std::string& path) {
    LoadOptions o;
    o.model_name = "m";
    o.model_path = path;
    o.max_batch_size = 8;
    o.inputs = {{"x", DataType::kFp32, {3}}};
    o.outputs = {{"y", DataType::kFp32, {3}}};
    return o;
  }

  fs::path dir_;
};

Tensor Floats(std::vector<float> v, Shape shape) {
  Tensor t{"x", DataType::kFp32, std::move(shape), {}};
  t.data.assign(reinterpret_cast<const char*>(v.data()), v.size() * 4);
  return t;
}

TEST_F(TorchBackendTest, RunsABatchAndReturnsNamedOutputs) {
  auto backend = CreateTorchBackend();
  auto model = backend->Load(Options(SaveModule("double", "def forward(self, x):\n  return x * 2 + 1\n")));
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  (*model)->BindToThread();
  std::vector<Tensor> out;
  ASSERT_TRUE((*model)->Execute({Floats({1, 2, 3, 4, 5, 6}, {2, 3})}, &out).ok());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].name, "y");
  EXPECT_EQ(out[0].shape, (Shape{2, 3}));
  std::vector<float> y(6);
  std::memcpy(y.data(), out[0].data.data(), 24);
  EXPECT_EQ(y, (std::vector<float>{3, 5, 7, 9, 11, 13}));
}

// Loads run on a background thread (SCHED_IDLE, or normal priority when a
// query waits); either way the caller gets a working model.
TEST_F(TorchBackendTest, BackgroundAndUrgentLoadsBothServe) {
  auto backend = CreateTorchBackend();
  const std::string path = SaveModule("inc", "def forward(self, x):\n  return x + 1\n");
  for (bool urgent : {false, true}) {
    LoadOptions o = Options(path);
    o.urgent = urgent;
    auto model = backend->Load(o);
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    (*model)->BindToThread();
    std::vector<Tensor> out;
    ASSERT_TRUE((*model)->Execute({Floats({1, 2, 3}, {1, 3})}, &out).ok());
    std::vector<float> y(3);
    std::memcpy(y.data(), out[0].data.data(), 12);
    EXPECT_EQ(y, (std::vector<float>{2, 3, 4})) << "urgent " << urgent;
  }
}

// Loads and unloads record the CPU time they used with the pacer, so the
// background work after them owes a rest (duty 0.1: nine times the work).
// The backend itself never waits (the worker does, worker/worker.h).
TEST_F(TorchBackendTest, LoadsAndUnloadsRecordTheirWorkWithThePacer) {
  TorchBackendOptions options;
  options.background_pacer = std::make_shared<DutyCyclePacer>(0.1);
  auto backend = CreateTorchBackend(options);
  const std::string path = SaveModule("inc", "def forward(self, x):\n  return x + 1\n");
  using Clock = DutyCyclePacer::Clock;
  const auto before = Clock::now();
  EXPECT_EQ(options.background_pacer->EarliestStart(before), before);
  auto model = backend->Load(Options(path));
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const auto after_load = Clock::now();
  const auto rest_until = options.background_pacer->EarliestStart(after_load);
  EXPECT_GT(rest_until, after_load) << "the load's work earned no rest";
  model->reset();  // the unload's work adds to the rest owed
  EXPECT_GT(options.background_pacer->EarliestStart(Clock::now()), rest_until);
}

TEST_F(TorchBackendTest, TupleOutputsMapByPosition) {
  LoadOptions o = Options(SaveModule("pair", "def forward(self, x):\n  return (x + 1, x.sum(1))\n"));
  o.outputs = {{"plus", DataType::kFp32, {3}}, {"sum", DataType::kFp32, {-1}}};
  auto model = CreateTorchBackend()->Load(o);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  std::vector<Tensor> out;
  ASSERT_TRUE((*model)->Execute({Floats({1, 2, 3}, {1, 3})}, &out).ok());
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1].name, "sum");
  float sum;
  std::memcpy(&sum, out[1].data.data(), 4);
  EXPECT_EQ(sum, 6.0f);
}

TEST_F(TorchBackendTest, MissingFileIsNotFound) {
  auto model = CreateTorchBackend()->Load(Options((dir_ / "nope.pt").string()));
  EXPECT_EQ(model.status().code(), StatusCode::kNotFound);
}

TEST_F(TorchBackendTest, GarbageFileNamesTheModel) {
  const auto path = dir_ / "garbage.pt";
  std::ofstream(path) << "not a zip archive";
  auto model = CreateTorchBackend()->Load(Options(path.string()));
  EXPECT_EQ(model.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(model.status().message().find("model 'm:1': cannot load TorchScript"),
            std::string::npos) << model.status().message();
}

TEST_F(TorchBackendTest, SignatureMismatchIsRefusedAtLoad) {
  LoadOptions o = Options(SaveModule("mm", "def forward(self, x):\n  return x.mm(x)\n"));
  auto model = CreateTorchBackend()->Load(o);  // [1,3] x [1,3] cannot multiply
  EXPECT_EQ(model.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(model.status().message().find("does not accept its declared inputs"),
            std::string::npos) << model.status().message();
}

TEST_F(TorchBackendTest, ThrowingModelBecomesInternalErrorNamingIt) {
  LoadOptions o = Options(SaveModule("picky", "def forward(self, x):\n  return x.view(-1, 3) * 1\n"));
  auto model = CreateTorchBackend()->Load(o);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  std::vector<Tensor> out;
  Status s = (*model)->Execute({Floats({1, 2, 3, 4}, {1, 4})}, &out);
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_NE(s.message().find("model 'm:1' failed"), std::string::npos) << s.message();
}

// TorchScript lets any model read a file (the server's keys, its TLS key,
// another tenant's model) and return it as its output: such a model is
// refused at load, wherever it is loaded. Without the check it loaded and
// answered with the file's bytes.
TEST_F(TorchBackendTest, AModelThatReadsOrWritesFilesIsRefusedAtLoad) {
  const fs::path secret = dir_ / "secret.bin";
  std::ofstream(secret) << "0123456789ab";
  const std::string reads = SaveModule(
      "reads", "def forward(self, x):\n"
               "  t = torch.from_file('" + secret.string() + "', False, 12, dtype=0)\n"
               "  return x + t[0:3].float()\n");
  auto model = CreateTorchBackend()->Load(Options(reads));
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(model.status().message().find("aten::from_file"), std::string::npos)
      << model.status().message();
  // In a function the method calls, and inside a branch: found all the same.
  const std::string nested = SaveModule(
      "nested", "def helper(self, x, flag: bool):\n"
                "  if flag:\n"
                "    torch.save(x, '" + (dir_ / "out.pt").string() + "')\n"
                "  return x\n"
                "def forward(self, x):\n"
                "  return self.helper(x, False)\n");
  model = CreateTorchBackend()->Load(Options(nested));
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.status().message().find("aten::save"), std::string::npos)
      << model.status().message();
  // The same arithmetic without the file loads.
  model = CreateTorchBackend()->Load(
      Options(SaveModule("plain", "def forward(self, x):\n  return x + 1\n")));
  EXPECT_TRUE(model.ok()) << model.status().ToString();
}

TEST_F(TorchBackendTest, OutputDatatypeMustMatchConfig) {
  LoadOptions o = Options(SaveModule("f64", "def forward(self, x):\n  return x.double()\n"));
  auto model = CreateTorchBackend()->Load(o);
  EXPECT_FALSE(model.ok());
  EXPECT_NE(model.status().message().find("as FP64 but its config declares FP32"),
            std::string::npos) << model.status().message();
}

TEST_F(TorchBackendTest, CpuIsAlwaysADevice) {
  auto devices = CreateTorchBackend()->Devices();
  ASSERT_FALSE(devices.empty());
  EXPECT_EQ(devices[0].kind, DeviceKind::kCpu);
}

// The registry's factory for torchscript is this library's backend: a
// binary that links libtorch can create it by platform.
TEST_F(TorchBackendTest, TheTorchScriptPlatformCreatesThisBackend) {
  auto backend = CreateBackend(kTorchScriptPlatform);
  ASSERT_TRUE(backend.ok()) << backend.status().ToString();
  EXPECT_EQ((*backend)->Name(), CreateTorchBackend()->Name());
}

}  // namespace
}  // namespace somm
