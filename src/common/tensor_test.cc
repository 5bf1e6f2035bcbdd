#include "common/tensor.h"

#include <gtest/gtest.h>

#include <cmath>

namespace somm {
namespace {

TEST(DataTypeTest, NamesRoundTrip) {
  for (const char* name : {"BOOL", "UINT8", "INT8", "INT32", "INT64", "FP16", "FP32", "FP64"}) {
    EXPECT_STREQ(DataTypeName(DataTypeFromString(name)), name);
  }
  EXPECT_EQ(DataTypeFromString("FLOAT"), DataType::kInvalid);
  EXPECT_EQ(DataTypeSize(DataType::kFp16), 2u);
  EXPECT_EQ(DataTypeSize(DataType::kInt64), 8u);
}

TEST(TensorTest, ByteSizeMustMatchShape) {
  Tensor t{"x", DataType::kFp32, {2, 3}, std::string(24, '\0')};
  EXPECT_TRUE(t.CheckByteSize().ok());
  t.data.resize(20);
  const Status s = t.CheckByteSize();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("need 24 bytes, got 20"), std::string::npos) << s.message();
}

TEST(TensorTest, BytesTensorLengthPrefixes) {
  std::string data;
  for (std::string s : {"ab", "c"}) {
    uint32_t n = static_cast<uint32_t>(s.size());
    data.append(reinterpret_cast<const char*>(&n), 4);
    data += s;
  }
  Tensor t{"s", DataType::kBytes, {2}, data};
  EXPECT_TRUE(t.CheckByteSize().ok());
  t.shape = {3};
  EXPECT_FALSE(t.CheckByteSize().ok());
}

TEST(HalfTest, RoundTripsRepresentableValues) {
  for (float f : {0.0f, 1.0f, -2.5f, 65504.0f, 0.000061035156f, 3.140625f}) {
    EXPECT_EQ(HalfToFloat(FloatToHalf(f)), f) << f;
  }
  EXPECT_TRUE(std::isinf(HalfToFloat(FloatToHalf(1e6f))));
  EXPECT_NEAR(HalfToFloat(FloatToHalf(0.1f)), 0.1f, 1e-4);
  EXPECT_EQ(Bf16ToFloat(FloatToBf16(1.5f)), 1.5f);
}

}  // namespace
}  // namespace somm
