#include "loadgen/request_builder.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>

namespace somm::loadgen {
namespace {

using ::testing::HasSubstr;

constexpr char kDigit[] =
    R"({"inputs":[{"name":"pixels","shape":[1,4],"datatype":"FP32","data":[1,2,3,4]}]})";

TEST(RequestBuilderTest, DecodesAnOipBody) {
  auto request = RequestFromJson(kDigit, "d.json");
  ASSERT_TRUE(request.ok()) << request.status().ToString();
  ASSERT_EQ(request->inputs.size(), 1u);
  EXPECT_EQ(request->inputs[0].shape, (Shape{1, 4}));
  EXPECT_EQ(SamplesPerQuery(*request), 1);
}

TEST(RequestBuilderTest, BadBodyNamesTheSource) {
  auto request = RequestFromJson(R"({"inputs":[{"name":"x"}]})", "bad.json");
  ASSERT_FALSE(request.ok());
  EXPECT_THAT(request.status().message(), HasSubstr("bad.json"));
  EXPECT_FALSE(RequestFromJson(R"({"inputs":[]})", "empty.json").ok());
}

TEST(RequestBuilderTest, ReplicatesAlongDimZero) {
  auto request = RequestFromJson(kDigit, "d.json");
  ASSERT_TRUE(request.ok());
  ASSERT_TRUE(ReplicateBatch(3, &*request).ok());
  const Tensor& t = request->inputs[0];
  EXPECT_EQ(t.shape, (Shape{3, 4}));
  ASSERT_TRUE(t.CheckByteSize().ok());
  std::vector<float> v(12);
  std::memcpy(v.data(), t.data.data(), t.data.size());
  EXPECT_EQ(v, (std::vector<float>{1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4}));
  EXPECT_EQ(SamplesPerQuery(*request), 3);
}

TEST(RequestBuilderTest, ReplicateRejectsScalarsAndDisagreeingInputs) {
  InferenceRequest scalar;
  scalar.inputs.push_back(Tensor{"s", DataType::kFp32, {}, std::string(4, '\0')});
  EXPECT_FALSE(ReplicateBatch(2, &scalar).ok());
  EXPECT_TRUE(ReplicateBatch(1, &scalar).ok());
  InferenceRequest two;
  two.inputs.push_back(Tensor{"a", DataType::kInt8, {1, 2}, std::string(2, '\0')});
  two.inputs.push_back(Tensor{"b", DataType::kInt8, {2, 2}, std::string(4, '\0')});
  EXPECT_THAT(ReplicateBatch(2, &two).message(), HasSubstr("disagree on dim 0"));
}

ModelMetadata Metadata(std::vector<TensorMetadata> inputs) {
  ModelMetadata md;
  md.name = "m";
  md.inputs = std::move(inputs);
  return md;
}

TEST(RequestBuilderTest, SyntheticFillsTheBatchDimAndIsSeeded) {
  const ModelMetadata md = Metadata(
      {{"image", "FP32", {-1, 3, 4, 4}}, {"ids", "INT64", {-1, 5}}, {"half", "FP16", {-1, 2}}});
  auto a = SyntheticRequest(md, 8, 7);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_EQ(a->inputs.size(), 3u);
  EXPECT_EQ(a->inputs[0].shape, (Shape{8, 3, 4, 4}));
  EXPECT_EQ(a->inputs[1].shape, (Shape{8, 5}));
  for (const Tensor& t : a->inputs) EXPECT_TRUE(t.CheckByteSize().ok()) << t.name;
  std::vector<float> v(8 * 3 * 4 * 4);
  std::memcpy(v.data(), a->inputs[0].data.data(), a->inputs[0].data.size());
  for (const float x : v) {
    EXPECT_GE(x, 0.0f);
    EXPECT_LT(x, 1.0f);
  }
  auto b = SyntheticRequest(md, 8, 7);
  auto c = SyntheticRequest(md, 8, 8);
  EXPECT_EQ(a->inputs[0].data, b->inputs[0].data);
  EXPECT_NE(a->inputs[0].data, c->inputs[0].data);
  EXPECT_EQ(SamplesPerQuery(*a), 8);
}

TEST(RequestBuilderTest, SyntheticRefusesWhatItCannotInvent) {
  EXPECT_THAT(SyntheticRequest(Metadata({{"t", "BYTES", {-1}}}), 1, 1).status().message(),
              HasSubstr("--input"));
  EXPECT_THAT(SyntheticRequest(Metadata({{"t", "FP32", {-1, -1}}}), 1, 1).status().message(),
              HasSubstr("variable dim 1"));
  EXPECT_THAT(SyntheticRequest(Metadata({{"t", "FP32", {3}}}), 2, 1).status().message(),
              HasSubstr("no batch dim"));
  EXPECT_TRUE(SyntheticRequest(Metadata({{"t", "FP32", {3}}}), 1, 1).ok());
  EXPECT_FALSE(SyntheticRequest(Metadata({}), 1, 1).ok());
}

TEST(RequestBuilderTest, BytesFillTheOneBytesInputOneElementPerSample) {
  const std::string png("\x89PNG\r\n\x1a\n\0\xff", 10);
  auto r = BytesRequest(Metadata({{"image", "BYTES", {-1, 1}}}), png, 3);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->inputs.size(), 1u);
  const Tensor& t = r->inputs[0];
  EXPECT_EQ(t.name, "image");
  EXPECT_EQ(t.datatype, DataType::kBytes);
  EXPECT_EQ(t.shape, (Shape{3, 1}));
  EXPECT_TRUE(t.CheckByteSize().ok());
  const std::string element = std::string("\x0a\0\0\0", 4) + png;
  EXPECT_EQ(t.data, element + element + element);
  EXPECT_EQ(SamplesPerQuery(*r), 3);
  auto flat = BytesRequest(Metadata({{"image", "BYTES", {-1}}}), png, 2);
  ASSERT_TRUE(flat.ok());
  EXPECT_EQ(flat->inputs[0].shape, (Shape{2}));
}

TEST(RequestBuilderTest, BytesRefuseAModelWithoutOneBytesInput) {
  EXPECT_THAT(BytesRequest(Metadata({{"pixels", "FP32", {-1, 64}}}), "x", 1).status().message(),
              HasSubstr("takes pixels FP32 [-1,64]"));
  EXPECT_THAT(BytesRequest(Metadata({{"a", "BYTES", {-1}}, {"b", "BYTES", {-1}}}), "x", 1)
                  .status()
                  .message(),
              HasSubstr("one BYTES input"));
  EXPECT_THAT(BytesRequest(Metadata({{"a", "BYTES", {1}}}), "x", 2).status().message(),
              HasSubstr("no batch dim"));
  EXPECT_FALSE(BytesRequest(Metadata({}), "x", 1).ok());
}

TEST(RequestBuilderTest, TraceColumnsBecomeParameters) {
  InferenceRequest request;
  TraceQuery q;
  q.task = "classification/digits";
  q.latency_slo_ms = 25;
  q.max_cost = 0.5;
  ApplyTraceQuery(q, &request);
  EXPECT_EQ(std::get<std::string>(request.parameters.at("task")), "classification/digits");
  EXPECT_DOUBLE_EQ(std::get<double>(request.parameters.at("latency_slo_ms")), 25);
  EXPECT_DOUBLE_EQ(std::get<double>(request.parameters.at("max_cost")), 0.5);
  EXPECT_EQ(request.parameters.count("min_accuracy"), 0u);
}

}  // namespace
}  // namespace somm::loadgen
