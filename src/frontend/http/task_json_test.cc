#include "frontend/http/task_json.h"

#include <gtest/gtest.h>

namespace somm::oip {
namespace {

TaskDescription Digits() {
  TaskDescription d;
  d.task = "classification/digits";
  d.signature.inputs = {TensorSpec{"pixels", DataType::kFp32, {64}}};
  d.signature.outputs = {TensorSpec{"logits", DataType::kFp32, {10}}};
  d.signature.batched = true;
  TaskModel m;
  m.name = "digits-mlp";
  m.versions = {"1", "2"};
  m.accuracy = 0.97;
  m.usable_variants = 3;
  d.models.push_back(m);
  TaskModel odd;
  odd.name = "odd";
  odd.versions = {"1"};
  odd.mismatch = "inputs image FP32 [-1,64]; outputs logits FP32 [-1,10]";
  d.models.push_back(odd);
  d.usable_variants = 3;
  d.min_accuracy = 0.95;
  d.max_accuracy = 0.97;
  d.min_latency_ms = 0.1;
  d.max_latency_ms = 0.4;
  return d;
}

TEST(TaskJsonTest, RoundTripsEveryField) {
  const TaskDescription d = Digits();
  StatusOr<TaskDescription> back = DecodeTask(EncodeTask(d));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(EncodeTask(*back), EncodeTask(d));
  EXPECT_EQ(back->models.at(1).mismatch, d.models[1].mismatch);
  EXPECT_DOUBLE_EQ(*back->max_latency_ms, 0.4);
  EXPECT_EQ(back->signature.inputs.at(0).shape, (Shape{64}));
}

TEST(TaskJsonTest, UnknownFiguresAreLeftOutAndReadBackUnset) {
  TaskDescription d = Digits();
  d.min_latency_ms.reset();
  d.max_latency_ms.reset();
  d.models[0].accuracy.reset();
  const std::string text = EncodeTask(d);
  EXPECT_NE(text.find("\"latency_ms_batch1\":{}"), std::string::npos) << text;
  StatusOr<TaskDescription> back = DecodeTask(text);
  ASSERT_TRUE(back.ok());
  EXPECT_FALSE(back->min_latency_ms.has_value());
  EXPECT_FALSE(back->models[0].accuracy.has_value());
}

TEST(TaskJsonTest, ListRoundTripsAndBadDocumentsAreRefused) {
  StatusOr<std::vector<TaskDescription>> list = DecodeTaskList(EncodeTaskList({Digits(), Digits()}));
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->size(), 2u);
  EXPECT_FALSE(DecodeTaskList("[]").ok());
  EXPECT_FALSE(DecodeTask("{\"task\": 1}").ok());
  EXPECT_FALSE(DecodeTask("not json").ok());
}

}  // namespace
}  // namespace somm::oip
