#include "router/answer_compare.h"

#include <cstring>

#include <gtest/gtest.h>

namespace somm {
namespace {

Tensor Fp32(const std::string& name, Shape shape, std::vector<float> values) {
  Tensor t;
  t.name = name;
  t.datatype = DataType::kFp32;
  t.shape = std::move(shape);
  t.data.resize(values.size() * sizeof(float));
  std::memcpy(t.data.data(), values.data(), t.data.size());
  return t;
}

TEST(AnswerCompareTest, ClassifiersAgreeOnTheirTopClassNotTheirLogits) {
  const auto a = Fp32("logits", {2, 3}, {0.1f, 2.0f, 0.3f, 5.0f, 1.0f, 0.0f});
  const auto same_top = Fp32("logits", {2, 3}, {0.0f, 1.5f, 0.9f, 9.0f, 2.0f, 1.0f});
  const auto other_top = Fp32("logits", {2, 3}, {0.0f, 1.5f, 0.9f, 0.0f, 2.0f, 1.0f});
  EXPECT_FALSE(AnswersDiffer({a}, {same_top}));
  EXPECT_TRUE(AnswersDiffer({a}, {other_top}));
}

TEST(AnswerCompareTest, OtherOutputsCompareWithinATolerance) {
  const auto a = Fp32("y", {3}, {1.0f, 100.0f, -2.0f});
  EXPECT_FALSE(AnswersDiffer({a}, {Fp32("y", {3}, {1.0005f, 100.05f, -2.0f})}));
  EXPECT_TRUE(AnswersDiffer({a}, {Fp32("y", {3}, {1.01f, 100.0f, -2.0f})}));
}

TEST(AnswerCompareTest, MissingOutputsShapesAndTypesDiffer) {
  const auto a = Fp32("y", {2}, {1.0f, 2.0f});
  EXPECT_TRUE(AnswersDiffer({a}, {}));
  EXPECT_TRUE(AnswersDiffer({a}, {Fp32("z", {2}, {1.0f, 2.0f})}));
  EXPECT_TRUE(AnswersDiffer({a}, {Fp32("y", {1, 2}, {1.0f, 2.0f})}));
  Tensor ints;
  ints.name = "y";
  ints.datatype = DataType::kInt32;
  ints.shape = {2};
  ints.data = a.data;
  EXPECT_TRUE(AnswersDiffer({a}, {ints}));
  EXPECT_FALSE(AnswersDiffer({ints}, {ints}));
}

}  // namespace
}  // namespace somm
