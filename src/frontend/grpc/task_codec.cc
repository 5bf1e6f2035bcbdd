#include "frontend/grpc/task_codec.h"

#include <string>
#include <utility>

namespace somm::grpc_codec {
namespace {

void EncodeSpecs(const std::vector<TensorSpec>& in,
                 google::protobuf::RepeatedPtrField<somm::TasksResponse::Tensor>* out) {
  for (const TensorSpec& s : in) {
    auto* t = out->Add();
    t->set_name(s.name);
    t->set_datatype(DataTypeName(s.datatype));
    for (int64_t d : s.shape) t->add_shape(d);
  }
}

StatusOr<std::vector<TensorSpec>> DecodeSpecs(
    const std::string& task, const google::protobuf::RepeatedPtrField<somm::TasksResponse::Tensor>& in) {
  std::vector<TensorSpec> out;
  for (const auto& t : in) {
    TensorSpec s;
    s.name = t.name();
    s.datatype = DataTypeFromString(t.datatype());
    if (s.datatype == DataType::kInvalid) {
      return InvalidArgument("task '" + task + "': tensor '" + s.name + "' has unknown datatype '" +
                             t.datatype() + "'");
    }
    s.shape.assign(t.shape().begin(), t.shape().end());
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace

void EncodeTasks(const std::vector<TaskDescription>& in, somm::TasksResponse* out) {
  for (const TaskDescription& d : in) {
    auto* t = out->add_tasks();
    t->set_task(d.task);
    EncodeSpecs(d.signature.inputs, t->mutable_inputs());
    EncodeSpecs(d.signature.outputs, t->mutable_outputs());
    t->set_batched(d.signature.batched);
    for (const TaskModel& m : d.models) {
      auto* mm = t->add_models();
      mm->set_name(m.name);
      for (const std::string& v : m.versions) mm->add_versions(v);
      if (m.accuracy) mm->set_accuracy(*m.accuracy);
      mm->set_usable_variants(m.usable_variants);
      mm->set_mismatch(m.mismatch);
    }
    t->set_usable_variants(d.usable_variants);
    if (d.min_accuracy) t->set_min_accuracy(*d.min_accuracy);
    if (d.max_accuracy) t->set_max_accuracy(*d.max_accuracy);
    if (d.min_latency_ms) t->set_min_latency_ms(*d.min_latency_ms);
    if (d.max_latency_ms) t->set_max_latency_ms(*d.max_latency_ms);
  }
}

StatusOr<std::vector<TaskDescription>> DecodeTasks(const somm::TasksResponse& in) {
  std::vector<TaskDescription> out;
  for (const auto& t : in.tasks()) {
    TaskDescription d;
    d.task = t.task();
    SOMM_ASSIGN_OR_RETURN(d.signature.inputs, DecodeSpecs(d.task, t.inputs()));
    SOMM_ASSIGN_OR_RETURN(d.signature.outputs, DecodeSpecs(d.task, t.outputs()));
    d.signature.batched = t.batched();
    for (const auto& mm : t.models()) {
      TaskModel m;
      m.name = mm.name();
      m.versions.assign(mm.versions().begin(), mm.versions().end());
      if (mm.has_accuracy()) m.accuracy = mm.accuracy();
      m.usable_variants = mm.usable_variants();
      m.mismatch = mm.mismatch();
      d.models.push_back(std::move(m));
    }
    d.usable_variants = t.usable_variants();
    if (t.has_min_accuracy()) d.min_accuracy = t.min_accuracy();
    if (t.has_max_accuracy()) d.max_accuracy = t.max_accuracy();
    if (t.has_min_latency_ms()) d.min_latency_ms = t.min_latency_ms();
    if (t.has_max_latency_ms()) d.max_latency_ms = t.max_latency_ms();
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace somm::grpc_codec
