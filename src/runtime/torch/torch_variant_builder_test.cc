#include "runtime/torch/torch_variant_builder.h"

#include <gtest/gtest.h>
#include <torch/script.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "runtime/torch/torch_backend.h"

namespace somm {
namespace {

namespace fs = std::filesystem;

// A small digits-style CNN: [B,64] -> [B,1,8,8] -> conv -> relu -> linear.
// The conv gives optimize_for_inference something to rewrite (MKLDNN).
constexpr char kCnnSource[] = R"(
def forward(self, x):
  y = torch.conv2d(x.reshape([-1, 1, 8, 8]), self.cw, self.cb, [1, 1], [1, 1], [1, 1], 1)
  y = torch.relu(y).flatten(1)
  return torch.linear(y, self.fw, self.fb)
)";

class TorchVariantBuilderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("somm_builder_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    torch::manual_seed(7);
    torch::jit::Module m("SmallCnn");
    m.register_parameter("cw", torch::randn({4, 1, 3, 3}) * 0.3, false);
    m.register_parameter("cb", torch::randn({4}) * 0.1, false);
    m.register_parameter("fw", torch::randn({10, 256}) * 0.05, false);
    m.register_parameter("fb", torch::randn({10}) * 0.1, false);
    m.register_buffer("steps", torch::zeros({1}, torch::kLong));
    m.define(kCnnSource);
    m.eval();
    src_ = (dir_ / "model.pt").string();
    m.save(src_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  LoadOptions Options(const std::string& path, DataType precision = DataType::kFp32) {
    LoadOptions o;
    o.model_name = "cnn";
    o.model_path = path;
    o.max_batch_size = 16;
    o.inputs = {{"pixels", DataType::kFp32, {64}}};
    o.outputs = {{"logits", DataType::kFp32, {10}}};
    o.precision = precision;
    return o;
  }

  std::vector<float> Run(const LoadOptions& o) {
    auto model = CreateTorchBackend()->Load(o);
    EXPECT_TRUE(model.ok()) << model.status().ToString();
    if (!model.ok()) return {};
    (*model)->BindToThread();
    std::vector<float> x(4 * 64);
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 37) % 17) / 16.0f;
    Tensor in{"pixels", DataType::kFp32, {4, 64}, {}};
    in.data.assign(reinterpret_cast<const char*>(x.data()), x.size() * 4);
    std::vector<Tensor> out;
    Status s = (*model)->Execute({in}, &out);
    EXPECT_TRUE(s.ok()) << s.ToString();
    if (!s.ok()) return {};
    EXPECT_EQ(out[0].datatype, DataType::kFp32);
    EXPECT_EQ(out[0].shape, (Shape{4, 10}));
    std::vector<float> y(40);
    std::memcpy(y.data(), out[0].data.data(), 160);
    return y;
  }

  fs::path dir_;
  std::string src_;
};

TEST_F(TorchVariantBuilderTest, FrozenAndOptimizedAtLoadMatchesTheOriginal) {
  const std::string dst = (dir_ / "opt.pt").string();
  Status s = CreateTorchBackend()->BuildVariant(VariantRecipe{}, src_, dst);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_TRUE(fs::exists(dst));
  EXPECT_FALSE(fs::exists(dst + ".tmp"));
  const auto want = Run(Options(src_));
  LoadOptions opt = Options(dst);
  opt.optimize_for_inference = true;
  for (const LoadOptions& o : {Options(dst), opt}) {
    const auto got = Run(o);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << i;
  }
  // The registered (unfrozen) file can be optimised at load too.
  LoadOptions original = Options(src_);
  original.optimize_for_inference = true;
  EXPECT_EQ(Run(original).size(), want.size());
}

TEST_F(TorchVariantBuilderTest, Bf16VariantKeepsTheFp32SignatureAtTheSeam) {
  const std::string dst = (dir_ / "bf16.pt").string();
  VariantRecipe recipe;
  recipe.precision = DataType::kBf16;
  Status s = BuildTorchVariant(recipe, src_, dst);
  ASSERT_TRUE(s.ok()) << s.ToString();
  const auto want = Run(Options(src_));
  const auto got = Run(Options(dst, DataType::kBf16));
  ASSERT_EQ(got.size(), want.size());
  // bf16 keeps 8 bits of mantissa: agreement to a few parts in a hundred.
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 0.05) << i;
  // Loading the bf16 file without telling the backend fails the warm-up's
  // signature check instead of answering garbage.
  auto plain = CreateTorchBackend()->Load(Options(dst));
  EXPECT_FALSE(plain.ok());
}

TEST_F(TorchVariantBuilderTest, RefusesFp16OnCpuAndNamesMissingFiles) {
  VariantRecipe fp16;
  fp16.precision = DataType::kFp16;
  EXPECT_EQ(BuildTorchVariant(fp16, src_, (dir_ / "x.pt").string()).code(),
            StatusCode::kInvalidArgument);
  Status missing =
      BuildTorchVariant(VariantRecipe{}, (dir_ / "none.pt").string(), (dir_ / "y.pt").string());
  EXPECT_EQ(missing.code(), StatusCode::kNotFound);
  EXPECT_NE(missing.message().find("none.pt"), std::string::npos);
  LoadOptions bad = Options(src_, DataType::kInt8);
  EXPECT_EQ(CreateTorchBackend()->Load(bad).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace somm
