#include "frontend/http/oip_metadata_json.h"

#include <gtest/gtest.h>

namespace somm::oip {
namespace {

void ExpectInvalid(const Status& s, const std::string& fragment) {
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find(fragment), std::string::npos) << s.message();
}

TEST(ServerMetadataJsonTest, RoundTrips) {
  const ServerMetadata in{"somm", "0.1.0", {"binary_tensor_data", "model_repository"}};
  const std::string body = EncodeServerMetadata(in);
  EXPECT_EQ(body, R"({"name":"somm","version":"0.1.0","extensions":["binary_tensor_data",)"
                  R"("model_repository"]})");
  const StatusOr<ServerMetadata> out = DecodeServerMetadata(body);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out.value().name, "somm");
  EXPECT_EQ(out.value().extensions, in.extensions);
  ExpectInvalid(DecodeServerMetadata(R"({"version":"1"})").status(), "'name' is required");
}

TEST(ModelMetadataJsonTest, RoundTrips) {
  ModelMetadata in;
  in.name = "digits";
  in.versions = {"1", "2"};
  in.platform = "torchscript";
  in.inputs = {{"image", "FP32", {-1, 1, 28, 28}}};
  in.outputs = {{"logits", "FP32", {-1, 10}}};
  in.parameters["task"] = std::string("classification/digits");
  in.parameters["max_batch_size"] = int64_t{32};
  const std::string body = EncodeModelMetadata(in);
  EXPECT_EQ(body, R"({"name":"digits","versions":["1","2"],"platform":"torchscript",)"
                  R"("inputs":[{"name":"image","datatype":"FP32","shape":[-1,1,28,28]}],)"
                  R"("outputs":[{"name":"logits","datatype":"FP32","shape":[-1,10]}],)"
                  R"("parameters":{"max_batch_size":32,"task":"classification/digits"}})");
  const StatusOr<ModelMetadata> out = DecodeModelMetadata(body);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out.value().versions, in.versions);
  EXPECT_EQ(out.value().inputs[0].shape, in.inputs[0].shape);
  EXPECT_EQ(out.value().outputs[0].name, "logits");
  EXPECT_EQ(out.value().parameters, in.parameters);
  ExpectInvalid(DecodeModelMetadata(R"({"name":"m","inputs":[]})").status(),
                "'outputs' is required");
  ExpectInvalid(DecodeModelMetadata("[").status(), "malformed JSON at byte 2");
}

TEST(RepositoryJsonTest, IndexRequestBodyIsOptional) {
  EXPECT_FALSE(DecodeRepositoryIndexRequest("").value());
  EXPECT_FALSE(DecodeRepositoryIndexRequest(" \n").value());
  EXPECT_FALSE(DecodeRepositoryIndexRequest("{}").value());
  EXPECT_TRUE(DecodeRepositoryIndexRequest(R"({"ready": true})").value());
  EXPECT_TRUE(DecodeRepositoryIndexRequest(EncodeRepositoryIndexRequest(true)).value());
  ExpectInvalid(DecodeRepositoryIndexRequest(R"({"ready": 1})").status(),
                "'ready' must be a boolean, got number");
  ExpectInvalid(DecodeRepositoryIndexRequest("{ready}").status(), "malformed JSON at byte 2");
  ExpectInvalid(DecodeRepositoryIndexRequest("true").status(), "must be a JSON object");
}

TEST(RepositoryJsonTest, IndexRoundTrips) {
  const std::vector<RepositoryEntry> in = {{"a", "1", "READY", ""},
                                           {"b", "", "UNAVAILABLE", "bad model.yaml"}};
  const std::string body = EncodeRepositoryIndex(in);
  EXPECT_EQ(body, R"([{"name":"a","version":"1","state":"READY","reason":""},)"
                  R"({"name":"b","state":"UNAVAILABLE","reason":"bad model.yaml"}])");
  const StatusOr<std::vector<RepositoryEntry>> out = DecodeRepositoryIndex(body);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ(out.value().size(), 2u);
  EXPECT_EQ(out.value()[1].reason, "bad model.yaml");
  EXPECT_EQ(out.value()[1].version, "");
  ExpectInvalid(DecodeRepositoryIndex("{}").status(), "must be a JSON array");
}

TEST(RepositoryJsonTest, LoadRequestParameters) {
  EXPECT_TRUE(DecodeRepositoryModelRequest("").value().empty());
  const StatusOr<Parameters> p =
      DecodeRepositoryModelRequest(R"({"parameters":{"unload_dependents":true}})");
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(std::get<bool>(p.value().at("unload_dependents")));
  ExpectInvalid(DecodeRepositoryModelRequest(R"({"parameters":5})").status(),
                "'parameters' must be an object");
}

}  // namespace
}  // namespace somm::oip
