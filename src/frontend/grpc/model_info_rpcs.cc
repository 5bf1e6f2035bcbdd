#include "frontend/grpc/model_info_rpcs.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <functional>
#include <string>

#include "proto/inference.grpc.pb.h"

namespace somm {
namespace grpc_codec {
namespace {

void Duration(const DurationStat& in, inference::StatisticDuration* out) {
  out->set_count(in.count);
  out->set_ns(in.ns);
}

inference::DataType TritonType(DataType type) {
  inference::DataType out = inference::TYPE_INVALID;
  inference::DataType_Parse(TritonDataTypeName(type), &out);
  return out;
}

void VersionPolicy(const somm::VersionPolicy& in, inference::ModelVersionPolicy* out) {
  switch (in.kind) {
    case somm::VersionPolicy::Kind::kAll:
      (void)out->mutable_all();
      return;
    case somm::VersionPolicy::Kind::kSpecific:
      for (int64_t v : in.specific) out->mutable_specific()->add_versions(v);
      return;
    case somm::VersionPolicy::Kind::kLatest:
      out->mutable_latest()->set_num_versions(static_cast<uint32_t>(in.latest_count));
      return;
  }
}

}  // namespace

void EncodeModelStatistics(const std::vector<ModelStatistics>& stats,
                           inference::ModelStatisticsResponse* out) {
  for (const ModelStatistics& s : stats) {
    inference::ModelStatistics* m = out->add_model_stats();
    m->set_name(s.name);
    m->set_version(s.version);
    m->set_last_inference(s.last_inference_ms);
    m->set_inference_count(s.inference_count);
    m->set_execution_count(s.execution_count);
    const InferStatistics& i = s.inference_stats;
    inference::InferStatistics* o = m->mutable_inference_stats();
    Duration(i.success, o->mutable_success());
    Duration(i.fail, o->mutable_fail());
    Duration(i.queue, o->mutable_queue());
    Duration(i.compute_input, o->mutable_compute_input());
    Duration(i.compute_infer, o->mutable_compute_infer());
    Duration(i.compute_output, o->mutable_compute_output());
    Duration(i.cache_hit, o->mutable_cache_hit());
    Duration(i.cache_miss, o->mutable_cache_miss());
    for (const BatchSizeStatistics& b : s.batch_stats) {
      inference::InferBatchStatistics* row = m->add_batch_stats();
      row->set_batch_size(b.batch_size);
      Duration(b.compute_input, row->mutable_compute_input());
      Duration(b.compute_infer, row->mutable_compute_infer());
      Duration(b.compute_output, row->mutable_compute_output());
    }
  }
}

void EncodeModelConfiguration(const ModelConfiguration& c, inference::ModelConfig* out) {
  const ModelConfig& m = c.config;
  out->set_name(m.name);
  out->set_platform(c.platform);
  out->set_backend(m.platform);
  VersionPolicy(m.version_policy, out->mutable_version_policy());
  out->set_max_batch_size(static_cast<int32_t>(m.max_batch_size));
  for (const TensorSpec& t : m.inputs) {
    inference::ModelInput* in = out->add_input();
    in->set_name(t.name);
    in->set_data_type(TritonType(t.datatype));
    for (int64_t d : t.shape) in->add_dims(d);
  }
  for (const TensorSpec& t : m.outputs) {
    inference::ModelOutput* o = out->add_output();
    o->set_name(t.name);
    o->set_data_type(TritonType(t.datatype));
    for (int64_t d : t.shape) o->add_dims(d);
  }
  for (const ModelConfiguration::Instances& g : c.instance_groups) {
    inference::ModelInstanceGroup* group = out->add_instance_group();
    group->set_name(g.name);
    group->set_count(g.count);
    const bool gpu = g.device == "cuda";
    group->set_kind(gpu ? inference::ModelInstanceGroup::KIND_GPU
                        : inference::ModelInstanceGroup::KIND_CPU);
    if (gpu) group->add_gpus(g.index);
  }
  if (c.instance_groups.empty()) {
    // Nothing loaded now: the configured floor, the device somm's to choose.
    inference::ModelInstanceGroup* group = out->add_instance_group();
    group->set_name(m.name);
    group->set_count(m.instance_count);
    group->set_kind(inference::ModelInstanceGroup::KIND_AUTO);
  }
  out->set_default_model_filename(c.model_filename);
  if (m.dynamic_batching) {
    inference::ModelDynamicBatching* d = out->mutable_dynamic_batching();
    for (int64_t size : m.dynamic_batching->preferred_batch_sizes) {
      d->add_preferred_batch_size(static_cast<int32_t>(size));
    }
    d->set_max_queue_delay_microseconds(
        static_cast<uint64_t>(std::max<int64_t>(m.dynamic_batching->max_queue_delay_us, 0)));
    d->mutable_default_queue_policy()->set_max_queue_size(
        static_cast<uint32_t>(std::max<int64_t>(m.dynamic_batching->max_queue_size, 0)));
  }
  for (const auto& [key, value] : c.parameters) {
    (*out->mutable_parameters())[key].set_string_value(value);
  }
  out->mutable_response_cache()->set_enable(m.response_cache.enable);
}

}  // namespace grpc_codec

namespace grpc_async {
namespace {

std::string OipPath(const char* method) {
  return std::string("/") + inference::GRPCInferenceService::service_full_name() + "/" + method;
}

}  // namespace

void ModelInfoRpcs::Declare(CallQueue* queue, KeyFirstService* service, KeyFirstTable& table) {
  using namespace inference;
  table.Serve<ModelConfigRequest, ModelConfigResponse>(
      queue, service, OipPath("ModelConfig"), Operation::kModelMetadata,
      std::bind_front(&ModelInfoRpcs::Config, this));
  table.Serve<ModelStatisticsRequest, ModelStatisticsResponse>(
      queue, service, OipPath("ModelStatistics"), Operation::kModelMetadata,
      std::bind_front(&ModelInfoRpcs::Statistics, this));
}

Admission ModelInfoRpcs::Admit(const GatedContext& context, Operation op,
                               const std::string& model) const {
  if (guard_ == nullptr) return Admission{};
  return guard_->Admit(
      CallInfo{op, model, AuthorizationOf(&context.grpc), false, 0, &context.verified});
}

void ModelInfoRpcs::Config(const GatedContext& context, const inference::ModelConfigRequest& request,
                           inference::ModelConfigResponse* response, const Answer& answer) {
  if (request.name().empty()) return answer(InvalidArgument("config request names no model (name)"));
  Admission a = Admit(context, Operation::kModelMetadata, request.name());
  if (!a.status.ok()) return answer(a.status);
  StatusOr<ModelConfiguration> config = server_.GetModelConfiguration(request.name(), request.version());
  if (config.ok()) grpc_codec::EncodeModelConfiguration(*config, response->mutable_config());
  answer(config.status());
}

void ModelInfoRpcs::Statistics(const GatedContext& context,
                               const inference::ModelStatisticsRequest& request,
                               inference::ModelStatisticsResponse* response, const Answer& answer) {
  // Every model's is a list (filtered below), one model's a read of it.
  const bool every = request.name().empty();
  Admission a = Admit(context, every ? Operation::kIndex : Operation::kModelMetadata, request.name());
  if (!a.status.ok()) return answer(a.status);
  StatusOr<std::vector<ModelStatistics>> stats =
      server_.GetModelStatistics(request.name(), request.version());
  if (!stats.ok()) return answer(stats.status());
  if (guard_ != nullptr && every) {
    std::erase_if(*stats, [&](const ModelStatistics& s) { return !guard_->MaySee(a.caller, s.name); });
  }
  grpc_codec::EncodeModelStatistics(*stats, response);
  answer(Status::Ok());
}

}  // namespace grpc_async
}  // namespace somm
