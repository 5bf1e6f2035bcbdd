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
