#include "cluster_rpc/cluster_codec.h"

#include <utility>

#include "frontend/grpc/grpc_codec.h"

namespace somm::cluster_codec {
namespace {

void EncodeTensor(const Tensor& in, pb::Tensor* out) {
  out->set_name(in.name);
  out->set_datatype(DataTypeName(in.datatype));
  out->mutable_shape()->Add(in.shape.begin(), in.shape.end());
  out->set_data(in.data);
}

void EncodeTensor(Tensor&& in, pb::Tensor* out) {
  out->set_name(std::move(in.name));
  out->set_datatype(DataTypeName(in.datatype));
  out->mutable_shape()->Add(in.shape.begin(), in.shape.end());
  out->set_data(std::move(in.data));
}

// A protobuf base-128 varint.
void AppendVarint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

size_t VarintSize(uint64_t v) {
  size_t n = 1;
  for (; v >= 0x80; v >>= 7) ++n;
  return n;
}

// A length-delimited field's key (wire type 2).
constexpr uint32_t LengthDelimitedKey(uint32_t field) { return (field << 3) | 2; }

}  // namespace

ExecuteRequestWire EncodeExecuteRequestWire(const ExecuteRequest& in) {
  // Protobuf writes a message's fields in field order, and the data are
  // the last field of a Tensor: so every byte but the data comes from
  // protobuf itself, and only the two lengths that frame the data are
  // written here. The result is byte for byte what EncodeExecuteRequest's
  // message serializes to (cluster_codec_test.cc).
  using Request = pb::ExecuteRequest;
  static_assert(Request::kGroupFieldNumber < Request::kInputsFieldNumber &&
                Request::kInstanceIdFieldNumber < Request::kInputsFieldNumber &&
                Request::kInputsFieldNumber < Request::kBestEffortFieldNumber);
  static_assert(pb::Tensor::kDataFieldNumber > pb::Tensor::kShapeFieldNumber &&
                pb::Tensor::kDataFieldNumber > pb::Tensor::kDatatypeFieldNumber &&
                pb::Tensor::kDataFieldNumber > pb::Tensor::kNameFieldNumber);
  constexpr uint32_t kInputKey = LengthDelimitedKey(Request::kInputsFieldNumber);
  constexpr uint32_t kDataKey = LengthDelimitedKey(pb::Tensor::kDataFieldNumber);
  const std::vector<Tensor>& inputs = in.Inputs();
  ExecuteRequestWire wire;
  wire.heads.resize(inputs.size() + 1);
  Request fields;
  fields.set_group(in.group);
  fields.set_instance_id(in.instance_id);
  fields.SerializeToString(&wire.heads[0]);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    pb::Tensor meta;
    meta.set_name(t.name);
    meta.set_datatype(DataTypeName(t.datatype));
    meta.mutable_shape()->Add(t.shape.begin(), t.shape.end());
    const std::string meta_bytes = meta.SerializeAsString();
    // Proto3 leaves an empty bytes field out.
    const size_t data_field =
        t.data.empty() ? 0 : VarintSize(kDataKey) + VarintSize(t.data.size()) + t.data.size();
    std::string& head = wire.heads[i];
    AppendVarint(kInputKey, &head);
    AppendVarint(meta_bytes.size() + data_field, &head);
    head += meta_bytes;
    if (!t.data.empty()) {
      AppendVarint(kDataKey, &head);
      AppendVarint(t.data.size(), &head);
    }
  }
  Request tail;
  tail.set_best_effort(in.best_effort);
  tail.AppendToString(&wire.heads.back());
  return wire;
}

void EncodeExecuteRequest(const ExecuteRequest& in, pb::ExecuteRequest* out) {
  out->set_group(in.group);
  out->set_instance_id(in.instance_id);
  out->set_best_effort(in.best_effort);
  const std::vector<Tensor>& inputs = in.Inputs();
  out->mutable_inputs()->Reserve(static_cast<int>(inputs.size()));
  for (const Tensor& t : inputs) EncodeTensor(t, out->add_inputs());
}

Status DecodeExecuteRequest(const pb::ExecuteRequest& in, ExecuteRequest* out) {
  pb::ExecuteRequest copy = in;
  return DecodeExecuteRequest(std::move(copy), out);
}

Status DecodeExecuteRequest(pb::ExecuteRequest&& in, ExecuteRequest* out) {
  if (in.group().empty()) return InvalidArgument("execute request names no group");
  out->group = in.group();
  out->instance_id = in.instance_id();
  out->best_effort = in.best_effort();
  out->inputs.clear();
  out->inputs.reserve(static_cast<size_t>(in.inputs_size()));
  for (pb::Tensor& t : *in.mutable_inputs()) {
    SOMM_ASSIGN_OR_RETURN(Tensor tensor,
                          grpc_codec::TensorFromRaw("input", t.name(), t.datatype(), t.shape(),
                                                    std::move(*t.mutable_data())));
    out->inputs.push_back(std::move(tensor));
  }
  return Status::Ok();
}

void EncodeExecuteResult(ExecuteResult in, pb::ExecuteResponse* out) {
  out->mutable_outputs()->Reserve(static_cast<int>(in.outputs.size()));
  for (Tensor& t : in.outputs) EncodeTensor(std::move(t), out->add_outputs());
  out->set_queue_ns(in.stats.queue_ns);
  out->set_compute_ns(in.stats.compute_ns);
  out->set_batch_size(in.stats.batch_size);
  out->set_first_in_batch(in.stats.first_in_batch);
  out->set_input_ns(in.stats.input_ns);
  out->set_output_ns(in.stats.output_ns);
  out->set_instance_id(in.instance_id);
  out->set_device(std::move(in.device));
}

StatusOr<ExecuteResult> DecodeExecuteResult(pb::ExecuteResponse* in) {
  ExecuteResult r;
  r.outputs.reserve(static_cast<size_t>(in->outputs_size()));
  for (pb::Tensor& t : *in->mutable_outputs()) {
    SOMM_ASSIGN_OR_RETURN(Tensor tensor,
                          grpc_codec::TensorFromRaw("output", t.name(), t.datatype(), t.shape(),
                                                    std::move(*t.mutable_data())));
    r.outputs.push_back(std::move(tensor));
  }
  r.stats.queue_ns = in->queue_ns();
  r.stats.compute_ns = in->compute_ns();
  r.stats.batch_size = in->batch_size();
  r.stats.first_in_batch = in->first_in_batch();
  r.stats.input_ns = in->input_ns();
  r.stats.output_ns = in->output_ns();
  r.instance_id = in->instance_id();
  r.device = std::move(*in->mutable_device());
  return r;
}

void EncodeAction(const WorkerAction& in, pb::ApplyRequest* out) {
  const cluster::Action& a = in.action;
  switch (a.kind) {
    case cluster::Action::kLoad: out->set_kind(pb::ApplyRequest::KIND_LOAD); break;
    case cluster::Action::kUnload: out->set_kind(pb::ApplyRequest::KIND_UNLOAD); break;
    case cluster::Action::kSetReplicas: out->set_kind(pb::ApplyRequest::KIND_SET_REPLICAS); break;
    case cluster::Action::kEvict: out->set_kind(pb::ApplyRequest::KIND_EVICT); break;
  }
  switch (a.cause) {
    case cluster::Action::Cause::kDemand: out->set_cause(pb::ApplyRequest::CAUSE_DEMAND); break;
    case cluster::Action::Cause::kIdle: out->set_cause(pb::ApplyRequest::CAUSE_IDLE); break;
    case cluster::Action::Cause::kRedundant:
      out->set_cause(pb::ApplyRequest::CAUSE_REDUNDANT);
      break;
    case cluster::Action::Cause::kReplaced: out->set_cause(pb::ApplyRequest::CAUSE_REPLACED); break;
  }
  out->set_model(a.model);
  out->set_version(a.version);
  out->set_variant(a.variant);
  pb::Hardware* hw = out->mutable_hardware();
  hw->set_device(a.hardware.device == DeviceKind::kCuda ? pb::Hardware::DEVICE_CUDA
                                                        : pb::Hardware::DEVICE_CPU);
  hw->set_index(a.hardware.device_index);
  hw->set_threads(a.hardware.threads);
  out->set_device(a.device);
  out->set_replicas(a.replicas);
  for (const std::string& r : a.replaces) out->add_replaces(r);
  out->set_reason(a.reason);
  out->set_urgent(in.urgent);
  out->set_only_if_idle(in.only_if_idle);
  out->set_pinned(in.pinned);
  out->set_reload(in.reload);
}

Status DecodeAction(const pb::ApplyRequest& in, WorkerAction* out) {
  cluster::Action& a = out->action;
  switch (in.kind()) {
    case pb::ApplyRequest::KIND_LOAD: a.kind = cluster::Action::kLoad; break;
    case pb::ApplyRequest::KIND_UNLOAD: a.kind = cluster::Action::kUnload; break;
    case pb::ApplyRequest::KIND_SET_REPLICAS: a.kind = cluster::Action::kSetReplicas; break;
    case pb::ApplyRequest::KIND_EVICT: a.kind = cluster::Action::kEvict; break;
    default:
      return InvalidArgument("action: kind " + std::to_string(in.kind()) + " is not one of " +
                             "load, unload, set_replicas, evict");
  }
  switch (in.cause()) {
    case pb::ApplyRequest::CAUSE_DEMAND: a.cause = cluster::Action::Cause::kDemand; break;
    case pb::ApplyRequest::CAUSE_IDLE: a.cause = cluster::Action::Cause::kIdle; break;
    case pb::ApplyRequest::CAUSE_REDUNDANT: a.cause = cluster::Action::Cause::kRedundant; break;
    case pb::ApplyRequest::CAUSE_REPLACED: a.cause = cluster::Action::Cause::kReplaced; break;
    default:
      return InvalidArgument("action: cause " + std::to_string(in.cause()) + " is not one of " +
                             "demand, idle, redundant, replaced");
  }
  if (in.model().empty()) return InvalidArgument("action names no model");
  a.model = in.model();
  a.version = in.version();
  a.variant = in.variant();
  switch (in.hardware().device()) {
    case pb::Hardware::DEVICE_CPU: a.hardware.device = DeviceKind::kCpu; break;
    case pb::Hardware::DEVICE_CUDA: a.hardware.device = DeviceKind::kCuda; break;
    default:
      return InvalidArgument("action: hardware.device " +
                             std::to_string(in.hardware().device()) + " is not cpu or cuda");
  }
  a.hardware.device_index = in.hardware().index();
  a.hardware.threads = in.hardware().threads();
  a.device = in.device();
  a.replicas = in.replicas();
  a.replaces.assign(in.replaces().begin(), in.replaces().end());
  a.reason = in.reason();
  out->urgent = in.urgent();
  out->only_if_idle = in.only_if_idle();
  out->pinned = in.pinned();
  out->reload = in.reload();
  return Status::Ok();
}

bool ToCallDeadline(SteadyClock::time_point deadline,
                    std::chrono::system_clock::time_point* call_deadline) {
  if (deadline == SteadyClock::time_point::max()) return false;
  // Both clocks are read once, back to back; what separates the two reads is
  // far below any deadline's resolution.
  const auto steady_now = SteadyClock::now();
  const auto system_now = std::chrono::system_clock::now();
  if (deadline - steady_now > std::chrono::hours(24)) return false;  // as good as none
  *call_deadline = system_now + std::chrono::duration_cast<std::chrono::system_clock::duration>(
                                    deadline - steady_now);
  return true;
}

SteadyClock::time_point FromCallDeadline(std::chrono::system_clock::time_point call_deadline) {
  if (call_deadline == std::chrono::system_clock::time_point::max()) {
    return SteadyClock::time_point::max();
  }
  const auto system_now = std::chrono::system_clock::now();
  const auto steady_now = SteadyClock::now();
  // Far-future deadlines (a client that means "none" but says so with a
  // date) must not overflow the steady clock: past a day, it is none.
  if (call_deadline - system_now > std::chrono::hours(24)) return SteadyClock::time_point::max();
  return steady_now +
         std::chrono::duration_cast<SteadyClock::duration>(call_deadline - system_now);
}

}  // namespace somm::cluster_codec
