// JsonWriter against the Json-tree encoders it stands in for: the text may
// differ in form, but it must read back to the same values and types.
#include "frontend/http/json_writer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "frontend/http/json_util.h"
#include "frontend/http/tensor_json.h"

namespace somm::oip::internal {
namespace {

template <typename T>
Tensor Make(DataType type, std::vector<T> values) {
  Tensor t;
  t.name = "t";
  t.datatype = type;
  t.shape = {static_cast<int64_t>(values.size())};
  t.data.resize(values.size() * sizeof(T));
  std::memcpy(t.data.data(), values.data(), t.data.size());
  return t;
}

// Both texts parsed: equal values, and equal JSON types element by element.
void ExpectSameDocument(const std::string& written, const Json& tree) {
  const Json a = Json::parse(written);
  const Json b = Json::parse(DumpJson(tree));
  EXPECT_EQ(a, b) << written << " vs " << DumpJson(tree);
  EXPECT_EQ(a.dump(), b.dump());
}

TEST(JsonWriterTest, TensorDataMatchesTheTreeEncoderForEveryType) {
  const float fnan = std::numeric_limits<float>::quiet_NaN();
  const float finf = std::numeric_limits<float>::infinity();
  std::vector<Tensor> tensors = {
      Make<float>(DataType::kFp32, {0.1f, 1.0f, -0.0f, 3.4e38f, 1e-45f, 123456789.0f, fnan, finf}),
      Make<double>(DataType::kFp64, {0.1, 2.0, 1e300, -5e-324, std::nan("")}),
      Make<int8_t>(DataType::kInt8, {-128, 0, 127}),
      Make<int16_t>(DataType::kInt16, {-32768, 32767}),
      Make<int32_t>(DataType::kInt32, {std::numeric_limits<int32_t>::min(), 7}),
      Make<int64_t>(DataType::kInt64, {std::numeric_limits<int64_t>::min(),
                                       std::numeric_limits<int64_t>::max()}),
      Make<uint8_t>(DataType::kUint8, {0, 255}),
      Make<uint16_t>(DataType::kUint16, {65535}),
      Make<uint32_t>(DataType::kUint32, {4294967295u}),
      Make<uint64_t>(DataType::kUint64, {std::numeric_limits<uint64_t>::max()}),
      Make<uint8_t>(DataType::kBool, {0, 1, 2}),
      Make<uint16_t>(DataType::kFp16, {FloatToHalf(0.5f), FloatToHalf(65504.0f)}),
      Make<uint16_t>(DataType::kBf16, {FloatToBf16(1.5f), FloatToBf16(-2.0f)}),
  };
  Tensor bytes;
  bytes.datatype = DataType::kBytes;
  for (const std::string s : {"plain", "quote\" and \\ and \n", "\xff\xfe not utf-8", ""}) {
    const uint32_t len = static_cast<uint32_t>(s.size());
    bytes.data.append(reinterpret_cast<const char*>(&len), 4);
    bytes.data += s;
  }
  tensors.push_back(bytes);
  for (const Tensor& t : tensors) {
    std::string out;
    JsonWriter(&out).TensorData(t);
    SCOPED_TRACE(DataTypeName(t.datatype));
    ExpectSameDocument(out, EncodeTensorData(t));
  }
}

TEST(JsonWriterTest, ParametersKeepTheirTypes) {
  Parameters p;
  p["b"] = true;
  p["i"] = int64_t{-3};
  p["d_whole"] = 3.0;
  p["d"] = 0.25;
  p["s"] = std::string("a \"quoted\" name");
  std::string out;
  JsonWriter(&out).Parameters(p);
  ExpectSameDocument(out, ParametersToJson(p));
  const Json read = Json::parse(out);
  EXPECT_TRUE(read["d_whole"].is_number_float());
  EXPECT_TRUE(read["i"].is_number_integer());
}

}  // namespace
}  // namespace somm::oip::internal
