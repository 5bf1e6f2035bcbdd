#include "frontend/http/oip_json.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace somm::oip {
namespace {

template <typename T>
std::string Raw(const std::vector<T>& values) {
  std::string out(values.size() * sizeof(T), '\0');
  if (!values.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

std::string RawBytes(const std::vector<std::string>& elements) {
  std::string out;
  for (const std::string& e : elements) {
    const uint32_t n = static_cast<uint32_t>(e.size());
    out.append(reinterpret_cast<const char*>(&n), 4);
    out += e;
  }
  return out;
}

// A request body with a single input.
std::string OneInput(const std::string& datatype, const std::string& shape,
                     const std::string& data) {
  return R"({"inputs":[{"name":"x","datatype":")" + datatype + R"(","shape":)" + shape +
         R"(,"data":)" + data + "}]}";
}

StatusOr<Tensor> DecodeOne(const std::string& datatype, const std::string& shape,
                           const std::string& data) {
  StatusOr<InferenceRequest> r = DecodeInferRequest(OneInput(datatype, shape, data), {});
  if (!r.ok()) return r.status();
  return r.value().inputs.at(0);
}

void ExpectInvalid(const StatusOr<InferenceRequest>& r, const std::string& fragment) {
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find(fragment), std::string::npos) << r.status().message();
}

void ExpectInvalidOne(const std::string& datatype, const std::string& data,
                      const std::string& fragment) {
  const std::string shape =
      "[" + std::to_string(std::count(data.begin(), data.end(), ',') + 1) + "]";
  ExpectInvalid(DecodeInferRequest(OneInput(datatype, shape, data), {}), fragment);
}

TEST(DecodeInferRequestTest, ReadsEveryDatatypeFromJson) {
  struct Case {
    const char* datatype;
    const char* data;
    std::string raw;
  };
  const Case cases[] = {
      {"BOOL", "[true,false,true]", Raw<uint8_t>({1, 0, 1})},
      {"UINT8", "[0,255,7]", Raw<uint8_t>({0, 255, 7})},
      {"INT8", "[-128,127,0]", Raw<int8_t>({-128, 127, 0})},
      {"INT32", "[-2147483648,2147483647,5]", Raw<int32_t>({INT32_MIN, INT32_MAX, 5})},
      {"INT64", "[-9223372036854775808,9223372036854775807,1]",
       Raw<int64_t>({INT64_MIN, INT64_MAX, 1})},
      {"UINT64", "[18446744073709551615,0,1]", Raw<uint64_t>({UINT64_MAX, 0, 1})},
      {"FP16", "[1.5,-2,0.099975586]",
       Raw<uint16_t>({FloatToHalf(1.5f), FloatToHalf(-2.0f), FloatToHalf(0.1f)})},
      {"BF16", "[1.5,-2,3]",
       Raw<uint16_t>({FloatToBf16(1.5f), FloatToBf16(-2.0f), FloatToBf16(3.0f)})},
      {"FP32", "[0.5,-1,3.25]", Raw<float>({0.5f, -1.0f, 3.25f})},
      {"FP64", "[0.1,-1e300,2]", Raw<double>({0.1, -1e300, 2.0})},
      {"BYTES", R"(["ab","","\u00e9"])", RawBytes({"ab", "", "\xc3\xa9"})},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.datatype);
    const StatusOr<Tensor> t = DecodeOne(c.datatype, "[3]", c.data);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    EXPECT_EQ(t.value().name, "x");
    EXPECT_EQ(DataTypeName(t.value().datatype), std::string(c.datatype));
    EXPECT_EQ(t.value().shape, Shape({3}));
    EXPECT_EQ(t.value().data, c.raw);
  }
}

TEST(DecodeInferRequestTest, NestedDataIsRowMajor) {
  const StatusOr<Tensor> nested = DecodeOne("INT32", "[2,3]", "[[1,2,3],[4,5,6]]");
  const StatusOr<Tensor> flat = DecodeOne("INT32", "[2,3]", "[1,2,3,4,5,6]");
  ASSERT_TRUE(nested.ok()) << nested.status().ToString();
  ASSERT_TRUE(flat.ok());
  EXPECT_EQ(nested.value().data, Raw<int32_t>({1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(nested.value().data, flat.value().data);
}

TEST(DecodeInferRequestTest, ElementCountMustMatchShape) {
  ExpectInvalid(DecodeInferRequest(OneInput("FP32", "[2,2]", "[1,2,3]"), {}),
                "input 'x' has shape [2,2] (4 elements) but 'data' holds 3 elements");
  ExpectInvalid(DecodeInferRequest(OneInput("FP32", "[1]", "[[1],[2]]"), {}),
                "(1 elements) but 'data' holds 2");
}

TEST(DecodeInferRequestTest, ChecksElementTypesStrictly) {
  ExpectInvalidOne("BOOL", "[1]", "element 0 must be true or false for BOOL, got 1");
  ExpectInvalidOne("UINT8", "[256]", "must be an integer in [0, 255]");
  ExpectInvalidOne("UINT8", "[-1]", "for UINT8, got -1");
  ExpectInvalidOne("INT8", "[1,128]", "element 1 must be an integer in [-128, 127]");
  ExpectInvalidOne("INT32", "[1.5]", "for INT32, got 1.5");
  ExpectInvalidOne("INT32", "[1.0]", "for INT32");
  ExpectInvalidOne("INT64", "[9223372036854775808]", "for INT64");
  ExpectInvalidOne("INT64", "[true]", "for INT64, got true");
  ExpectInvalidOne("FP32", R"(["1"])", "must be a number within FP32 range");
  ExpectInvalidOne("FP32", "[1e39]", "FP32");
  ExpectInvalidOne("FP16", "[70000]", "FP16");
  ExpectInvalidOne("BF16", "[1e39]", "BF16");
  ExpectInvalidOne("FP64", "[null]", "for FP64, got null");
  ExpectInvalidOne("BYTES", "[1]", "must be a string for BYTES");
  ExpectInvalidOne("FP32", "[[1,{}]]", "element 1");
}

TEST(DecodeInferRequestTest, FloatRangeEdges) {
  // Rounds to FLT_MAX rather than overflowing, so it is accepted.
  EXPECT_TRUE(DecodeOne("FP32", "[1]", "[3.4028235e38]").ok());
  EXPECT_TRUE(DecodeOne("FP16", "[1]", "[65504]").ok());
  EXPECT_TRUE(DecodeOne("FP64", "[1]", "[1e308]").ok());
}

TEST(DecodeInferRequestTest, MalformedJsonNamesTheByte) {
  ExpectInvalid(DecodeInferRequest(R"({"inputs": [}])", {}), "malformed JSON at byte 13");
  ExpectInvalid(DecodeInferRequest("", {}), "malformed JSON at byte");
  ExpectInvalid(DecodeInferRequest(R"({"inputs":[]} trailing)", {}), "malformed JSON");
  ExpectInvalid(DecodeInferRequest("[1,2]", {}), "must be a JSON object, got array");
}

TEST(DecodeInferRequestTest, RejectsMalformedMessages) {
  ExpectInvalid(DecodeInferRequest("{}", {}), "'inputs' is required");
  ExpectInvalid(DecodeInferRequest(R"({"inputs":{}})", {}), "'inputs' must be an array");
  ExpectInvalid(DecodeInferRequest(R"({"inputs":[3]})", {}), "input 0 must be an object");
  ExpectInvalid(
      DecodeInferRequest(R"({"inputs":[{"datatype":"FP32","shape":[1],"data":[1]}]})", {}),
      "input 0: 'name' is required");
  ExpectInvalid(DecodeInferRequest(R"({"inputs":[{"name":"x","shape":[1],"data":[1]}]})", {}),
                "input 'x': 'datatype' is required");
  ExpectInvalid(DecodeInferRequest(OneInput("FLOAT", "[1]", "[1]"), {}),
                "input 'x': unknown datatype 'FLOAT'");
  ExpectInvalid(DecodeInferRequest(R"({"inputs":[{"name":"x","datatype":"FP32","data":[1]}]})", {}),
                "'shape' is required");
  ExpectInvalid(DecodeInferRequest(OneInput("FP32", "[-1]", "[1]"), {}),
                "shape dimension 0 must be a non-negative integer, got -1");
  ExpectInvalid(DecodeInferRequest(OneInput("FP32", "[1.5]", "[1]"), {}), "shape dimension 0");
  ExpectInvalid(DecodeInferRequest(OneInput("FP32", "3", "[1]"), {}), "'shape' must be an array");
  ExpectInvalid(DecodeInferRequest(OneInput("FP32", "[1]", "1"), {}),
                "'data' must be an array, got number");
  ExpectInvalid(
      DecodeInferRequest(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1]}]})", {}),
      "input 'x' has neither 'data' nor parameters.binary_data_size");
  ExpectInvalid(DecodeInferRequest(R"({"id":7,"inputs":[]})", {}), "'id' must be a string");
  ExpectInvalid(
      DecodeInferRequest(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[1]},
                                       {"name":"x","datatype":"FP32","shape":[1],"data":[2]}]})",
                         {}),
      "input 'x' appears more than once");
  ExpectInvalid(DecodeInferRequest(R"({"inputs":[],"outputs":[{"name":"y"},{"name":"y"}]})", {}),
                "requested output 'y' appears more than once");
  ExpectInvalid(DecodeInferRequest(R"({"inputs":[],"outputs":[{}]})", {}),
                "requested output 0: 'name' is required");
}

TEST(DecodeInferRequestTest, RejectsHostileShapesAndNesting) {
  ExpectInvalid(DecodeInferRequest(OneInput("FP32", "[4611686018427387904,4]", "[1]"), {}),
                "is too large");
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  ExpectInvalid(DecodeInferRequest(OneInput("FP32", "[1]", deep), {}), "nested deeper than");
}

TEST(DecodeInferRequestTest, ReadsParametersAndOutputs) {
  const StatusOr<InferenceRequest> r = DecodeInferRequest(
      R"({"id":"42","model_name":"ignored","parameters":{"latency_slo_ms":20,"min_accuracy":0.9,
          "tag":"a","binary_data_output":true},
          "inputs":[],"outputs":[{"name":"y","parameters":{"binary_data":false}}]})",
      {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const InferenceRequest& req = r.value();
  EXPECT_EQ(req.id, "42");
  EXPECT_EQ(std::get<int64_t>(req.parameters.at("latency_slo_ms")), 20);
  EXPECT_DOUBLE_EQ(std::get<double>(req.parameters.at("min_accuracy")), 0.9);
  EXPECT_EQ(std::get<std::string>(req.parameters.at("tag")), "a");
  ASSERT_EQ(req.outputs.size(), 1u);
  EXPECT_EQ(req.outputs[0].name, "y");
  const StatusOr<BinaryOutputs> binary = BinaryOutputs::FromRequest(req);
  ASSERT_TRUE(binary.ok());
  EXPECT_FALSE(binary.value().IsBinary("y"));  // the output overrides the request
  EXPECT_TRUE(binary.value().IsBinary("z"));
}

TEST(DecodeInferRequestTest, RejectsBadParameters) {
  ExpectInvalid(DecodeInferRequest(R"({"parameters":[],"inputs":[]})", {}),
                "'parameters' must be an object, got array");
  ExpectInvalid(DecodeInferRequest(R"({"parameters":{"a":{}},"inputs":[]})", {}),
                "parameter 'a' must be a string, number or boolean, got object");
  ExpectInvalid(DecodeInferRequest(R"({"parameters":{"binary_data_output":1},"inputs":[]})", {}),
                "parameter 'binary_data_output' must be a boolean");
  ExpectInvalid(
      DecodeInferRequest(
          R"({"inputs":[],"outputs":[{"name":"y","parameters":{"binary_data":"yes"}}]})", {}),
      "requested output 'y': parameter 'binary_data' must be a boolean");
}

// The binary extension example from Triton's extension_binary_data.md.
TEST(DecodeInferRequestTest, BinaryInputsComeFromTheBinarySection) {
  const std::string json = R"({"inputs":[
      {"name":"input0","shape":[2,2],"datatype":"UINT32","parameters":{"binary_data_size":16}},
      {"name":"mid","shape":[2],"datatype":"INT8","data":[1,2]},
      {"name":"input1","shape":[3],"datatype":"BOOL","parameters":{"binary_data_size":3}}]})";
  const std::string u32 = Raw<uint32_t>({1, 2, 3, 4});
  const std::string bools = Raw<uint8_t>({1, 0, 1});
  const StatusOr<InferenceRequest> r = DecodeInferRequest(json + u32 + bools, json.size());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r.value().inputs.size(), 3u);
  EXPECT_EQ(r.value().inputs[0].data, u32);
  EXPECT_EQ(r.value().inputs[1].data, Raw<int8_t>({1, 2}));
  EXPECT_EQ(r.value().inputs[2].data, bools);
}

TEST(DecodeInferRequestTest, BinarySizesAreValidated) {
  const auto body = [](const std::string& size, const std::string& shape = "[2]") {
    return R"({"inputs":[{"name":"x","shape":)" + shape +
           R"(,"datatype":"FP32","parameters":{"binary_data_size":)" + size + "}}]}";
  };
  std::string json = body("8");
  ExpectInvalid(DecodeInferRequest(json + std::string(12, '\0'), json.size()),
                "the binary section holds 12 bytes but the tensors' binary_data_size parameters "
                "add up to 8");
  ExpectInvalid(DecodeInferRequest(json + std::string(4, '\0'), json.size()),
                "input 'x': binary_data_size 8 exceeds the 4 binary bytes left in the body");
  ExpectInvalid(DecodeInferRequest(json, {}), "exceeds the 0 binary bytes");
  json = body("8", "[3]");
  ExpectInvalid(DecodeInferRequest(json + std::string(8, '\0'), json.size()),
                "input 'x' has shape [3] and datatype FP32 (3 elements of 4 bytes) but "
                "binary_data_size is 8");
  json = body("-1");
  ExpectInvalid(DecodeInferRequest(json, json.size()), "binary_data_size must be a non-negative");
  json = body("\"8\"");
  ExpectInvalid(DecodeInferRequest(json, json.size()), "binary_data_size must be a non-negative");
  json = R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[1],
             "parameters":{"binary_data_size":4}}]})";
  ExpectInvalid(DecodeInferRequest(json + std::string(4, '\0'), json.size()),
                "has both 'data' and parameters.binary_data_size");
  ExpectInvalid(DecodeInferRequest("{}", 10),
                "Inference-Header-Content-Length 10 exceeds the body "
                "size 2");
}

TEST(DecodeInferRequestTest, BinaryBytesTensorNeedsValidPrefixes) {
  const std::string json = R"({"inputs":[{"name":"s","shape":[2],"datatype":"BYTES",
                                           "parameters":{"binary_data_size":11}}]})";
  const std::string good = RawBytes({"ab", "c"});
  ASSERT_EQ(good.size(), 11u);
  const StatusOr<InferenceRequest> r = DecodeInferRequest(json + good, json.size());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r.value().inputs[0].data, good);
  std::string bad = good;
  bad[0] = 9;  // first length now runs past the end
  ExpectInvalid(DecodeInferRequest(json + bad, json.size()), "input 's'");
}

TEST(ParseHeaderLengthTest, AcceptsDigitsOnly) {
  EXPECT_EQ(ParseHeaderLength("123").value(), 123u);
  EXPECT_FALSE(ParseHeaderLength("").ok());
  EXPECT_FALSE(ParseHeaderLength("-1").ok());
  EXPECT_FALSE(ParseHeaderLength("12x").ok());
  EXPECT_FALSE(ParseHeaderLength("99999999999999999999999").ok());
}

InferenceResponse SampleResponse() {
  InferenceResponse response;
  response.model_name = "m";
  response.model_version = "1";
  response.id = "42";
  response.parameters["somm_device"] = std::string("cpu");
  response.parameters["somm_batch_size"] = int64_t{4};
  response.outputs.push_back({"probs", DataType::kFp32, {1, 3}, Raw<float>({0.1f, 0.2f, 0.7f})});
  response.outputs.push_back({"label", DataType::kInt64, {1}, Raw<int64_t>({2})});
  return response;
}

TEST(EncodeInferResponseTest, JsonByDefault) {
  const StatusOr<EncodedBody> e = EncodeInferResponse(SampleResponse(), BinaryOutputs());
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_FALSE(e.value().json_size.has_value());
  EXPECT_EQ(e.value().body,
            R"({"model_name":"m","model_version":"1","id":"42",)"
            R"("parameters":{"somm_batch_size":4,"somm_device":"cpu"},)"
            R"("outputs":[{"name":"probs","datatype":"FP32","shape":[1,3],"data":[0.1,0.2,0.7]},)"
            R"({"name":"label","datatype":"INT64","shape":[1],"data":[2]}]})");
}

TEST(EncodeInferResponseTest, BinaryOutputsFollowTheJson) {
  InferenceRequest request;
  request.parameters[kBinaryDataOutput] = true;
  request.outputs.push_back({"label", {{kBinaryData, false}}});
  const BinaryOutputs binary = BinaryOutputs::FromRequest(request).value();
  const StatusOr<EncodedBody> e = EncodeInferResponse(SampleResponse(), binary);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  ASSERT_TRUE(e.value().json_size.has_value());
  const std::string& body = e.value().body;
  const size_t json_size = *e.value().json_size;
  EXPECT_EQ(body.substr(json_size), Raw<float>({0.1f, 0.2f, 0.7f}));
  const std::string json = body.substr(0, json_size);
  EXPECT_NE(json.find(R"("parameters":{"binary_data_size":12})"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("data":[2])"), std::string::npos) << json;

  const StatusOr<InferenceResponse> back = DecodeInferResponse(body, json_size);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back.value().outputs[0].data, SampleResponse().outputs[0].data);
  EXPECT_EQ(back.value().outputs[1].data, SampleResponse().outputs[1].data);
}

TEST(EncodeInferResponseTest, EveryDatatypeRoundTripsThroughJson) {
  InferenceResponse response;
  response.model_name = "m";
  response.outputs = {
      {"b", DataType::kBool, {2}, Raw<uint8_t>({1, 0})},
      {"u8", DataType::kUint8, {2}, Raw<uint8_t>({0, 255})},
      {"i8", DataType::kInt8, {2}, Raw<int8_t>({-128, 127})},
      {"i32", DataType::kInt32, {2}, Raw<int32_t>({INT32_MIN, 3})},
      {"i64", DataType::kInt64, {2}, Raw<int64_t>({INT64_MIN, INT64_MAX})},
      {"f16", DataType::kFp16, {2}, Raw<uint16_t>({FloatToHalf(0.1f), FloatToHalf(-3.5f)})},
      {"bf16", DataType::kBf16, {2}, Raw<uint16_t>({FloatToBf16(0.1f), FloatToBf16(7.0f)})},
      {"f32", DataType::kFp32, {2}, Raw<float>({0.1f, std::numeric_limits<float>::max()})},
      {"f64", DataType::kFp64, {2}, Raw<double>({0.1, 1e-300})},
      {"s", DataType::kBytes, {2}, RawBytes({"hello", ""})},
  };
  const StatusOr<EncodedBody> e = EncodeInferResponse(response, BinaryOutputs());
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  const StatusOr<InferenceResponse> back = DecodeInferResponse(e.value().body, {});
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back.value().outputs.size(), response.outputs.size());
  for (size_t i = 0; i < response.outputs.size(); ++i) {
    SCOPED_TRACE(response.outputs[i].name);
    EXPECT_EQ(back.value().outputs[i].datatype, response.outputs[i].datatype);
    EXPECT_EQ(back.value().outputs[i].data, response.outputs[i].data);
  }
}

TEST(EncodeInferResponseTest, NanAndInfinityComeBackAsNan) {
  InferenceResponse response;
  const float inf = std::numeric_limits<float>::infinity();
  response.outputs.push_back({"f", DataType::kFp32, {3}, Raw<float>({std::nanf(""), inf, 1.0f})});
  const StatusOr<EncodedBody> e = EncodeInferResponse(response, BinaryOutputs());
  ASSERT_TRUE(e.ok());
  EXPECT_NE(e.value().body.find(R"("data":[null,null,1.0])"), std::string::npos) << e.value().body;
  const StatusOr<InferenceResponse> back = DecodeInferResponse(e.value().body, {});
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  float values[3];
  std::memcpy(values, back.value().outputs[0].data.data(), sizeof(values));
  EXPECT_TRUE(std::isnan(values[0]));
  EXPECT_TRUE(std::isnan(values[1]));
  EXPECT_EQ(values[2], 1.0f);
  // Requests stay strict.
  ExpectInvalidOne("FP32", "[null]", "for FP32, got null");
}

TEST(EncodeInferResponseTest, BadOutputIsInternal) {
  InferenceResponse response = SampleResponse();
  response.outputs[0].data.resize(5);
  const StatusOr<EncodedBody> e = EncodeInferResponse(response, BinaryOutputs());
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kInternal);
  EXPECT_NE(e.status().message().find("probs"), std::string::npos);
}

TEST(EncodeInferResponseTest, InvalidUtf8BytesDoNotThrow) {
  InferenceResponse response;
  response.outputs.push_back({"s", DataType::kBytes, {1}, RawBytes({"\xff\xfe"})});
  EXPECT_TRUE(EncodeInferResponse(response, BinaryOutputs()).ok());
  EXPECT_TRUE(EncodeInferResponse(response, BinaryOutputs(true)).ok());
}

InferenceRequest SampleRequest() {
  InferenceRequest request;
  request.id = "r1";
  request.parameters["latency_slo_ms"] = int64_t{50};
  request.inputs.push_back({"a", DataType::kFp32, {2, 2}, Raw<float>({1, 2, 3, 4})});
  request.inputs.push_back({"s", DataType::kBytes, {1}, RawBytes({"text"})});
  request.inputs.push_back({"e", DataType::kInt32, {0}, ""});
  request.outputs.push_back({"y", {{kBinaryData, true}}});
  return request;
}

TEST(EncodeInferRequestTest, RoundTripsJsonAndBinary) {
  for (const bool binary : {false, true}) {
    SCOPED_TRACE(binary);
    const StatusOr<EncodedBody> e = EncodeInferRequest(SampleRequest(), {binary, false});
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    EXPECT_EQ(e.value().json_size.has_value(), binary);
    const StatusOr<InferenceRequest> back = DecodeInferRequest(e.value().body, e.value().json_size);
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    const InferenceRequest expected = SampleRequest();
    EXPECT_EQ(back.value().id, expected.id);
    EXPECT_EQ(back.value().parameters, expected.parameters);
    ASSERT_EQ(back.value().inputs.size(), expected.inputs.size());
    for (size_t i = 0; i < expected.inputs.size(); ++i) {
      EXPECT_EQ(back.value().inputs[i].name, expected.inputs[i].name);
      EXPECT_EQ(back.value().inputs[i].shape, expected.inputs[i].shape);
      EXPECT_EQ(back.value().inputs[i].data, expected.inputs[i].data);
    }
    ASSERT_EQ(back.value().outputs.size(), 1u);
    EXPECT_EQ(back.value().outputs[0].parameters, expected.outputs[0].parameters);
  }
}

TEST(EncodeInferRequestTest, RejectsInconsistentTensor) {
  InferenceRequest request = SampleRequest();
  request.inputs[0].data.resize(3);
  EXPECT_EQ(EncodeInferRequest(request, {}).status().code(), StatusCode::kInvalidArgument);
}

TEST(EncodeInferRequestTest, BinaryOutputsSetsTheRequestParameter) {
  InferenceRequest request = SampleRequest();
  StatusOr<EncodedBody> e = EncodeInferRequest(request, {false, true});
  ASSERT_TRUE(e.ok());
  StatusOr<InferenceRequest> back = DecodeInferRequest(e.value().body, e.value().json_size);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(std::get<bool>(back.value().parameters.at(kBinaryDataOutput)), true);
  // An explicit choice in the request wins.
  request.parameters[kBinaryDataOutput] = false;
  e = EncodeInferRequest(request, {false, true});
  back = DecodeInferRequest(e.value().body, e.value().json_size);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(std::get<bool>(back.value().parameters.at(kBinaryDataOutput)), false);
}

TEST(ErrorBodyTest, RoundTrips) {
  EXPECT_EQ(EncodeError("bad \"x\""), R"({"error":"bad \"x\""})");
  EXPECT_EQ(DecodeError(EncodeError("no model")), "no model");
  EXPECT_EQ(DecodeError("plain text"), "plain text");
}

}  // namespace
}  // namespace somm::oip
