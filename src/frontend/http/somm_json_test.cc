#include "frontend/http/somm_json.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/base64.h"

namespace somm::oip {
namespace {

using nlohmann::json;

template <typename T>
std::string Raw(const std::vector<T>& values) {
  std::string out(values.size() * sizeof(T), '\0');
  if (!values.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

// A valid registration body: 2 validation samples of FP32 [4].
json ValidBody() {
  return {{"task", "classification/digits"},
          {"inputs", {{{"name", "pixels"}, {"datatype", "FP32"}, {"shape", {4}}}}},
          {"outputs", {{{"name", "logits"}, {"datatype", "FP32"}, {"shape", {-1, 10}}}}},
          {"max_batch_size", 64},
          {"model", Base64Encode("PK\x03\x04torchscript")},
          {"validation",
           {{"count", 2},
            {"inputs", Base64Encode(Raw<float>({1, 2, 3, 4, 5, 6, 7, 8}))},
            {"labels", Base64Encode(Raw<int64_t>({3, 7}))}}},
          {"preprocessing",
           {{"image",
             {{"channels", 1}, {"height", 2}, {"width", 2}, {"scale", 0.5}, {"invert", true}}}}},
          {"description", "a test model"}};
}

TEST(RegistrationJsonTest, DecodesEveryField) {
  StatusOr<RegistrationRequest> r = DecodeRegistrationRequest(ValidBody().dump(), "mlp");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->name, "mlp");
  EXPECT_EQ(r->task, "classification/digits");
  ASSERT_EQ(r->inputs.size(), 1u);
  EXPECT_EQ(r->inputs[0].name, "pixels");
  EXPECT_EQ(r->inputs[0].datatype, DataType::kFp32);
  EXPECT_EQ(r->inputs[0].shape, Shape({4}));
  ASSERT_EQ(r->outputs.size(), 1u);
  EXPECT_EQ(r->outputs[0].shape, Shape({-1, 10}));
  EXPECT_EQ(r->max_batch_size, 64);
  EXPECT_EQ(r->model_bytes, std::string("PK\x03\x04torchscript"));
  EXPECT_EQ(r->validation_count, 2);
  EXPECT_EQ(r->validation_inputs, Raw<float>({1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(r->validation_labels, Raw<int64_t>({3, 7}));
  ASSERT_TRUE(r->preprocessing.has_value());
  EXPECT_EQ(r->preprocessing->channels, 1);
  EXPECT_EQ(r->preprocessing->height, 2);
  EXPECT_FLOAT_EQ(r->preprocessing->scale, 0.5f);
  EXPECT_TRUE(r->preprocessing->invert);
  EXPECT_EQ(r->description, "a test model");
}

TEST(RegistrationJsonTest, PrivateFlagDecodesAndMustBeABoolean) {
  json body = ValidBody();
  StatusOr<RegistrationRequest> plain = DecodeRegistrationRequest(body.dump(), "mlp");
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->private_model);
  body["private"] = true;
  StatusOr<RegistrationRequest> r = DecodeRegistrationRequest(body.dump(), "mlp");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->private_model);
  EXPECT_EQ(r->owner_tenant, "") << "the tenant comes from the key, never the payload";
  body["private"] = "yes";
  EXPECT_FALSE(DecodeRegistrationRequest(body.dump(), "mlp").ok());
}

TEST(RegistrationJsonTest, OptionalFieldsMayBeAbsent) {
  json body = ValidBody();
  for (const char* key : {"max_batch_size", "validation", "preprocessing", "description"}) {
    body.erase(key);
  }
  body["name"] = "mlp";  // allowed when it matches the URL
  StatusOr<RegistrationRequest> r = DecodeRegistrationRequest(body.dump(), "mlp");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->max_batch_size, 0);
  EXPECT_EQ(r->validation_count, 0);
  EXPECT_FALSE(r->preprocessing.has_value());
  EXPECT_EQ(r->description, "");
}

TEST(RegistrationJsonTest, PlatformIsOptionalCarriedAndLeftOutWhenDefault) {
  json body = ValidBody();
  StatusOr<RegistrationRequest> r = DecodeRegistrationRequest(body.dump(), "m");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->platform, kDefaultPlatform);
  // The default stays off the wire, so a server older than the field takes it.
  EXPECT_FALSE(json::parse(EncodeRegistrationRequest(*r)).contains("platform"));

  body["platform"] = "onnx";
  r = DecodeRegistrationRequest(body.dump(), "m");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->platform, "onnx");
  StatusOr<RegistrationRequest> again =
      DecodeRegistrationRequest(EncodeRegistrationRequest(*r), "m");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->platform, "onnx");

  for (const json& bad : {json(""), json(3)}) {
    body["platform"] = bad;
    r = DecodeRegistrationRequest(body.dump(), "m");
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("field 'platform'"), std::string::npos)
        << r.status().message();
  }
}

TEST(RegistrationJsonTest, EveryMalformedFieldIsNamed) {
  struct Case {
    std::function<void(json&)> change;
    std::string fragment;
  };
  const std::vector<Case> cases = {
      {[](json& b) { b["max_batch"] = 1; }, "field 'max_batch' is not a known field"},
      {[](json& b) { b["name"] = "other"; }, "field 'name' is 'other' but the URL names model 'm'"},
      {[](json& b) { b["name"] = 3; }, "field 'name' must be a string"},
      {[](json& b) { b.erase("task"); }, "field 'task' is required"},
      {[](json& b) { b["task"] = 7; }, "field 'task' must be a string, got number"},
      {[](json& b) { b["task"] = ""; }, "field 'task' must not be empty"},
      {[](json& b) { b.erase("inputs"); }, "field 'inputs' is required"},
      {[](json& b) { b["inputs"] = "pixels"; }, "field 'inputs' must be a list, got string"},
      {[](json& b) { b["inputs"] = json::array(); }, "field 'inputs' must list at least one"},
      {[](json& b) { b["inputs"][0] = 1; }, "field 'inputs[0]' must be an object"},
      {[](json& b) { b["inputs"][0].erase("name"); }, "field 'inputs[0].name' is required"},
      {[](json& b) { b["inputs"][0]["name"] = 1; }, "field 'inputs[0].name' must be a string"},
      {[](json& b) { b["inputs"][0]["name"] = ""; }, "field 'inputs[0].name' must not be empty"},
      {[](json& b) { b["inputs"].push_back(b["inputs"][0]); },
       "field 'inputs[1].name' 'pixels' appears more than once"},
      {[](json& b) { b["inputs"][0].erase("datatype"); }, "field 'inputs[0].datatype' is required"},
      {[](json& b) { b["inputs"][0]["datatype"] = "FLOAT"; },
       "field 'inputs[0].datatype' has unknown datatype 'FLOAT'"},
      {[](json& b) { b["inputs"][0]["dims"] = {4}; }, "field 'inputs[0].dims' is not a known"},
      {[](json& b) { b["inputs"][0].erase("shape"); }, "field 'inputs[0].shape' is required"},
      {[](json& b) { b["inputs"][0]["shape"] = 64; },
       "field 'inputs[0].shape' must be a list of integers >= -1 (-1 = variable), got 64"},
      {[](json& b) { b["inputs"][0]["shape"] = {1.5}; },
       "field 'inputs[0].shape' must be a list of integers"},
      {[](json& b) { b["inputs"][0]["shape"] = {"4"}; },
       "field 'inputs[0].shape' must be a list of integers"},
      {[](json& b) { b["inputs"][0]["shape"] = {-2}; },
       "field 'inputs[0].shape' must be a list of integers >= -1"},
      {[](json& b) { b["inputs"][0]["shape"] = json::parse("[[4]]"); },
       "field 'inputs[0].shape' must be a list of integers"},
      {[](json& b) { b["outputs"][0]["datatype"] = "float32"; },
       "field 'outputs[0].datatype' has unknown datatype 'float32'"},
      {[](json& b) { b.erase("outputs"); }, "field 'outputs' is required"},
      {[](json& b) { b["max_batch_size"] = -1; }, "field 'max_batch_size' must be an integer >= 0"},
      {[](json& b) { b["max_batch_size"] = "64"; }, "field 'max_batch_size' must be an integer"},
      {[](json& b) { b["max_batch_size"] = 1.5; }, "field 'max_batch_size' must be an integer"},
      {[](json& b) { b.erase("model"); }, "field 'model' is required"},
      {[](json& b) { b["model"] = json::array(); }, "field 'model' must be a string, got array"},
      {[](json& b) { b["model"] = "not base64!"; }, "field 'model' is invalid base64"},
      {[](json& b) { b["model"] = ""; }, "field 'model' is empty"},
      {[](json& b) { b["validation"] = 3; }, "field 'validation' must be an object"},
      {[](json& b) { b["validation"].erase("count"); }, "field 'validation.count' is required"},
      {[](json& b) { b["validation"].erase("labels"); }, "field 'validation.labels' is required"},
      {[](json& b) { b["validation"]["count"] = -1; },
       "field 'validation.count' must be an integer >= 0"},
      {[](json& b) { b["validation"]["inputs"] = "a"; },
       "field 'validation.inputs' is invalid base64"},
      {[](json& b) { b["validation"]["labels"] = "%%%%"; },
       "field 'validation.labels' is invalid base64"},
      {[](json& b) { b["validation"]["count"] = 3; },
       "field 'validation.labels' holds 16 bytes but 3 INT64 labels need 24"},
      {[](json& b) {
         b["validation"]["inputs"] = Base64Encode(Raw<float>({1, 2, 3}));
       },
       "field 'validation.inputs' holds 12 bytes but 2 samples of FP32 [4] need 32"},
      {[](json& b) { b["validation"]["extra"] = 1; }, "field 'validation.extra' is not a known"},
      {[](json& b) { b["preprocessing"] = "image"; }, "field 'preprocessing' must be an object"},
      {[](json& b) { b["preprocessing"] = json::object(); },
       "field 'preprocessing.image' is required"},
      {[](json& b) { b["preprocessing"]["audio"] = 1; },
       "field 'preprocessing.audio' is not a known"},
      {[](json& b) { b["preprocessing"]["image"]["channels"] = 2; },
       "field 'preprocessing.image.channels' must be 1 or 3"},
      {[](json& b) { b["preprocessing"]["image"]["height"] = 0; },
       "field 'preprocessing.image.height' must be an integer >= 1"},
      {[](json& b) { b["preprocessing"]["image"]["width"] = 9000; },
       "field 'preprocessing.image.width' must be between 1 and 8192"},
      {[](json& b) { b["preprocessing"]["image"]["scale"] = "x"; },
       "field 'preprocessing.image.scale' must be a number"},
      {[](json& b) {
         b["preprocessing"]["image"]["mean"] = {0.5, 0.5};
       },
       "field 'preprocessing.image.mean' needs one value per channel"},
      {[](json& b) { b["preprocessing"]["image"]["mean"] = 0.5; },
       "field 'preprocessing.image.mean' must be a list of numbers"},
      {[](json& b) { b["preprocessing"]["image"]["std"] = {0}; },
       "field 'preprocessing.image.std' must not contain 0"},
      {[](json& b) { b["preprocessing"]["image"]["std"] = {"1"}; },
       "field 'preprocessing.image.std' must be a list of numbers"},
      {[](json& b) { b["preprocessing"]["image"]["invert"] = "yes"; },
       "field 'preprocessing.image.invert' must be a boolean"},
      {[](json& b) { b["preprocessing"]["image"]["size"] = 8; },
       "field 'preprocessing.image.size' is not a known"},
      {[](json& b) { b["description"] = false; }, "field 'description' must be a string"},
  };
  for (const Case& c : cases) {
    json body = ValidBody();
    c.change(body);
    SCOPED_TRACE(body.dump());
    StatusOr<RegistrationRequest> r = DecodeRegistrationRequest(body.dump(), "m");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(r.status().message().rfind("registration of model 'm': ", 0), 0u)
        << r.status().message();
    EXPECT_NE(r.status().message().find(c.fragment), std::string::npos) << r.status().message();
  }
}

// Found by fuzz_registration (fuzz/corpus/registration/std_beyond_float_range):
// a std of 2.9e61 became infinity as a float, so the request decoded but did
// not survive its own round trip (JSON has no infinity), and every pixel
// would have been divided into 0. Numbers past float's range are refused.
TEST(RegistrationJsonTest, RegressionPreprocessingNumbersBeyondFloatRangeAreRefused) {
  for (const char* key : {"std", "mean", "scale"}) {
    json body = ValidBody();
    const json huge = json::parse("28888888888888888888888888888888888888888888888888888888888888.2");
    body["preprocessing"]["image"][key] = std::string(key) == "scale" ? huge : json::array({huge});
    auto r = DecodeRegistrationRequest(body.dump(), "m");
    ASSERT_FALSE(r.ok()) << key;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(std::string("preprocessing.image.") + key),
              std::string::npos)
        << r.status().message();
    EXPECT_NE(r.status().message().find("float range"), std::string::npos)
        << r.status().message();
  }
  // The largest float still decodes, and round-trips.
  json body = ValidBody();
  body["preprocessing"]["image"]["std"] = {3.4e38};
  auto r = DecodeRegistrationRequest(body.dump(), "m");
  ASSERT_TRUE(r.ok()) << r.status().message();
  auto again = DecodeRegistrationRequest(EncodeRegistrationRequest(*r), "m");
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(EncodeRegistrationRequest(*again), EncodeRegistrationRequest(*r));
}

TEST(RegistrationJsonTest, MalformedBodiesAreInvalid) {
  for (const auto& [body, fragment] :
       std::vector<std::pair<std::string, std::string>>{{"", "malformed JSON"},
                                                        {"{\"task\":", "malformed JSON"},
                                                        {"[]", "must be a JSON object, got array"},
                                                        {"null", "must be a JSON object"}}) {
    StatusOr<RegistrationRequest> r = DecodeRegistrationRequest(body, "m");
    ASSERT_FALSE(r.ok()) << body;
    EXPECT_NE(r.status().message().find(fragment), std::string::npos) << r.status().message();
  }
}

TEST(RegistrationJsonTest, EncodeDecodeRoundTrip) {
  RegistrationRequest in;
  in.name = "cnn";
  in.task = "classification/digits";
  in.inputs = {{"image", DataType::kUint8, {3, -1, -1}}};
  in.outputs = {{"logits", DataType::kFp16, {1000}}, {"probs", DataType::kFp32, {1000}}};
  in.max_batch_size = 8;
  std::string model;
  for (int i = 0; i < 1000; ++i) model += static_cast<char>(i * 7);
  in.model_bytes = model;
  in.validation_count = 1;
  in.validation_inputs = "\x01\x02\x03";
  in.validation_labels = Raw<int64_t>({5});
  in.preprocessing = ImagePreprocessing{
      3, 224, 224, 1.0f / 255, {0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}, false};
  in.description = "résumé \"quoted\"";
  StatusOr<RegistrationRequest> out =
      DecodeRegistrationRequest(EncodeRegistrationRequest(in), "cnn");
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->name, in.name);
  EXPECT_EQ(out->task, in.task);
  ASSERT_EQ(out->inputs.size(), 1u);
  EXPECT_EQ(out->inputs[0].datatype, DataType::kUint8);
  EXPECT_EQ(out->inputs[0].shape, Shape({3, -1, -1}));
  ASSERT_EQ(out->outputs.size(), 2u);
  EXPECT_EQ(out->outputs[1].name, "probs");
  EXPECT_EQ(out->outputs[0].datatype, DataType::kFp16);
  EXPECT_EQ(out->max_batch_size, 8);
  EXPECT_EQ(out->model_bytes, model);
  EXPECT_EQ(out->validation_count, 1);
  EXPECT_EQ(out->validation_inputs, in.validation_inputs);
  EXPECT_EQ(out->validation_labels, in.validation_labels);
  ASSERT_TRUE(out->preprocessing.has_value());
  EXPECT_EQ(out->preprocessing->mean, in.preprocessing->mean);
  EXPECT_EQ(out->preprocessing->stddev, in.preprocessing->stddev);
  EXPECT_FLOAT_EQ(out->preprocessing->scale, in.preprocessing->scale);
  EXPECT_EQ(out->description, in.description);
}

TEST(RegistrationJsonTest, AcceptedBodyPointsAtTheVariants) {
  EXPECT_EQ(EncodeRegistrationAccepted("digits-mlp"),
            R"({"name":"digits-mlp","state":"GENERATING",)"
            R"("status_url":"/v2/repository/models/digits-mlp/variants"})");
  EXPECT_EQ(VariantsPath("a b"), "/v2/repository/models/a%20b/variants");
}

VariantProfile SampleProfile(const std::string& variant, bool usable) {
  VariantProfile p;
  p.model = "digits-mlp";
  p.version = 1;
  p.variant = variant;
  p.precision = variant == "ts-int8" ? "int8" : "fp32";
  p.optimization = "frozen+optimize_for_inference";
  p.file = "/repo/.somm/variants/digits-mlp/1/" + variant + "/model.pt";
  if (usable) p.accuracy = 0.9733;
  p.accuracy_source = "450 held-out samples";
  p.usable = usable;
  if (!usable) p.unusable_reason = "accuracy 0.71 is 0.26 below the original's 0.97";
  HardwareProfile hw;
  hw.hardware = {DeviceKind::kCpu, 0, 2};
  hw.latency = LatencyCurve::Fit({{1, 0.05}, {8, 0.12}, {64, 0.9}});
  hw.peak_memory_mb = 3.5;
  hw.load_time_ms = 12.25;
  p.hardware.push_back(hw);
  return p;
}

TEST(RegistrationStatusJsonTest, RoundTripsWithProfiles) {
  RegistrationStatus in;
  in.name = "digits-mlp";
  in.state = "GENERATING";
  in.phase = "profiling ts-int8 on cpu1";
  in.done = 4;
  in.total = 9;
  in.message = "so far so good";
  in.skipped = {"ts-bf16: CPU lacks avx512_bf16", "ts-fp16: no GPU"};
  in.variants = {SampleProfile("ts-fp32", true), SampleProfile("ts-int8", false)};
  const std::string body = EncodeRegistrationStatus(in);
  // The variants are objects (ProfileToJson's), not strings holding JSON.
  const json parsed = json::parse(body);
  ASSERT_TRUE(parsed["variants"][0].is_object()) << body;
  EXPECT_EQ(parsed["variants"][0]["variant"], "ts-fp32");

  StatusOr<RegistrationStatus> out = DecodeRegistrationStatus(body);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->name, in.name);
  EXPECT_EQ(out->state, in.state);
  EXPECT_EQ(out->phase, in.phase);
  EXPECT_EQ(out->done, 4);
  EXPECT_EQ(out->total, 9);
  EXPECT_EQ(out->message, in.message);
  EXPECT_EQ(out->skipped, in.skipped);
  ASSERT_EQ(out->variants.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(ProfileToJson(out->variants[i]), ProfileToJson(in.variants[i]));
  }
  EXPECT_FALSE(out->variants[1].accuracy.has_value());
  EXPECT_FALSE(out->variants[1].usable);
}

TEST(RegistrationStatusJsonTest, MalformedStatusIsInvalid) {
  for (const char* body : {"[]", R"({"state":"READY"})", R"({"name":"m","state":1})",
                           R"({"name":"m","state":"READY","done":"1"})",
                           R"({"name":"m","state":"READY","skipped":[1]})",
                           R"({"name":"m","state":"READY","variants":[{"model":"m"}]})"}) {
    StatusOr<RegistrationStatus> s = DecodeRegistrationStatus(body);
    EXPECT_FALSE(s.ok()) << body;
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument) << body;
  }
}

TEST(DecisionsJsonTest, RoundTrip) {
  std::vector<DecisionRecord> in(2);
  in[0] = {1767000000123,
           "task:classification/digits",
           "min_accuracy=0.9 latency_slo_ms=5",
           "loaded",
           "digits-mlp:1:ts-fp32",
           "cpu1",
           0.25,
           1.5e-7,
           "cheapest loaded variant"};
  in[1] = {1767000000456, "digits-cnn", "none", "rejected", "", "", 0, 0, "nothing meets 0.999"};
  in[0].actual_latency_ms = 0.3125;  // answered; in[1] never ran
  in[0].status = "OK";
  const std::string body = EncodeDecisions(in);
  EXPECT_EQ(body.find("actual_latency_ms", body.find("digits-cnn")), std::string::npos) << body;
  EXPECT_EQ(body.rfind(R"({"decisions":[{"unix_ms":1767000000123,"target":)", 0), 0u) << body;
  StatusOr<std::vector<DecisionRecord>> out = DecodeDecisions(body);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ(out->size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ((*out)[i].unix_ms, in[i].unix_ms);
    EXPECT_EQ((*out)[i].target, in[i].target);
    EXPECT_EQ((*out)[i].requirements, in[i].requirements);
    EXPECT_EQ((*out)[i].outcome, in[i].outcome);
    EXPECT_EQ((*out)[i].variant, in[i].variant);
    EXPECT_EQ((*out)[i].hardware, in[i].hardware);
    EXPECT_DOUBLE_EQ((*out)[i].predicted_latency_ms, in[i].predicted_latency_ms);
    EXPECT_DOUBLE_EQ((*out)[i].cost_usd, in[i].cost_usd);
    EXPECT_EQ((*out)[i].reason, in[i].reason);
    EXPECT_DOUBLE_EQ((*out)[i].actual_latency_ms, in[i].actual_latency_ms);
    EXPECT_EQ((*out)[i].status, in[i].status);
  }
  EXPECT_EQ(EncodeDecisions({}), R"({"decisions":[]})");
}

TEST(DecisionsJsonTest, MalformedLogIsInvalid) {
  for (const char* body : {"", "{}", R"({"decisions":{}})", R"({"decisions":[1]})",
                           R"({"decisions":[{"unix_ms":"x"}]})", R"({"decisions":[{"target":1}]})",
                           R"({"decisions":[{"cost_usd":"free"}]})"}) {
    EXPECT_FALSE(DecodeDecisions(body).ok()) << body;
  }
  // NaN travels as null.
  StatusOr<std::vector<DecisionRecord>> nan =
      DecodeDecisions(R"({"decisions":[{"predicted_latency_ms":null}]})");
  ASSERT_TRUE(nan.ok());
  EXPECT_TRUE(std::isnan((*nan)[0].predicted_latency_ms));
}

TEST(DecisionsJsonTest, LimitParsing) {
  EXPECT_EQ(ParseDecisionLimit(std::nullopt).value(), 100u);
  EXPECT_EQ(ParseDecisionLimit("0").value(), 0u);
  EXPECT_EQ(ParseDecisionLimit("25").value(), 25u);
  EXPECT_EQ(ParseDecisionLimit("10000").value(), 10000u);
  for (const char* bad : {"", "-1", "10001", "1e3", "12x", " 5", "99999999999999999999999"}) {
    StatusOr<size_t> limit = ParseDecisionLimit(bad);
    ASSERT_FALSE(limit.ok()) << bad;
    EXPECT_NE(limit.status().message().find("query parameter 'limit'"), std::string::npos);
  }
}

}  // namespace
}  // namespace somm::oip
