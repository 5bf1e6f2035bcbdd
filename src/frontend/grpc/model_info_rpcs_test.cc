// Triton's ModelConfig and ModelStatistics on the gRPC frontend: the
// messages' field names, numbers and types against a table taken from
// Triton's grpc_service.proto and model_config.proto (so that Triton's
// generated clients decode somm's answers), the encoders, and the two RPCs
// with a guard that hides a model.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <google/protobuf/descriptor.h>

#include <memory>
#include <string>

#include "api/testing/fake_inference_server.h"
#include "frontend/grpc/grpc_server.h"
#include "frontend/grpc/model_info_rpcs.h"
#include "proto/inference.grpc.pb.h"

namespace somm {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::DescriptorPool;
using google::protobuf::FieldDescriptor;

// Triton's field: message (full name), field, number, wire type, repeated.
struct TritonField {
  const char* message;
  const char* field;
  int number;
  FieldDescriptor::Type type;
  bool repeated;
};

constexpr auto kString = FieldDescriptor::TYPE_STRING;
constexpr auto kUint64 = FieldDescriptor::TYPE_UINT64;
constexpr auto kUint32 = FieldDescriptor::TYPE_UINT32;
constexpr auto kInt64 = FieldDescriptor::TYPE_INT64;
constexpr auto kInt32 = FieldDescriptor::TYPE_INT32;
constexpr auto kBool = FieldDescriptor::TYPE_BOOL;
constexpr auto kEnum = FieldDescriptor::TYPE_ENUM;
constexpr auto kMessage = FieldDescriptor::TYPE_MESSAGE;

// From Triton's protobuf definitions (triton-inference-server/common,
// protobuf/grpc_service.proto and protobuf/model_config.proto).
const TritonField kTritonFields[] = {
    {"inference.ModelConfigRequest", "name", 1, kString, false},
    {"inference.ModelConfigRequest", "version", 2, kString, false},
    {"inference.ModelConfigResponse", "config", 1, kMessage, false},
    {"inference.ModelStatisticsRequest", "name", 1, kString, false},
    {"inference.ModelStatisticsRequest", "version", 2, kString, false},
    {"inference.ModelStatisticsResponse", "model_stats", 1, kMessage, true},
    {"inference.StatisticDuration", "count", 1, kUint64, false},
    {"inference.StatisticDuration", "ns", 2, kUint64, false},
    {"inference.InferStatistics", "success", 1, kMessage, false},
    {"inference.InferStatistics", "fail", 2, kMessage, false},
    {"inference.InferStatistics", "queue", 3, kMessage, false},
    {"inference.InferStatistics", "compute_input", 4, kMessage, false},
    {"inference.InferStatistics", "compute_infer", 5, kMessage, false},
    {"inference.InferStatistics", "compute_output", 6, kMessage, false},
    {"inference.InferStatistics", "cache_hit", 7, kMessage, false},
    {"inference.InferStatistics", "cache_miss", 8, kMessage, false},
    {"inference.InferBatchStatistics", "batch_size", 1, kUint64, false},
    {"inference.InferBatchStatistics", "compute_input", 2, kMessage, false},
    {"inference.InferBatchStatistics", "compute_infer", 3, kMessage, false},
    {"inference.InferBatchStatistics", "compute_output", 4, kMessage, false},
    {"inference.ModelStatistics", "name", 1, kString, false},
    {"inference.ModelStatistics", "version", 2, kString, false},
    {"inference.ModelStatistics", "last_inference", 3, kUint64, false},
    {"inference.ModelStatistics", "inference_count", 4, kUint64, false},
    {"inference.ModelStatistics", "execution_count", 5, kUint64, false},
    {"inference.ModelStatistics", "inference_stats", 6, kMessage, false},
    {"inference.ModelStatistics", "batch_stats", 7, kMessage, true},
    {"inference.ModelConfig", "name", 1, kString, false},
    {"inference.ModelConfig", "platform", 2, kString, false},
    {"inference.ModelConfig", "version_policy", 3, kMessage, false},
    {"inference.ModelConfig", "max_batch_size", 4, kInt32, false},
    {"inference.ModelConfig", "input", 5, kMessage, true},
    {"inference.ModelConfig", "output", 6, kMessage, true},
    {"inference.ModelConfig", "instance_group", 7, kMessage, true},
    {"inference.ModelConfig", "default_model_filename", 8, kString, false},
    {"inference.ModelConfig", "dynamic_batching", 11, kMessage, false},
    {"inference.ModelConfig", "parameters", 14, kMessage, true},  // a map
    {"inference.ModelConfig", "backend", 17, kString, false},
    {"inference.ModelConfig", "response_cache", 24, kMessage, false},
    {"inference.ModelInput", "name", 1, kString, false},
    {"inference.ModelInput", "data_type", 2, kEnum, false},
    {"inference.ModelInput", "format", 3, kEnum, false},
    {"inference.ModelInput", "dims", 4, kInt64, true},
    {"inference.ModelInput", "is_shape_tensor", 6, kBool, false},
    {"inference.ModelInput", "allow_ragged_batch", 7, kBool, false},
    {"inference.ModelInput", "optional", 8, kBool, false},
    {"inference.ModelOutput", "name", 1, kString, false},
    {"inference.ModelOutput", "data_type", 2, kEnum, false},
    {"inference.ModelOutput", "dims", 3, kInt64, true},
    {"inference.ModelOutput", "label_filename", 4, kString, false},
    {"inference.ModelOutput", "is_shape_tensor", 6, kBool, false},
    {"inference.ModelInstanceGroup", "name", 1, kString, false},
    {"inference.ModelInstanceGroup", "count", 2, kInt32, false},
    {"inference.ModelInstanceGroup", "gpus", 3, kInt32, true},
    {"inference.ModelInstanceGroup", "kind", 4, kEnum, false},
    {"inference.ModelVersionPolicy", "latest", 1, kMessage, false},
    {"inference.ModelVersionPolicy", "all", 2, kMessage, false},
    {"inference.ModelVersionPolicy", "specific", 3, kMessage, false},
    {"inference.ModelVersionPolicy.Latest", "num_versions", 1, kUint32, false},
    {"inference.ModelVersionPolicy.Specific", "versions", 1, kInt64, true},
    {"inference.ModelDynamicBatching", "preferred_batch_size", 1, kInt32, true},
    {"inference.ModelDynamicBatching", "max_queue_delay_microseconds", 2, kUint64, false},
    {"inference.ModelDynamicBatching", "preserve_ordering", 3, kBool, false},
    {"inference.ModelDynamicBatching", "default_queue_policy", 6, kMessage, false},
    {"inference.ModelQueuePolicy", "timeout_action", 1, kEnum, false},
    {"inference.ModelQueuePolicy", "default_timeout_microseconds", 2, kUint64, false},
    {"inference.ModelQueuePolicy", "allow_timeout_override", 3, kBool, false},
    {"inference.ModelQueuePolicy", "max_queue_size", 4, kUint32, false},
    {"inference.ModelParameter", "string_value", 1, kString, false},
    {"inference.ModelResponseCache", "enable", 1, kBool, false},
};

TEST(ModelInfoWireTest, EveryFieldHasTritonsNameNumberAndType) {
  const DescriptorPool* pool = DescriptorPool::generated_pool();
  // Linked in, so the pool knows the messages.
  inference::ModelStatisticsResponse stats;
  inference::ModelConfigResponse config;
  for (const TritonField& t : kTritonFields) {
    SCOPED_TRACE(std::string(t.message) + "." + t.field);
    const Descriptor* message = pool->FindMessageTypeByName(t.message);
    ASSERT_NE(message, nullptr);
    const FieldDescriptor* field = message->FindFieldByName(t.field);
    ASSERT_NE(field, nullptr);
    EXPECT_EQ(field->number(), t.number);
    EXPECT_EQ(field->type(), t.type);
    EXPECT_EQ(field->is_repeated(), t.repeated);
  }
  // No field of ours that Triton's table lacks: a number somm made up
  // would be one Triton's clients read as something else.
  for (const char* name : {"inference.ModelStatistics", "inference.ModelConfig",
                           "inference.InferStatistics", "inference.ModelInput"}) {
    const Descriptor* message = pool->FindMessageTypeByName(name);
    ASSERT_NE(message, nullptr);
    for (int i = 0; i < message->field_count(); ++i) {
      const std::string field = message->field(i)->name();
      bool known = false;
      for (const TritonField& t : kTritonFields) known = known || (t.message == std::string(name) && field == t.field);
      EXPECT_TRUE(known) << name << "." << field << " is not Triton's";
    }
  }
  // Enum values by Triton's numbers.
  EXPECT_EQ(inference::TYPE_FP32, 11);
  EXPECT_EQ(inference::TYPE_STRING, 13);
  EXPECT_EQ(inference::TYPE_BF16, 14);
  EXPECT_EQ(inference::ModelInstanceGroup::KIND_GPU, 1);
  EXPECT_EQ(inference::ModelInstanceGroup::KIND_CPU, 2);
  // And the RPC paths Triton's clients call.
  const auto* service = pool->FindServiceByName("inference.GRPCInferenceService");
  ASSERT_NE(service, nullptr);
  ASSERT_NE(service->FindMethodByName("ModelStatistics"), nullptr);
  EXPECT_EQ(service->FindMethodByName("ModelStatistics")->output_type()->full_name(),
            "inference.ModelStatisticsResponse");
  ASSERT_NE(service->FindMethodByName("ModelConfig"), nullptr);
}

ModelConfiguration Configuration() {
  ModelConfiguration c;
  c.config.name = "digits-mlp";
  c.config.max_batch_size = 64;
  c.config.inputs.push_back({"pixels", DataType::kFp32, {64}});
  c.config.outputs.push_back({"logits", DataType::kFp32, {10}});
  c.config.dynamic_batching = DynamicBatchingOptions{100, {16, 64}, 4096};
  c.version = "1";
  c.platform = "pytorch_torchscript";
  c.model_filename = "model.pt";
  c.parameters["somm_task"] = "classification/digits";
  c.instance_groups.push_back({"ts-fp32@cpu1", "cpu", 0, 2});
  return c;
}

TEST(ModelInfoCodecTest, ConfigurationAsTritonsMessage) {
  inference::ModelConfig m;
  grpc_codec::EncodeModelConfiguration(Configuration(), &m);
  EXPECT_EQ(m.name(), "digits-mlp");
  EXPECT_EQ(m.platform(), "pytorch_torchscript");
  EXPECT_EQ(m.backend(), "torchscript");
  EXPECT_EQ(m.max_batch_size(), 64);
  ASSERT_EQ(m.input_size(), 1);
  EXPECT_EQ(m.input(0).data_type(), inference::TYPE_FP32);
  ASSERT_EQ(m.input(0).dims_size(), 1);
  EXPECT_EQ(m.input(0).dims(0), 64);
  EXPECT_EQ(m.output(0).name(), "logits");
  EXPECT_TRUE(m.has_dynamic_batching());
  EXPECT_EQ(m.dynamic_batching().max_queue_delay_microseconds(), 100u);
  ASSERT_EQ(m.dynamic_batching().preferred_batch_size_size(), 2);
  EXPECT_EQ(m.dynamic_batching().default_queue_policy().max_queue_size(), 4096u);
  ASSERT_EQ(m.instance_group_size(), 1);
  EXPECT_EQ(m.instance_group(0).kind(), inference::ModelInstanceGroup::KIND_CPU);
  EXPECT_EQ(m.instance_group(0).count(), 2);
  EXPECT_EQ(m.version_policy().latest().num_versions(), 1u);
  EXPECT_EQ(m.parameters().at("somm_task").string_value(), "classification/digits");
  EXPECT_EQ(m.default_model_filename(), "model.pt");
}

TEST(ModelInfoCodecTest, StatisticsAsTritonsMessage) {
  ModelStatistics s;
  s.name = "digits-mlp";
  s.version = "1";
  s.last_inference_ms = 1234;
  s.inference_count = 9;
  s.execution_count = 2;
  s.inference_stats.success = {4, 800};
  s.inference_stats.fail = {1, 50};
  s.inference_stats.compute_infer = {4, 400};
  s.batch_stats.push_back({8, {1, 5}, {1, 300}, {1, 7}});
  inference::ModelStatisticsResponse r;
  grpc_codec::EncodeModelStatistics({s}, &r);
  ASSERT_EQ(r.model_stats_size(), 1);
  const inference::ModelStatistics& m = r.model_stats(0);
  EXPECT_EQ(m.name(), "digits-mlp");
  EXPECT_EQ(m.version(), "1");
  EXPECT_EQ(m.last_inference(), 1234u);
  EXPECT_EQ(m.inference_count(), 9u);
  EXPECT_EQ(m.execution_count(), 2u);
  EXPECT_EQ(m.inference_stats().success().count(), 4u);
  EXPECT_EQ(m.inference_stats().fail().ns(), 50u);
  EXPECT_EQ(m.inference_stats().compute_infer().ns(), 400u);
  ASSERT_EQ(m.batch_stats_size(), 1);
  EXPECT_EQ(m.batch_stats(0).batch_size(), 8u);
  EXPECT_EQ(m.batch_stats(0).compute_infer().count(), 1u);
  EXPECT_EQ(m.batch_stats(0).compute_output().ns(), 7u);
}

// A server with two models, "public" and "secret", each with one version
// of statistics; "nothing" does not exist.
class StatsServer : public testing::FakeInferenceServer {
 public:
  StatusOr<std::vector<ModelStatistics>> GetModelStatistics(
      const std::string& name, const std::string& version) const override {
    std::vector<ModelStatistics> out;
    for (const char* model : {"public", "secret"}) {
      if (!name.empty() && name != model) continue;
      ModelStatistics s;
      s.name = model;
      s.version = "1";
      s.inference_stats.success = {3, 300};
      out.push_back(s);
    }
    if (out.empty()) return NotFound("unknown model '" + name + "'");
    return out;
  }
  StatusOr<ModelConfiguration> GetModelConfiguration(const std::string& name,
                                                     const std::string& version) const override {
    if (name != "public" && name != "secret") return NotFound("unknown model '" + name + "'");
    ModelConfiguration c = Configuration();
    c.config.name = name;
    return c;
  }
};

// Hides "secret" from every caller, as auth/guard.cc hides another
// tenant's private model: the answer of a model that does not exist.
class HidingGuard : public CallGuard {
 public:
  Admission Admit(const CallInfo& call) override {
    Admission a;
    if (call.model == "secret") a.status = NotFound("unknown model 'secret'");
    return a;
  }
  void Done(const Caller&, const CallInfo&, const Status&) override {}
  bool MaySee(const Caller&, const std::string& model) override { return model != "secret"; }
};

class ModelInfoRpcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    GrpcFrontendOptions o;
    o.address = "127.0.0.1";
    o.port = 0;
    o.guard = &guard_;
    auto started = GrpcFrontend::Start(server_, o);
    ASSERT_TRUE(started.ok()) << started.status().ToString();
    frontend_ = std::move(started).value();
    stub_ = inference::GRPCInferenceService::NewStub(grpc::CreateChannel(
        "127.0.0.1:" + std::to_string(frontend_->port()), grpc::InsecureChannelCredentials()));
  }

  grpc::Status Stats(const std::string& name, inference::ModelStatisticsResponse* r) {
    grpc::ClientContext context;
    inference::ModelStatisticsRequest request;
    request.set_name(name);
    return stub_->ModelStatistics(&context, request, r);
  }
  grpc::Status Config(const std::string& name, inference::ModelConfigResponse* r) {
    grpc::ClientContext context;
    inference::ModelConfigRequest request;
    request.set_name(name);
    return stub_->ModelConfig(&context, request, r);
  }

  StatsServer server_;
  HidingGuard guard_;
  std::unique_ptr<GrpcFrontend> frontend_;
  std::unique_ptr<inference::GRPCInferenceService::Stub> stub_;
};

TEST_F(ModelInfoRpcTest, StatisticsOfOneModelAndOfEveryVisibleOne) {
  inference::ModelStatisticsResponse one;
  ASSERT_TRUE(Stats("public", &one).ok());
  ASSERT_EQ(one.model_stats_size(), 1);
  EXPECT_EQ(one.model_stats(0).inference_stats().success().count(), 3u);
  // Every model: the hidden one is left out of the list.
  inference::ModelStatisticsResponse every;
  ASSERT_TRUE(Stats("", &every).ok());
  ASSERT_EQ(every.model_stats_size(), 1);
  EXPECT_EQ(every.model_stats(0).name(), "public");
}

TEST_F(ModelInfoRpcTest, AHiddenModelAnswersAsOneThatDoesNotExist) {
  inference::ModelStatisticsResponse r;
  const grpc::Status hidden = Stats("secret", &r);
  const grpc::Status missing = Stats("nothing", &r);
  EXPECT_EQ(hidden.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(missing.error_code(), grpc::StatusCode::NOT_FOUND);
  inference::ModelConfigResponse c;
  const grpc::Status hidden_config = Config("secret", &c);
  const grpc::Status missing_config = Config("nothing", &c);
  EXPECT_EQ(hidden_config.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(missing_config.error_code(), grpc::StatusCode::NOT_FOUND);
  // The messages differ only by the name asked for.
  auto without = [](std::string message, const std::string& name) {
    return message.replace(message.find(name), name.size(), "M");
  };
  EXPECT_EQ(without(hidden.error_message(), "secret"), without(missing.error_message(), "nothing"));
  EXPECT_EQ(without(hidden_config.error_message(), "secret"),
            without(missing_config.error_message(), "nothing"));
}

TEST_F(ModelInfoRpcTest, ConfigOfAModel) {
  inference::ModelConfigResponse r;
  ASSERT_TRUE(Config("public", &r).ok());
  EXPECT_EQ(r.config().name(), "public");
  EXPECT_EQ(r.config().max_batch_size(), 64);
  EXPECT_EQ(Config("", &r).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

}  // namespace
}  // namespace somm
