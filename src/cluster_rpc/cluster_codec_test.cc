#include "cluster_rpc/cluster_codec.h"

#include <gtest/gtest.h>

namespace somm::cluster_codec {
namespace {

using namespace std::chrono_literals;

TEST(ClusterRpcCodecTest, ActionRoundTripsEveryField) {
  WorkerAction in;
  in.action.kind = cluster::Action::kSetReplicas;
  in.action.cause = cluster::Action::Cause::kReplaced;
  in.action.model = "digits-mlp";
  in.action.version = 3;
  in.action.variant = "ts-int8";
  in.action.hardware = {DeviceKind::kCuda, 1, 2};
  in.action.device = "cuda:1";
  in.action.replicas = 4;
  in.action.replaces = {"a:1:ts-fp32@cpu1", "b:1:ts-fp32@cpu1"};
  in.action.reason = "upgrade";
  in.urgent = true;
  in.only_if_idle = true;
  in.pinned = true;
  in.reload = true;
  pb::ApplyRequest wire;
  EncodeAction(in, &wire);
  WorkerAction out;
  ASSERT_TRUE(DecodeAction(wire, &out).ok());
  EXPECT_EQ(out.action.kind, in.action.kind);
  EXPECT_EQ(out.action.cause, in.action.cause);
  EXPECT_EQ(out.action.model, in.action.model);
  EXPECT_EQ(out.action.version, in.action.version);
  EXPECT_EQ(out.action.variant, in.action.variant);
  EXPECT_EQ(out.action.hardware, in.action.hardware);
  EXPECT_EQ(out.action.device, in.action.device);
  EXPECT_EQ(out.action.replicas, in.action.replicas);
  EXPECT_EQ(out.action.replaces, in.action.replaces);
  EXPECT_EQ(out.action.reason, in.action.reason);
  EXPECT_TRUE(out.urgent && out.only_if_idle && out.pinned && out.reload);
  EXPECT_EQ(cluster::GroupLabel(out.action), cluster::GroupLabel(in.action));
}

// The batch report travels back with every answer: a router in another
// process counts Triton's statistics from it (router/inference_statistics.h).
TEST(ClusterRpcCodecTest, ExecuteResultCarriesTheWholeBatchReport) {
  ExecuteResult in;
  in.stats.queue_ns = 11;
  in.stats.compute_ns = 22;
  in.stats.batch_size = 3;
  in.stats.first_in_batch = true;
  in.stats.input_ns = 4;
  in.stats.output_ns = 5;
  in.instance_id = 7;
  in.device = "cpu";
  pb::ExecuteResponse wire;
  EncodeExecuteResult(in, &wire);
  StatusOr<ExecuteResult> out = DecodeExecuteResult(&wire);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->stats.queue_ns, 11);
  EXPECT_EQ(out->stats.compute_ns, 22);
  EXPECT_EQ(out->stats.batch_size, 3);
  EXPECT_TRUE(out->stats.first_in_batch);
  EXPECT_EQ(out->stats.input_ns, 4);
  EXPECT_EQ(out->stats.output_ns, 5);
  EXPECT_EQ(out->instance_id, 7);
}

TEST(ClusterRpcCodecTest, UnspecifiedKindIsRefused) {
  pb::ApplyRequest wire;
  wire.set_model("m");
  wire.set_cause(pb::ApplyRequest::CAUSE_DEMAND);
  wire.mutable_hardware()->set_device(pb::Hardware::DEVICE_CPU);
  WorkerAction out;
  Status s = DecodeAction(wire, &out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("kind"), std::string::npos) << s.ToString();
}

TEST(ClusterRpcCodecTest, InputBytesThatDoNotMatchTheShapeAreRefused) {
  pb::ExecuteRequest wire;
  wire.set_group("m:1:ts-fp32@cpu1");
  pb::Tensor* t = wire.add_inputs();
  t->set_name("x");
  t->set_datatype("FP32");
  t->add_shape(1);
  t->add_shape(2);
  t->set_data(std::string(7, '\0'));
  ExecuteRequest out;
  Status s = DecodeExecuteRequest(wire, &out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("'x'"), std::string::npos) << s.ToString();
}

// The request's bytes in pieces (data left where they lie) are the bytes
// protobuf writes for the same message, whatever the inputs: none, empty
// data, a long name, data over 127 and over 16383 bytes (two- and
// three-byte lengths), several inputs, and the instance id and the
// best-effort flag at their defaults (left out) or not.
TEST(ClusterRpcCodecTest, RequestWireIsTheMessagesBytes) {
  auto tensor = [](std::string name, DataType type, std::vector<int64_t> shape) {
    Tensor t;
    t.name = std::move(name);
    t.datatype = type;
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    t.shape = std::move(shape);
    t.data.resize(static_cast<size_t>(n) * DataTypeSize(type));
    for (size_t i = 0; i < t.data.size(); ++i) t.data[i] = static_cast<char>(i * 7 + 1);
    return t;
  };
  std::vector<std::vector<Tensor>> cases = {
      {},
      {tensor("x", DataType::kFp32, {1, 0})},
      {tensor("input", DataType::kFp32, {1, 64})},
      {tensor(std::string(200, 'n'), DataType::kInt64, {3, 1})},
      {tensor("image", DataType::kFp32, {1, 3, 224, 224})},
      {tensor("a", DataType::kFp32, {2, 40}), tensor("b", DataType::kInt32, {2, 5000}),
       tensor("c", DataType::kBool, {2, 1})},
  };
  for (size_t c = 0; c < cases.size(); ++c) {
    for (bool defaults : {false, true}) {
      ExecuteRequest in;
      in.group = defaults ? "g" : "resnet18:1:ts-fp32@cpu2";  // a worker refuses none
      in.instance_id = defaults ? 0 : -1;
      in.best_effort = !defaults;
      auto shared = std::make_shared<const std::vector<Tensor>>(cases[c]);
      if (c % 2 == 0) {
        in.shared_inputs = shared;
      } else {
        in.inputs = cases[c];
      }
      pb::ExecuteRequest message;
      EncodeExecuteRequest(in, &message);
      ExecuteRequestWire wire = EncodeExecuteRequestWire(in);
      ASSERT_EQ(wire.heads.size(), cases[c].size() + 1);
      std::string joined;
      for (size_t i = 0; i < wire.heads.size(); ++i) {
        joined += wire.heads[i];
        if (i < cases[c].size()) joined += cases[c][i].data;
      }
      EXPECT_EQ(joined, message.SerializeAsString()) << "case " << c << " defaults " << defaults;
      ExecuteRequest out;
      pb::ExecuteRequest parsed;
      ASSERT_TRUE(parsed.ParseFromString(joined));
      ASSERT_TRUE(DecodeExecuteRequest(std::move(parsed), &out).ok());
      EXPECT_EQ(out.group, in.group);
      EXPECT_EQ(out.instance_id, in.instance_id);
      EXPECT_EQ(out.best_effort, in.best_effort);
      ASSERT_EQ(out.inputs.size(), cases[c].size());
      for (size_t i = 0; i < cases[c].size(); ++i) {
        EXPECT_EQ(out.inputs[i].name, cases[c][i].name);
        EXPECT_EQ(out.inputs[i].shape, cases[c][i].shape);
        EXPECT_EQ(out.inputs[i].data, cases[c][i].data);
      }
    }
  }
}

TEST(ClusterRpcCodecTest, DeadlineCrossesTheClocks) {
  std::chrono::system_clock::time_point call;
  EXPECT_FALSE(ToCallDeadline(SteadyClock::time_point::max(), &call));
  EXPECT_EQ(FromCallDeadline(std::chrono::system_clock::time_point::max()),
            SteadyClock::time_point::max());

  const auto deadline = SteadyClock::now() + 250ms;
  ASSERT_TRUE(ToCallDeadline(deadline, &call));
  const auto back = FromCallDeadline(call);
  // Only the time between the clock reads separates them.
  EXPECT_LT(std::chrono::abs(back - deadline), 50ms);

  const auto past = SteadyClock::now() - 1s;
  ASSERT_TRUE(ToCallDeadline(past, &call));
  EXPECT_LT(FromCallDeadline(call), SteadyClock::now());
}

}  // namespace
}  // namespace somm::cluster_codec
