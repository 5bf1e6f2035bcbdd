// The variant pipeline on real TorchScript: the libtorch backend, the int8
// tool run by /usr/bin/python3, and (when present) the demo digits models.
#include <gtest/gtest.h>
#include <torch/script.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "repository/model_config.h"
#include "runtime/torch/torch_backend.h"
#include "runtime/torch/torch_registration.h"
#include "variants/variant_pipeline.h"

namespace somm {
namespace {

namespace fs = std::filesystem;

constexpr char kPython[] = "/usr/bin/python3";

constexpr char kCnnSource[] = R"(
def forward(self, x):
  y = torch.conv2d(x.reshape([-1, 1, 8, 8]), self.cw, self.cb, [1, 1], [1, 1], [1, 1], 1)
  y = torch.relu(y).flatten(1)
  return torch.linear(y, self.fw, self.fb)
)";

void WriteBytes(const fs::path& p, const void* data, size_t n) {
  std::ofstream(p, std::ios::binary)
      .write(static_cast<const char*>(data), static_cast<std::streamsize>(n));
}

const VariantProfile* Find(const VariantSet& set, const std::string& variant) {
  for (const auto& p : set.profiles) {
    if (p.variant == variant) return &p;
  }
  return nullptr;
}

std::string SkipReason(const VariantSet& set, const std::string& variant) {
  for (const auto& s : set.skipped) {
    if (s.variant == variant) return s.reason;
  }
  return "";
}

class VariantPipelineTorchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("somm_variants_torch_" + std::to_string(::getpid()));
    fs::remove_all(root_);
    options_.variants_root = (root_ / ".somm" / "variants").string();
    options_.hardware = {{DeviceKind::kCpu, 0, 1}, {DeviceKind::kCpu, 0, 2}};
    options_.profile_batches = {1, 16};
    options_.runs_per_point = 3;
    options_.python = kPython;
    options_.tools_dir = std::string(SOMM_SOURCE_DIR) + "/tools";
    options_.cpu_features = CpuFeatures{};
    backend_ = CreateTorchBackend();
  }
  void TearDown() override { fs::remove_all(root_); }

  // A small CNN with validation labels taken from its own argmax, so the
  // registered model scores exactly 1.0.
  ModelConfig MakeSmallCnn(int samples) {
    const fs::path dir = root_ / "small-cnn" / "1";
    fs::create_directories(dir / "validation");
    torch::manual_seed(3);
    torch::jit::Module m("SmallCnn");
    m.register_parameter("cw", torch::randn({4, 1, 3, 3}) * 0.3, false);
    m.register_parameter("cb", torch::randn({4}) * 0.1, false);
    m.register_parameter("fw", torch::randn({10, 256}) * 0.05, false);
    m.register_parameter("fb", torch::randn({10}) * 0.1, false);
    m.define(kCnnSource);
    m.eval();
    m.save((dir / "model.pt").string());
    torch::Tensor x = torch::rand({samples, 64});
    torch::Tensor y;
    {
      torch::NoGradGuard no_grad;
      y = m.forward({x}).toTensor().argmax(1).contiguous();
    }
    WriteBytes(dir / "validation" / "inputs.bin", x.data_ptr(), x.nbytes());
    WriteBytes(dir / "validation" / "labels.bin", y.data_ptr(), y.nbytes());
    std::ofstream(dir / "validation" / "meta.json")
        << R"({"count": )" << samples
        << R"(, "input": "pixels", "datatype": "FP32", "shape": [64]})";
    ModelConfig c;
    c.name = "small-cnn";
    c.max_batch_size = 16;
    c.inputs = {{"pixels", DataType::kFp32, {64}}};
    c.outputs = {{"logits", DataType::kFp32, {10}}};
    return c;
  }

  std::vector<float> RunVariant(const ModelConfig& c, const VariantProfile& p) {
    auto model = backend_->Load(LoadOptionsForVariant(c, p, options_.hardware[0]));
    EXPECT_TRUE(model.ok()) << model.status().ToString();
    if (!model.ok()) return {};
    (*model)->BindToThread();
    Tensor in{"pixels", DataType::kFp32, {3, 64}, std::string(3 * 64 * 4, '\0')};
    for (int i = 0; i < 3 * 64; ++i) {
      const float v = static_cast<float>(i % 13) / 13.0f;
      std::memcpy(in.data.data() + i * 4, &v, 4);
    }
    std::vector<Tensor> out;
    EXPECT_TRUE((*model)->Execute({in}, &out).ok());
    std::vector<float> y(30);
    std::memcpy(y.data(), out[0].data.data(), 120);
    return y;
  }

  fs::path root_;
  VariantPipelineOptions options_;
  std::unique_ptr<Backend> backend_;
};

TEST_F(VariantPipelineTorchTest, GeneratesProfilesAndPersistsTheVariantsOfASmallModel) {
  const ModelConfig config = MakeSmallCnn(64);
  auto set = GenerateAndProfile(config, 1, (root_ / "small-cnn").string(), *backend_, options_, {});
  ASSERT_TRUE(set.ok()) << set.status().ToString();

  const VariantProfile* fp32 = Find(*set, kVariantFp32);
  const VariantProfile* opt = Find(*set, kVariantOpt);
  ASSERT_NE(fp32, nullptr);
  ASSERT_NE(opt, nullptr);
  EXPECT_EQ(fp32->accuracy, std::optional<double>(1.0));
  EXPECT_EQ(opt->accuracy, std::optional<double>(1.0));
  EXPECT_TRUE(fs::exists(opt->file));
  EXPECT_TRUE(fs::exists(fs::path(opt->file).parent_path() / "profile.json"));
  const auto a = RunVariant(config, *fp32);
  const auto b = RunVariant(config, *opt);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5) << i;

  if (fs::exists(kPython)) {
    const VariantProfile* int8 = Find(*set, kVariantInt8);
    ASSERT_NE(int8, nullptr) << SkipReason(*set, kVariantInt8);
    EXPECT_NE(int8->optimization.find("1 of 1 Linear"), std::string::npos) << int8->optimization;
    ASSERT_TRUE(int8->accuracy.has_value());
    EXPECT_EQ(int8->hardware.size(), 2u);
  }
  EXPECT_EQ(SkipReason(*set, kVariantBf16), "CPU lacks avx512_bf16/AMX, bf16 would be emulated");

  auto loaded = LoadProfiles(options_.variants_root, "small-cnn", 1);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  ASSERT_EQ(loaded->size(), set->profiles.size());
  for (size_t i = 0; i < loaded->size(); ++i) {
    EXPECT_EQ(ProfileToJson((*loaded)[i]), ProfileToJson(set->profiles[i]));
    for (const auto& h : (*loaded)[i].hardware) {
      EXPECT_GT(h.latency.Predict(16), 0);
      EXPECT_GT(h.load_time_ms, 0);
    }
  }
}

TEST_F(VariantPipelineTorchTest, Bf16VariantWhereTheCpuIsFakedToSupportIt) {
  const ModelConfig config = MakeSmallCnn(64);
  options_.cpu_features = CpuFeatures{.avx512_bf16 = true};
  options_.tools_dir.clear();
  auto set = GenerateAndProfile(config, 1, (root_ / "small-cnn").string(), *backend_, options_, {});
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  const VariantProfile* bf16 = Find(*set, kVariantBf16);
  ASSERT_NE(bf16, nullptr) << SkipReason(*set, kVariantBf16);
  EXPECT_EQ(bf16->hardware.size(), 2u) << bf16->unusable_reason;
  ASSERT_TRUE(bf16->accuracy.has_value());
  std::printf("small-cnn ts-bf16 (emulated here): accuracy %.4f usable=%d %s\n", *bf16->accuracy,
              bf16->usable, bf16->unusable_reason.c_str());
}

TEST_F(VariantPipelineTorchTest, AModelWithoutLinearLayersHasNoInt8Variant) {
  if (!fs::exists(kPython)) GTEST_SKIP() << kPython << " is absent";
  const fs::path dir = root_ / "doubler" / "1";
  fs::create_directories(dir);
  torch::jit::Module m("Doubler");
  m.define("def forward(self, x):\n  return x * 2.0\n");
  m.save((dir / "model.pt").string());
  ModelConfig config;
  config.name = "doubler";
  config.max_batch_size = 4;
  config.inputs = {{"x", DataType::kFp32, {3}}};
  config.outputs = {{"y", DataType::kFp32, {3}}};
  auto set = GenerateAndProfile(config, 1, (root_ / "doubler").string(), *backend_, options_, {});
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  EXPECT_EQ(Find(*set, kVariantInt8), nullptr);
  EXPECT_EQ(SkipReason(*set, kVariantInt8),
            "the model has no Linear, LSTM or GRU layers to quantise dynamically");
  EXPECT_NE(set->profiles[0].accuracy_source.find("no validation data"), std::string::npos);
}

// The acceptance check of the issue: every variant of the demo digits models,
// with the accuracy and latency that the selector will see.
TEST_F(VariantPipelineTorchTest, DemoDigitsModels) {
  const fs::path demo = fs::path(SOMM_SOURCE_DIR) / "models" / "demo";
  if (!fs::exists(demo / "digits-mlp" / "1" / "model.pt")) GTEST_SKIP() << "no " << demo;
  options_.profile_batches.clear();  // the defaults: 1, 2, 4, ..., 64
  options_.runs_per_point = VariantPipelineOptions().runs_per_point;
  double total_s = 0;
  for (const char* name : {"digits-logistic", "digits-mlp", "digits-cnn"}) {
    auto config = LoadModelConfig((demo / name).string());
    ASSERT_TRUE(config.ok()) << config.status().ToString();
    const auto start = std::chrono::steady_clock::now();
    auto set = GenerateAndProfile(*config, 1, (demo / name).string(), *backend_, options_, {});
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    total_s += seconds;
    ASSERT_TRUE(set.ok()) << set.status().ToString();
    std::printf("%s: %zu variants profiled on %zu configs in %.2f s\n", name, set->profiles.size(),
                options_.hardware.size(), seconds);
    for (const auto& p : set->profiles) {
      std::printf("  %-8s acc=%-7s usable=%d  %s\n", p.variant.c_str(),
                  p.accuracy ? std::to_string(*p.accuracy).substr(0, 6).c_str() : "-", p.usable,
                  p.optimization.c_str());
      for (const auto& h : p.hardware) {
        std::printf(
            "    %-5s load %6.1f ms  mem %6.1f MB  b1 %8.4f ms  b64 %8.4f ms  fit %.4f + %.5f*b\n",
            h.hardware.Name().c_str(), h.load_time_ms, h.peak_memory_mb,
            h.latency.points.front().latency_ms, h.latency.points.back().latency_ms,
            h.latency.intercept_ms, h.latency.slope_ms);
      }
    }
    for (const auto& s : set->skipped)
      std::printf("  skipped %s: %s\n", s.variant.c_str(), s.reason.c_str());
    for (const auto& w : set->warnings) std::printf("  warning: %s\n", w.c_str());

    const VariantProfile& fp32 = set->profiles[0];
    ASSERT_TRUE(fp32.accuracy.has_value());
    ASSERT_TRUE(config->accuracy.value.has_value());
    // tools/make_demo_repo.py measured the same file on the same data.
    EXPECT_NEAR(*fp32.accuracy, *config->accuracy.value, 1e-3);
    ASSERT_NE(Find(*set, kVariantOpt), nullptr);
    EXPECT_TRUE(Find(*set, kVariantOpt)->usable);
    if (fs::exists(kPython)) {
      EXPECT_NE(Find(*set, kVariantInt8), nullptr) << SkipReason(*set, kVariantInt8);
    }
  }
  std::printf("all three digits models: %.2f s\n", total_s);
}

}  // namespace
}  // namespace somm
