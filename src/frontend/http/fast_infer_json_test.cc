// The fast decoders against the general ones: on every body where a fast
// path answers, the general decoder must accept it and give the same result.
// Bodies: typical ones, edge cases, and thousands of one-byte mutations.
#include "frontend/http/fast_infer_json.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "frontend/http/oip_json.h"

namespace somm::oip {
namespace {

using internal::FastDecodeInferRequest;
using internal::FastDecodeInferResponse;

bool SameTensors(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].name != b[i].name || a[i].datatype != b[i].datatype || a[i].shape != b[i].shape ||
        a[i].data != b[i].data) {
      return false;
    }
  }
  return true;
}

bool SameRequest(const InferenceRequest& a, const InferenceRequest& b) {
  if (a.id != b.id || a.parameters != b.parameters || !SameTensors(a.inputs, b.inputs)) {
    return false;
  }
  if (a.outputs.size() != b.outputs.size()) return false;
  for (size_t i = 0; i < a.outputs.size(); ++i) {
    if (a.outputs[i].name != b.outputs[i].name ||
        a.outputs[i].parameters != b.outputs[i].parameters) {
      return false;
    }
  }
  return true;
}

// The general decoder alone.
StatusOr<InferenceRequest> GeneralRequest(const std::string& body,
                                          std::optional<size_t> header_length = std::nullopt) {
  return internal::GeneralDecodeInferRequest(body, header_length);
}
StatusOr<InferenceResponse> GeneralResponse(const std::string& body) {
  return internal::GeneralDecodeInferResponse(body, std::nullopt);
}

const std::vector<std::string> kRequests = {
    R"({"inputs":[{"name":"pixels","shape":[1,4],"datatype":"FP32","data":[0.0,16,9.5,-1e-3]}]})",
    R"({"id":"q1","parameters":{"latency_slo_ms":20,"min_accuracy":0.9,"best_effort":true,"task":"x"},)"
    R"("inputs":[{"name":"a","datatype":"FP32","shape":[2,2],"data":[[1,2],[3,4]]},)"
    R"({"name":"b","datatype":"FP64","shape":[3],"data":[1e300,-0,4.9e-324]}],)"
    R"("outputs":[{"name":"logits","parameters":{"classification":3}},{"name":"p"}]})",
    " { \"inputs\" : [ { \"name\" : \"x\" , \"datatype\" : \"FP32\" , \"shape\" : [ 0 ] ,"
    " \"data\" : [ ] } ] , \"unknown\" : {\"k\":[1,{\"z\":false}]} }\n",
    R"({"inputs":[{"name":"n","shape":[4],"datatype":"FP32","data":[-0,-0.0,3.4028234e38,1.17549435e-38]}]})",
    R"({"inputs":[{"name":"a\u0041\n","datatype":"FP32","shape":[1],"data":[1]}]})",  // escapes
    R"({"inputs":[{"name":"big","datatype":"FP32","shape":[2],"data":[9007199254740993,18446744073709551615]}]})",
};

TEST(FastInferJsonTest, TypicalRequestsTakeTheFastPathAndMatch) {
  for (const std::string& body : kRequests) {
    SCOPED_TRACE(body);
    const std::optional<InferenceRequest> fast = FastDecodeInferRequest(body);
    ASSERT_TRUE(fast.has_value());
    StatusOr<InferenceRequest> general = GeneralRequest(body);
    ASSERT_TRUE(general.ok()) << general.status().ToString();
    EXPECT_TRUE(SameRequest(*fast, *general));
  }
}

TEST(FastInferJsonTest, BodiesOutsideTheSubsetAreLeftToTheGeneralDecoder) {
  const std::vector<std::string> others = {
      // 'data' before 'datatype' (the fast path reads forward only)
      R"({"inputs":[{"data":[1],"name":"a","shape":[1],"datatype":"FP32"}]})",
      R"({"inputs":[{"name":"a","datatype":"FP32","shape":[1],"data":[1]}],"x":null})",  // null
      R"({"inputs":[{"name":"a","datatype":"INT32","shape":[1],"data":[1]}]})",
      R"({"inputs":[{"name":"a","datatype":"FP32","shape":[2],"data":[1]}]})",  // count
      R"({"inputs":[{"name":"a","datatype":"FP32","shape":[1],"data":[1e39]}]})",  // float range
      R"({"inputs":[{"name":"a","datatype":"FP32","shape":[1],"parameters":{"binary_data_size":4}}]})",
      R"({"inputs":[],"inputs":[]})",                                               // repeated key
      R"({"inputs":[{"name":"a","datatype":"FP32","shape":[1],"data":[1]}]} x)",    // trailing
      R"({"inputs":[{"name":"a","datatype":"FP32","shape":[1],"data":[null]}]})",
      R"({"parameters":{"n":99999999999999999999},"inputs":[]})",                  // int64 range
      R"([1,2])",
      "",
  };
  for (const std::string& body : others) {
    EXPECT_FALSE(FastDecodeInferRequest(body).has_value()) << body;
  }
}

// One-byte mutations of valid bodies: deletions, duplications and
// substitutions with the characters that matter to JSON.
std::vector<std::string> Mutations(const std::string& body) {
  std::vector<std::string> out;
  const std::string alphabet = "\"[]{},:0-.e \\1tE+";
  for (size_t i = 0; i < body.size(); ++i) {
    out.push_back(body.substr(0, i) + body.substr(i + 1));
    out.push_back(body.substr(0, i + 1) + body.substr(i));
    for (const char c : alphabet) {
      if (c == body[i]) continue;
      std::string m = body;
      m[i] = c;
      out.push_back(std::move(m));
    }
  }
  return out;
}

// fuzz/infer_request_fuzz.cc: a shape of 3e11 elements with three of them
// in "data" made the fast path size the tensor (2.4 TB) before reading the
// elements, so a 300-byte body threw std::bad_alloc out of the decoder.
TEST(FastInferJsonTest, RegressionHugeShapeWithFewElementsAllocatesNothing) {
  const std::string request =
      R"({"inputs":[{"name":"b","datatype":"FP64","shape":[300000000000],"data":[1,2,3]}]})";
  EXPECT_FALSE(FastDecodeInferRequest(request).has_value());
  const StatusOr<InferenceRequest> general = GeneralRequest(request);
  ASSERT_FALSE(general.ok());
  EXPECT_EQ(general.status().code(), StatusCode::kInvalidArgument);

  const std::string response =
      R"({"outputs":[{"name":"p","datatype":"FP32","shape":[1099511627776],"data":[1]}]})";
  EXPECT_FALSE(FastDecodeInferResponse(response).has_value());
  EXPECT_FALSE(GeneralResponse(response).ok());
}

TEST(FastInferJsonTest, WhereverTheFastPathAnswersTheGeneralDecoderAgrees) {
  int fast_answers = 0;
  int checked = 0;
  for (const std::string& body : kRequests) {
    for (const std::string& m : Mutations(body)) {
      ++checked;
      const std::optional<InferenceRequest> fast = FastDecodeInferRequest(m);
      if (!fast) continue;
      ++fast_answers;
      StatusOr<InferenceRequest> general = GeneralRequest(m);
      ASSERT_TRUE(general.ok()) << m << "\n" << general.status().ToString();
      ASSERT_TRUE(SameRequest(*fast, *general)) << m;
    }
  }
  // The mutations must exercise both outcomes to mean anything.
  EXPECT_GT(fast_answers, 100);
  EXPECT_GT(checked - fast_answers, 100);
}

// fuzz/findings/infer_request-fast-general-float-rounding: simdjson 3.0.1
// read this 39-digit number as 7.2e-21; both decoders must read 0.444...
TEST(FastInferJsonTest, RegressionFastGeneralFloatRounding) {
  const std::string number = "0.444444444444444444444444444444444444440";
  for (const char* type : {"FP32", "FP64"}) {
    const std::string body = std::string(R"({"parameters":{"p":)") + number +
                             R"(},"inputs":[{"name":"x","shape":[2],"datatype":")" + type +
                             R"(","data":[)" + number + "," + number + " ]}]}";
    SCOPED_TRACE(body);
    const std::optional<InferenceRequest> fast = FastDecodeInferRequest(body);
    ASSERT_TRUE(fast.has_value());
    StatusOr<InferenceRequest> general = GeneralRequest(body);
    ASSERT_TRUE(general.ok()) << general.status().ToString();
    EXPECT_TRUE(SameRequest(*fast, *general));
    EXPECT_NEAR(std::get<double>(fast->parameters.at("p")), 0.4444444444444444, 1e-15);
  }
}

TEST(FastInferJsonTest, BinaryRequestsTakeTheFastPathAndMatchIncludingMutations) {
  InferenceRequest request;
  request.id = "b1";
  request.parameters["latency_slo_ms"] = int64_t{5};
  Tensor pixels;
  pixels.name = "pixels";
  pixels.datatype = DataType::kFp32;
  pixels.shape = {1, 3};
  const float values[3] = {0.5f, -1.f, 3e7f};
  pixels.data.assign(reinterpret_cast<const char*>(values), sizeof(values));
  Tensor mask;
  mask.name = "mask";
  mask.datatype = DataType::kInt64;
  mask.shape = {2};
  const int64_t ints[2] = {7, -9};
  mask.data.assign(reinterpret_cast<const char*>(ints), sizeof(ints));
  request.inputs = {pixels, mask};
  const StatusOr<EncodedBody> encoded = EncodeInferRequest(request, {.binary_inputs = true});
  ASSERT_TRUE(encoded.ok());
  ASSERT_TRUE(encoded->json_size.has_value());
  const std::string json = encoded->body.substr(0, *encoded->json_size);
  const std::string bytes = encoded->body.substr(*encoded->json_size);

  const std::optional<InferenceRequest> fast =
      FastDecodeInferRequest(encoded->body, encoded->json_size);
  ASSERT_TRUE(fast.has_value()) << json;
  EXPECT_TRUE(SameTensors(fast->inputs, request.inputs));
  // Bytes left over, or missing, are the general decoder's to report.
  EXPECT_FALSE(FastDecodeInferRequest(encoded->body + "x", encoded->json_size).has_value());
  EXPECT_FALSE(FastDecodeInferRequest(encoded->body.substr(0, encoded->body.size() - 1),
                                      encoded->json_size)
                   .has_value());
  EXPECT_FALSE(FastDecodeInferRequest(encoded->body, encoded->body.size() + 1).has_value());

  int fast_answers = 0;
  for (const std::string& m : Mutations(json)) {
    const std::string body = m + bytes;
    const std::optional<InferenceRequest> f = FastDecodeInferRequest(body, m.size());
    if (!f) continue;
    ++fast_answers;
    StatusOr<InferenceRequest> general = GeneralRequest(body, m.size());
    ASSERT_TRUE(general.ok()) << m << "\n" << general.status().ToString();
    ASSERT_TRUE(SameRequest(*f, *general)) << m;
  }
  EXPECT_GT(fast_answers, 50);
}

TEST(FastInferJsonTest, ResponsesMatchTheGeneralDecoderIncludingMutations) {
  InferenceResponse response;
  response.model_name = "digits-mlp";
  response.model_version = "1";
  response.id = "q7";
  response.parameters["somm_queue_us"] = int64_t{12};
  response.parameters["somm_latency_ms"] = 0.25;
  response.parameters["somm_reason"] = std::string("fastest variant meeting the SLO");
  Tensor logits;
  logits.name = "logits";
  logits.datatype = DataType::kFp32;
  logits.shape = {1, 3};
  const float values[3] = {0.1f, -2.5f, 1e-7f};
  logits.data.assign(reinterpret_cast<const char*>(values), sizeof(values));
  response.outputs.push_back(logits);
  const StatusOr<EncodedBody> encoded = EncodeInferResponse(response, BinaryOutputs{});
  ASSERT_TRUE(encoded.ok());
  const std::string& body = encoded->body;

  const std::optional<InferenceResponse> fast = FastDecodeInferResponse(body);
  ASSERT_TRUE(fast.has_value()) << body;
  EXPECT_EQ(fast->model_name, "digits-mlp");
  EXPECT_EQ(fast->parameters, response.parameters);
  EXPECT_TRUE(SameTensors(fast->outputs, response.outputs));

  int fast_answers = 0;
  for (const std::string& m : Mutations(body)) {
    const std::optional<InferenceResponse> f = FastDecodeInferResponse(m);
    if (!f) continue;
    ++fast_answers;
    StatusOr<InferenceResponse> general = GeneralResponse(m);
    ASSERT_TRUE(general.ok()) << m << "\n" << general.status().ToString();
    ASSERT_TRUE(f->model_name == general->model_name && f->model_version == general->model_version &&
                f->id == general->id && f->parameters == general->parameters &&
                SameTensors(f->outputs, general->outputs))
        << m;
  }
  EXPECT_GT(fast_answers, 50);

  // The same response with its output in the binary section.
  InferenceRequest asks_binary;
  asks_binary.parameters["binary_data_output"] = true;
  StatusOr<BinaryOutputs> binary = BinaryOutputs::FromRequest(asks_binary);
  ASSERT_TRUE(binary.ok());
  const StatusOr<EncodedBody> with_bytes = EncodeInferResponse(response, *binary);
  ASSERT_TRUE(with_bytes.ok() && with_bytes->json_size.has_value());
  const std::optional<InferenceResponse> fast_binary =
      FastDecodeInferResponse(with_bytes->body, with_bytes->json_size);
  ASSERT_TRUE(fast_binary.has_value());
  EXPECT_TRUE(SameTensors(fast_binary->outputs, response.outputs));
  EXPECT_EQ(fast_binary->parameters, response.parameters);
}

// The security review's body: well-formed JSON whose 'data' holds far more
// numbers than its shape declares. The general decoder built a tree of every
// number first (a 60 MB body raised the RSS by 1.6 GB); now the mismatch is
// found by counting, with the general decoder's own message.
TEST(FastInferJsonTest, DataThatDoesNotMatchItsShapeIsRefusedByCountingWithTheGeneralMessage) {
  for (const std::string& data : {std::string("1,2,3"), std::string("[1,2],[3,4],[5,6]"),
                                  std::string("\"a\",\"b\",true")}) {
    const std::string body = R"({"id":"x","inputs":[{"name":"a","datatype":"FP32","shape":[1,2],"data":[1,2]},)"
                             R"({"name":"pixels","datatype":"INT64","shape":[1,2],"data":[)" + data + "]}]}";
    const std::optional<Status> counted = internal::DataCountMismatch(body);
    const StatusOr<InferenceRequest> general = internal::GeneralDecodeInferRequest(body, std::nullopt);
    ASSERT_TRUE(counted.has_value()) << data;
    ASSERT_FALSE(general.ok());
    EXPECT_EQ(counted->message(), general.status().message()) << data;
    EXPECT_EQ(DecodeInferRequest(body, std::nullopt).status().message(), general.status().message());
  }
  // A matching body, and one the plain form does not cover, are left alone.
  EXPECT_FALSE(internal::DataCountMismatch(
                   R"({"inputs":[{"name":"a","datatype":"INT64","shape":[2],"data":[1,2]}]})")
                   .has_value());
  EXPECT_FALSE(internal::DataCountMismatch(
                   R"({"inputs":[{"name":"a","datatype":"INT64","data":[1,2,3],"shape":[2]}]})")
                   .has_value());
  // A repeated key: the general decoder reads the last value, so the count
  // of the first one decides nothing.
  EXPECT_FALSE(internal::DataCountMismatch(
                   R"({"inputs":[{"name":"a","datatype":"INT64","shape":[2],"data":[1,2,3]}],)"
                   R"("inputs":[{"name":"a","datatype":"INT64","shape":[2],"data":[1,2]}]})")
                   .has_value());
  // Three million numbers against a shape of 64: refused without the tree.
  std::string big = R"({"inputs":[{"name":"pixels","datatype":"FP32","shape":[1,64],"data":[)";
  for (int i = 0; i < 3000000; ++i) big += i ? ",0.5" : "0.5";
  big += "]}]}";
  const StatusOr<InferenceRequest> refused = DecodeInferRequest(big, std::nullopt);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("but 'data' holds 3000000 elements"), std::string::npos)
      << refused.status().message();
}

}  // namespace
}  // namespace somm::oip
