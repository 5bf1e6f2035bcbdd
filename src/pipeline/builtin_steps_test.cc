#include "pipeline/builtin_steps.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "image/testing/png_writer.h"

namespace somm::pipeline {
namespace {

using image::testing::PngBytes;
using image::testing::PngHeaderOnly;

Tensor BytesTensor(const std::vector<std::string>& elements) {
  Tensor t;
  t.name = "image";
  t.datatype = DataType::kBytes;
  t.shape = {static_cast<int64_t>(elements.size()), 1};
  t.data = JoinBytes(elements);
  return t;
}

std::vector<float> Floats(const Tensor& t) {
  std::vector<float> v(t.data.size() / 4);
  std::memcpy(v.data(), t.data.data(), v.size() * 4);
  return v;
}

PreprocessOptions Gray2x2() {
  PreprocessOptions o;
  o.transform.channels = 1;
  o.transform.height = o.transform.width = 2;
  o.transform.scale = 1.0f;
  return o;
}

TEST(BuiltinStepsTest, PreprocessBatchesImagesNchw) {
  const std::string a = PngBytes(2, 2, 1, {1, 2, 3, 4});
  const std::string b = PngBytes(4, 4, 1, std::vector<uint8_t>(16, 9));  // resized to 2x2
  auto out = RunPreprocess(Gray2x2(), BytesTensor({a, b}), 2);
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(out->name, "pixels");
  EXPECT_EQ(out->shape, (Shape{2, 1, 2, 2}));
  EXPECT_EQ(Floats(*out), (std::vector<float>{1, 2, 3, 4, 9, 9, 9, 9}));
}

// One hostile image refuses the batch from its header, naming it: the
// images before it are not decoded either.
TEST(BuiltinStepsTest, PreprocessRefusesAHostileImageByItsIndex) {
  const std::string good = PngBytes(2, 2, 1, {1, 2, 3, 4});
  auto huge = RunPreprocess(Gray2x2(), BytesTensor({good, PngHeaderOnly(100000, 100000)}), 2);
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(huge.status().message().find("image 1: "), std::string::npos) << huge.status().message();
  EXPECT_NE(huge.status().message().find("limit"), std::string::npos) << huge.status().message();
  auto foreign = RunPreprocess(Gray2x2(), BytesTensor({"plain text"}), 1);
  ASSERT_FALSE(foreign.ok());
  EXPECT_NE(foreign.status().message().find("image 0: not a PNG or JPEG"), std::string::npos);
  auto count = RunPreprocess(Gray2x2(), BytesTensor({good, good}), 3);
  ASSERT_FALSE(count.ok());
  EXPECT_NE(count.status().message().find("one BYTES element per image"), std::string::npos);
}

TEST(BuiltinStepsTest, SplitBytesRefusesElementsCutShort) {
  Tensor t = BytesTensor({"abc", "de"});
  auto parts = SplitBytes(t);
  ASSERT_TRUE(parts.ok());
  EXPECT_EQ(*parts, (std::vector<std::string_view>{"abc", "de"}));
  t.data.pop_back();
  EXPECT_FALSE(SplitBytes(t).ok());
  t.data = std::string("\xff\xff\xff\x7f", 4);  // declares 2 GiB
  EXPECT_FALSE(SplitBytes(t).ok());
}

Tensor Scores(int64_t batch, const std::vector<float>& v) {
  Tensor t;
  t.name = "logits";
  t.datatype = DataType::kFp32;
  t.shape = {batch, static_cast<int64_t>(v.size()) / batch};
  t.data.assign(reinterpret_cast<const char*>(v.data()), v.size() * 4);
  return t;
}

TEST(BuiltinStepsTest, SoftmaxTopKWithLabels) {
  PostprocessOptions o;
  o.top_k = 2;
  o.labels = {"zero", "one", "two"};
  // exp(0) : exp(ln 2) : exp(ln 4) = 1 : 2 : 4; the second row ties.
  auto out = RunPostprocess(o, Scores(2, {0.0f, std::log(2.0f), std::log(4.0f), 5, 5, 1}), 2);
  ASSERT_TRUE(out.ok()) << out.status().message();
  ASSERT_EQ(out->size(), 4u);
  const auto p = Floats((*out)[0]);
  EXPECT_EQ((*out)[0].shape, (Shape{2, 3}));
  EXPECT_NEAR(p[0], 1.0 / 7, 1e-6);
  EXPECT_NEAR(p[1], 2.0 / 7, 1e-6);
  EXPECT_NEAR(p[2], 4.0 / 7, 1e-6);
  EXPECT_EQ((*out)[1].name, "classes");
  EXPECT_EQ((*out)[1].shape, (Shape{2, 2}));
  std::vector<int64_t> classes(4);
  std::memcpy(classes.data(), (*out)[1].data.data(), 32);
  EXPECT_EQ(classes, (std::vector<int64_t>{2, 1, 0, 1}));  // a tie: the lower class first
  EXPECT_NEAR(Floats((*out)[2])[0], 4.0 / 7, 1e-6);
  auto labels = SplitBytes((*out)[3]);
  ASSERT_TRUE(labels.ok());
  EXPECT_EQ(*labels, (std::vector<std::string_view>{"two", "one", "zero", "one"}));
}

TEST(BuiltinStepsTest, ArgmaxWithoutSoftmax) {
  PostprocessOptions o;
  o.softmax = false;
  o.argmax = true;
  auto out = RunPostprocess(o, Scores(1, {3, 9, -1}), 1);
  ASSERT_TRUE(out.ok());
  ASSERT_EQ(out->size(), 3u);
  EXPECT_EQ(Floats((*out)[0]), (std::vector<float>{3, 9, -1}));
  EXPECT_EQ((*out)[1].name, "class");
  int64_t c = -1;
  std::memcpy(&c, (*out)[1].data.data(), 8);
  EXPECT_EQ(c, 1);
  EXPECT_EQ(Floats((*out)[2]), (std::vector<float>{9}));
}

}  // namespace
}  // namespace somm::pipeline
