// Pipeline logic against a fake Backend: no libtorch, runs in milliseconds.
// The real-TorchScript tests are in variant_pipeline_torch_test.cc.
#include "variants/variant_pipeline.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "common/host_probe.h"
#include "common/subprocess.h"
#include "runtime/torch/torch_registration.h"
#include "variants/validation_data.h"

namespace somm {
namespace {

namespace fs = std::filesystem;

std::string ReadAll(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void WriteAll(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
}

// A "model" whose file says how it behaves: "right" answers the label that
// its input carries (input [B,1] = label), "wrong" answers label + 1.
class FakeModel : public ExecutableModel {
 public:
  explicit FakeModel(bool right) : right_(right) {}
  void BindToThread() override { bound_thread = std::this_thread::get_id(); }
  Status Execute(const std::vector<Tensor>& inputs, std::vector<Tensor>* outputs) override {
    const int64_t b = inputs[0].shape[0];
    Tensor out{"logits", DataType::kFp32, {b, 10}, std::string(static_cast<size_t>(b) * 40, '\0')};
    for (int64_t i = 0; i < b; ++i) {
      float label;
      std::memcpy(&label, inputs[0].data.data() + i * 4, 4);
      const int64_t answer = (static_cast<int64_t>(label) + (right_ ? 0 : 1)) % 10;
      const float one = 1.0f;
      std::memcpy(out.data.data() + (i * 10 + answer) * 4, &one, 4);
    }
    *outputs = {std::move(out)};
    return Status::Ok();
  }
  std::thread::id bound_thread;

 private:
  const bool right_;
};

class FakeBackend : public Backend {
 public:
  std::string Name() const override { return "fake"; }
  std::vector<Device> Devices() const override { return {Device{}}; }
  StatusOr<std::unique_ptr<ExecutableModel>> Load(const LoadOptions& o) override {
    const std::string text = ReadAll(o.model_path);
    {
      std::lock_guard<std::mutex> lock(mu);
      loads.push_back(o);
      load_threads.insert(std::this_thread::get_id());
    }
    if (text == "broken") return InvalidArgument("cannot load " + o.model_path);
    const bool wrong = text == "wrong" || (o.optimize_for_inference && optimized_is_wrong);
    return std::unique_ptr<ExecutableModel>(std::make_unique<FakeModel>(!wrong));
  }
  Status BuildVariant(const VariantRecipe& recipe, const std::string& src,
                      const std::string& dst) override {
    std::string text = ReadAll(src);
    if (recipe.precision == DataType::kBf16 && bf16_is_broken) text = "broken";
    WriteAll(dst, text);
    return Status::Ok();
  }

  bool optimized_is_wrong = false;
  bool bf16_is_broken = false;
  std::mutex mu;
  std::vector<LoadOptions> loads;
  std::set<std::thread::id> load_threads;
};

class VariantPipelineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("somm_variants_test_" + std::to_string(::getpid()));
    fs::remove_all(root_);
    model_dir_ = root_ / "repo" / "fake-model";
    WriteAll(model_dir_ / "1" / "model.pt", "right");
    config_.name = "fake-model";
    config_.max_batch_size = 8;
    config_.inputs = {{"label", DataType::kFp32, {1}}};
    config_.outputs = {{"logits", DataType::kFp32, {10}}};
    options_.variants_root = (root_ / "repo" / ".somm" / "variants").string();
    options_.hardware = {{DeviceKind::kCpu, 0, 1}, {DeviceKind::kCpu, 0, 2}};
    options_.profile_batches = {1, 8};
    options_.runs_per_point = 3;
    options_.cpu_features = CpuFeatures{};
  }
  void TearDown() override { fs::remove_all(root_); }

  // n samples whose single input value is the label, i % 10.
  void WriteValidation(int n) {
    std::string inputs, labels;
    for (int i = 0; i < n; ++i) {
      const float x = static_cast<float>(i % 10);
      const int64_t y = i % 10;
      inputs.append(reinterpret_cast<const char*>(&x), 4);
      labels.append(reinterpret_cast<const char*>(&y), 8);
    }
    const fs::path dir = model_dir_ / "1" / "validation";
    WriteAll(dir / "inputs.bin", inputs);
    WriteAll(dir / "labels.bin", labels);
    WriteAll(dir / "meta.json", R"({"count": )" + std::to_string(n) +
                                    R"(, "input": "label", "datatype": "FP32", "shape": [1],
                                    "labels_datatype": "INT64"})");
  }

  // A fake quantisation tool run by /bin/sh instead of python.
  void WriteTool(const std::string& script) {
    WriteAll(root_ / "tools" / "quantize_dynamic.py", script);
    options_.python = "/bin/sh";
    options_.tools_dir = (root_ / "tools").string();
  }

  StatusOr<VariantSet> Run() {
    return GenerateAndProfile(config_, 1, model_dir_.string(), backend_, options_,
                              [this](const VariantProgress& p) { progress_.push_back(p); });
  }

  static const VariantProfile* Find(const VariantSet& set, const std::string& variant) {
    for (const auto& p : set.profiles) {
      if (p.variant == variant) return &p;
    }
    return nullptr;
  }
  static std::string SkipReason(const VariantSet& set, const std::string& variant) {
    for (const auto& s : set.skipped) {
      if (s.variant == variant) return s.reason;
    }
    return "";
  }

  fs::path root_, model_dir_;
  ModelConfig config_;
  VariantPipelineOptions options_;
  FakeBackend backend_;
  std::vector<VariantProgress> progress_;
};

TEST(LatencyCurveTest, FitsAStraightLineExactly) {
  const LatencyCurve c = LatencyCurve::Fit({{1, 2.5}, {2, 3.0}, {4, 4.0}, {8, 6.0}});
  EXPECT_NEAR(c.intercept_ms, 2.0, 1e-9);
  EXPECT_NEAR(c.slope_ms, 0.5, 1e-9);
  EXPECT_NEAR(c.Predict(64), 34.0, 1e-9);
  EXPECT_EQ(c.points.size(), 4u);
}

TEST(LatencyCurveTest, OnePointIsAFlatLineAndSlopeNeverGoesNegative) {
  const LatencyCurve one = LatencyCurve::Fit({{4, 3.0}});
  EXPECT_EQ(one.intercept_ms, 3.0);
  EXPECT_EQ(one.slope_ms, 0.0);
  const LatencyCurve noisy = LatencyCurve::Fit({{1, 2.0}, {8, 1.0}});
  EXPECT_EQ(noisy.slope_ms, 0.0);
  EXPECT_NEAR(noisy.intercept_ms, 1.0, 1e-9);  // batch 1 was disturbed: 8 took 1 ms
}

TEST(LatencyCurveTest, DisturbedPointsAreBoundedByLargerBatchesAndBySerialRuns) {
  // Measured on a busy machine (the demo mobilenet's cpu2 profile once):
  // batch 1 slower than batch 4, batch 8 slower than 8 single runs.
  const LatencyCurve c = LatencyCurve::Fit({{8, 1402.9}, {1, 177.9}, {2, 143.6}, {4, 101.0}});
  ASSERT_EQ(c.points.size(), 4u);
  EXPECT_EQ(c.points[0].batch, 1);            // sorted,
  EXPECT_EQ(c.points[0].latency_ms, 177.9);   // as measured
  // Fitted to 101, 101, 101, 808 (= 8 x 101): slope 3004.75 / 28.75, and
  // the negative intercept clamped to 0.
  EXPECT_NEAR(c.slope_ms, 3004.75 / 28.75, 1e-6);
  EXPECT_EQ(c.intercept_ms, 0.0);
  EXPECT_LT(c.Predict(1), 177.9);
  EXPECT_LT(c.Predict(8), 1402.9);
  // A clean line is left alone.
  const LatencyCurve clean = LatencyCurve::Fit({{1, 2.5}, {2, 3.0}, {4, 4.0}, {8, 6.0}});
  EXPECT_NEAR(clean.intercept_ms, 2.0, 1e-9);
  EXPECT_NEAR(clean.slope_ms, 0.5, 1e-9);
}

TEST(LatencyCurveTest, MeasuredGivesThePointsWhereTheLineIsOff) {
  // The demo digits-cnn's cpu1 profile once: a line bent by batch 64 puts
  // batch 1 at 0.075 ms, measured at 0.18.
  const LatencyCurve c = LatencyCurve::Fit(
      {{1, 0.1827}, {2, 0.2952}, {4, 0.3758}, {8, 0.587}, {16, 1.0076}, {32, 1.9908}, {64, 5.047}});
  EXPECT_LT(c.Predict(1), 0.1);
  EXPECT_DOUBLE_EQ(c.Measured(1), 0.1827);
  EXPECT_DOUBLE_EQ(c.Measured(8), 0.587);
  EXPECT_DOUBLE_EQ(c.Measured(6), (0.3758 + 0.587) / 2);  // between 4 and 8
  EXPECT_DOUBLE_EQ(c.Measured(128), c.Predict(128));        // past the last: the line
  // Below the first point: the first point's time; no points: the line.
  const LatencyCurve from4 = LatencyCurve::Fit({{4, 3.0}, {8, 5.0}});
  EXPECT_DOUBLE_EQ(from4.Measured(1), 3.0);
  LatencyCurve none;
  none.intercept_ms = 1;
  none.slope_ms = 0.5;
  EXPECT_DOUBLE_EQ(none.Measured(4), 3.0);
  // A profile edited by hand with its points out of order reads sorted.
  VariantProfile p;
  p.model = "m";
  p.variant = "ts-fp32";
  HardwareProfile hp;
  hp.latency = LatencyCurve::Fit({{1, 1.0}, {4, 2.0}});
  p.hardware = {hp};
  nlohmann::json j = nlohmann::json::parse(ProfileToJson(p));
  auto& points = j["hardware"][0]["latency"]["points"];
  ASSERT_EQ(points.size(), 2u);
  std::swap(points[0], points[1]);
  auto read = ProfileFromJson(j.dump(), "edited");
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_DOUBLE_EQ(read->hardware.at(0).latency.Measured(2), 1.0 + (2.0 - 1.0) / 3);
}

TEST(HostProbeTest, ParsesBf16FlagsFromCpuinfo) {
  EXPECT_FALSE(ParseCpuFeatures("flags\t\t: fpu avx2 avx512f\n").UsefulBf16());
  EXPECT_TRUE(ParseCpuFeatures("processor: 0\nflags\t\t: fpu avx512_bf16 avx2\n").avx512_bf16);
  EXPECT_TRUE(ParseCpuFeatures("flags: amx_tile amx_bf16\n").amx_bf16);
  // A flag that merely contains the name does not count.
  EXPECT_FALSE(ParseCpuFeatures("flags: xavx512_bf16y\n").UsefulBf16());
  EXPECT_GT(ResidentBytes(), 0);
}

TEST(SubprocessTest, CollectsOutputAndExitCode) {
  auto r = RunProcess({"/bin/sh", "-c", "echo out; echo err >&2; exit 3"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_NE(r->output.find("out"), std::string::npos);
  EXPECT_NE(r->output.find("err"), std::string::npos);
  EXPECT_FALSE(RunProcess({"/nonexistent/program"}).ok());
}

TEST(DefaultsTest, ProfileBatchesArePowersOfTwoUpToTheMax) {
  EXPECT_EQ(DefaultProfileBatches(64), (std::vector<int64_t>{1, 2, 4, 8, 16, 32, 64}));
  EXPECT_EQ(DefaultProfileBatches(10), (std::vector<int64_t>{1, 2, 4, 8, 10}));
  EXPECT_EQ(DefaultProfileBatches(0), (std::vector<int64_t>{1}));
  FakeBackend backend;
  const auto hw = DefaultHardware(backend);
  ASSERT_FALSE(hw.empty());
  EXPECT_EQ(hw[0].Name(), "cpu1");
}

TEST_F(VariantPipelineTest, MeasuresAccuracyAndMarksAVariantThatLostItUnusable) {
  WriteValidation(50);
  backend_.optimized_is_wrong = true;
  auto set = Run();
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  ASSERT_GE(set->profiles.size(), 2u);
  const VariantProfile& fp32 = set->profiles[0];
  EXPECT_EQ(fp32.variant, kVariantFp32);
  ASSERT_TRUE(fp32.accuracy.has_value());
  EXPECT_DOUBLE_EQ(*fp32.accuracy, 1.0);
  EXPECT_TRUE(fp32.usable);
  EXPECT_NE(fp32.accuracy_source.find("50 validation samples"), std::string::npos);

  const VariantProfile* opt = Find(*set, kVariantOpt);
  ASSERT_NE(opt, nullptr);
  ASSERT_TRUE(opt->accuracy.has_value());
  EXPECT_DOUBLE_EQ(*opt->accuracy, 0.0);
  EXPECT_FALSE(opt->usable);
  EXPECT_EQ(opt->unusable_reason,
            "accuracy 0.0000 is 1.0000 below ts-fp32's 1.0000 (tolerance 0.020)");
  // Unusable variants are still profiled, so an operator sees the whole picture.
  EXPECT_EQ(opt->hardware.size(), 2u);
}

TEST_F(VariantPipelineTest, ProfilesEveryVariantOnEveryConfigOnFreshThreads) {
  WriteValidation(20);
  auto set = Run();
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  for (const auto& p : set->profiles) {
    ASSERT_EQ(p.hardware.size(), 2u) << p.variant;
    EXPECT_EQ(p.hardware[0].hardware.Name(), "cpu1");
    EXPECT_EQ(p.hardware[1].hardware.Name(), "cpu2");
    for (const auto& h : p.hardware) {
      ASSERT_EQ(h.latency.points.size(), 2u);
      EXPECT_EQ(h.latency.points[1].batch, 8);
      EXPECT_GE(h.load_time_ms, 0);
    }
  }
  std::set<int> threads_seen;
  for (const auto& o : backend_.loads) threads_seen.insert(o.intra_op_threads);
  EXPECT_EQ(threads_seen, (std::set<int>{1, 2}));
  // Every load ran off the caller's thread (ids of joined threads may be
  // reused, so distinctness between configs cannot be checked this way).
  EXPECT_EQ(backend_.load_threads.count(std::this_thread::get_id()), 0u);
}

TEST_F(VariantPipelineTest, Bf16IsSkippedWhenTheCpuWouldEmulateIt) {
  auto set = Run();
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  EXPECT_EQ(Find(*set, kVariantBf16), nullptr);
  EXPECT_EQ(SkipReason(*set, kVariantBf16), "CPU lacks avx512_bf16/AMX, bf16 would be emulated");
  EXPECT_NE(SkipReason(*set, kVariantFp16Cuda).find("no CUDA"), std::string::npos);
  EXPECT_NE(SkipReason(*set, kVariantInt8).find("tools_dir"), std::string::npos);
}

TEST_F(VariantPipelineTest, Bf16IsBuiltAndLoadedAtBf16WhereTheCpuSupportsIt) {
  WriteValidation(20);
  options_.cpu_features = CpuFeatures{.avx512_bf16 = true};
  auto set = Run();
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  const VariantProfile* bf16 = Find(*set, kVariantBf16);
  ASSERT_NE(bf16, nullptr);
  EXPECT_EQ(bf16->precision, "bf16");
  EXPECT_EQ(SkipReason(*set, kVariantBf16), "");
  bool loaded_at_bf16 = false;
  for (const auto& o : backend_.loads) {
    if (o.model_path == bf16->file) loaded_at_bf16 = o.precision == DataType::kBf16;
  }
  EXPECT_TRUE(loaded_at_bf16);
}

TEST_F(VariantPipelineTest, AVariantThatFailsEverywhereIsUnusableWithTheReason) {
  options_.cpu_features = CpuFeatures{.amx_bf16 = true};
  backend_.bf16_is_broken = true;
  auto set = Run();
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  const VariantProfile* bf16 = Find(*set, kVariantBf16);
  ASSERT_NE(bf16, nullptr);
  EXPECT_FALSE(bf16->usable);
  EXPECT_NE(bf16->unusable_reason.find("failed on every hardware config"), std::string::npos);
  EXPECT_NE(bf16->unusable_reason.find("cannot load"), std::string::npos);
}

TEST_F(VariantPipelineTest, Int8ToolSayingNothingToQuantiseIsASkipWithItsReason) {
  WriteTool("echo 'loading'\necho 'the model has no Linear, LSTM or GRU layers'\nexit 3\n");
  auto set = Run();
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  EXPECT_EQ(Find(*set, kVariantInt8), nullptr);
  EXPECT_EQ(SkipReason(*set, kVariantInt8), "the model has no Linear, LSTM or GRU layers");
}

TEST_F(VariantPipelineTest, Int8ToolOutputBecomesTheVariant) {
  WriteTool("cp \"$1\" \"$2\"\necho 'dynamic int8: 3 of 3 Linear layer(s)'\n");
  auto set = Run();
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  const VariantProfile* int8 = Find(*set, kVariantInt8);
  ASSERT_NE(int8, nullptr);
  EXPECT_EQ(int8->precision, "int8");
  EXPECT_EQ(int8->optimization, "dynamic int8: 3 of 3 Linear layer(s)");
  EXPECT_FALSE(fs::exists(int8->file + ".tmp"));
}

TEST_F(VariantPipelineTest, Int8ToolCrashIsASkipNamingTheExitCode) {
  WriteTool("echo 'Traceback: boom'\nexit 1\n");
  auto set = Run();
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  EXPECT_EQ(SkipReason(*set, kVariantInt8),
            "build failed: quantize_dynamic.py exited with 1: Traceback: boom");
}

TEST_F(VariantPipelineTest, WithoutValidationDataOnlyTheOriginalKeepsItsDeclaredAccuracy) {
  config_.accuracy.value = 0.9;
  config_.accuracy.source = "paper";
  auto set = Run();
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  EXPECT_EQ(set->profiles[0].accuracy, std::optional<double>(0.9));
  EXPECT_NE(set->profiles[0].accuracy_source.find("declared in model.yaml"), std::string::npos);
  const VariantProfile* opt = Find(*set, kVariantOpt);
  ASSERT_NE(opt, nullptr);
  EXPECT_FALSE(opt->accuracy.has_value());
  EXPECT_NE(opt->accuracy_source.find("no validation data"), std::string::npos);
  EXPECT_TRUE(opt->usable);
}

TEST_F(VariantPipelineTest, MismatchedValidationDataIsReportedNotUsed) {
  WriteValidation(10);
  config_.inputs[0].shape = {2};
  auto set = Run();
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  EXPECT_FALSE(set->profiles[0].accuracy.has_value());
  EXPECT_NE(set->profiles[0].accuracy_source.find("does not match input 'label'"),
            std::string::npos);
}

TEST_F(VariantPipelineTest, ProfilesSurviveARestart) {
  WriteValidation(20);
  backend_.optimized_is_wrong = true;
  auto set = Run();
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  auto loaded = LoadVariantSet(options_.variants_root, "fake-model", 1);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  ASSERT_EQ(loaded->profiles.size(), set->profiles.size());
  for (size_t i = 0; i < set->profiles.size(); ++i) {
    const VariantProfile& a = set->profiles[i];
    const VariantProfile& b = loaded->profiles[i];
    EXPECT_EQ(ProfileToJson(a), ProfileToJson(b)) << a.variant;
    EXPECT_TRUE(fs::exists(b.file));
  }
  ASSERT_EQ(loaded->skipped.size(), set->skipped.size());
  EXPECT_EQ(loaded->skipped[0].reason, set->skipped[0].reason);
  EXPECT_EQ(LoadProfiles(options_.variants_root, "other", 1).status().code(),
            StatusCode::kNotFound);
}

TEST_F(VariantPipelineTest, ARerunRemovesVariantsItNoLongerProduces) {
  options_.cpu_features = CpuFeatures{.avx512_bf16 = true};
  ASSERT_TRUE(Run().ok());
  const fs::path bf16_dir = fs::path(options_.variants_root) / "fake-model" / "1" / kVariantBf16;
  ASSERT_TRUE(fs::exists(bf16_dir / "profile.json"));
  options_.cpu_features = CpuFeatures{};
  ASSERT_TRUE(Run().ok());
  EXPECT_FALSE(fs::exists(bf16_dir));
  auto loaded = LoadProfiles(options_.variants_root, "fake-model", 1);
  ASSERT_TRUE(loaded.ok());
  for (const auto& p : *loaded) EXPECT_NE(p.variant, kVariantBf16);
}

TEST_F(VariantPipelineTest, ReportsProgressUpToDone) {
  auto set = Run();
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  ASSERT_FALSE(progress_.empty());
  EXPECT_EQ(progress_.front().phase, "build");
  EXPECT_EQ(progress_.front().current, kVariantFp32);
  EXPECT_EQ(progress_.back().phase, "done");
  EXPECT_EQ(progress_.back().done, progress_.back().total);
  // fp32 + opt, each built once and measured on two configs.
  EXPECT_EQ(progress_.back().total, 6);
  bool saw_profile_step = false;
  for (size_t i = 1; i < progress_.size(); ++i) {
    EXPECT_GE(progress_[i].done, progress_[i - 1].done);
    saw_profile_step |= progress_[i].current == "ts-opt on cpu2";
  }
  EXPECT_TRUE(saw_profile_step);
}

TEST_F(VariantPipelineTest, PeakMemoryIsTheResidentGrowthThroughTheSeam) {
  std::atomic<int64_t> calls{0};
  // before, after load, after the max-batch run: 100 MiB, +30 MiB, +50 MiB.
  options_.resident_bytes = [&calls] {
    const int64_t step = calls++ % 3;
    return (100 + (step == 1 ? 30 : step == 2 ? 50 : 0)) * int64_t{1 << 20};
  };
  auto set = Run();
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  EXPECT_DOUBLE_EQ(set->profiles[0].hardware[0].peak_memory_mb, 50.0);
}

TEST_F(VariantPipelineTest, AMissingModelFileIsNotFound) {
  fs::remove(model_dir_ / "1" / "model.pt");
  EXPECT_EQ(Run().status().code(), StatusCode::kNotFound);
}

TEST(ValidationDataTest, InconsistentSizesAreRejectedWithTheFileName) {
  const fs::path dir =
      fs::temp_directory_path() / ("somm_validation_" + std::to_string(::getpid()));
  WriteAll(dir / "meta.json", R"({"count": 3, "input": "x", "datatype": "FP32", "shape": [2]})");
  WriteAll(dir / "inputs.bin", std::string(20, '\0'));
  WriteAll(dir / "labels.bin", std::string(24, '\0'));
  auto data = LoadValidationData(dir.string());
  EXPECT_EQ(data.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(data.status().message().find("inputs.bin"), std::string::npos);
  auto absent = LoadValidationData((dir / "nothing").string());
  ASSERT_TRUE(absent.ok());
  EXPECT_FALSE(absent->has_value());
  fs::remove_all(dir);
}

}  // namespace
}  // namespace somm
