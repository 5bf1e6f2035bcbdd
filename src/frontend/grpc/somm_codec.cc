#include "frontend/grpc/somm_codec.h"

#include <set>
#include <string>
#include <utility>

namespace somm::grpc_codec {
namespace {

using Wire = somm::RegisterModelRequest;

void EncodeTensors(const std::vector<TensorSpec>& in,
                   google::protobuf::RepeatedPtrField<Wire::Tensor>* out) {
  for (const TensorSpec& spec : in) {
    Wire::Tensor* t = out->Add();
    t->set_name(spec.name);
    t->set_datatype(DataTypeName(spec.datatype));
    t->mutable_shape()->Add(spec.shape.begin(), spec.shape.end());
  }
}

Status DecodeTensors(const google::protobuf::RepeatedPtrField<Wire::Tensor>& in,
                     const std::string& field, std::vector<TensorSpec>* out) {
  std::set<std::string> seen;
  for (int i = 0; i < in.size(); ++i) {
    const Wire::Tensor& t = in.Get(i);
    const std::string what = "registration: field '" + field + "[" + std::to_string(i) + "]";
    if (t.name().empty()) return InvalidArgument(what + ".name' is empty");
    if (!seen.insert(t.name()).second) {
      return InvalidArgument(what + ".name': '" + t.name() + "' appears more than once");
    }
    TensorSpec spec;
    spec.name = t.name();
    spec.datatype = DataTypeFromString(t.datatype());
    if (spec.datatype == DataType::kInvalid) {
      return InvalidArgument(what + ".datatype': unknown datatype '" + t.datatype() + "'");
    }
    for (int64_t dim : t.shape()) {
      if (dim < -1) {
        return InvalidArgument(what + ".shape': dims must be >= -1 (-1 = variable), got " +
                               std::to_string(dim));
      }
      spec.shape.push_back(dim);
    }
    out->push_back(std::move(spec));
  }
  return Status::Ok();
}

}  // namespace

void EncodeRegistration(const RegistrationRequest& in, somm::RegisterModelRequest* out) {
  out->set_name(in.name);
  out->set_task(in.task);
  EncodeTensors(in.inputs, out->mutable_inputs());
  EncodeTensors(in.outputs, out->mutable_outputs());
  out->set_max_batch_size(in.max_batch_size);
  if (in.platform != kDefaultPlatform) out->set_platform(in.platform);
  out->set_model(in.model_bytes);
  if (in.validation_count > 0 || !in.validation_inputs.empty() || !in.validation_labels.empty()) {
    Wire::Validation* v = out->mutable_validation();
    v->set_count(in.validation_count);
    v->set_inputs(in.validation_inputs);
    v->set_labels(in.validation_labels);
  }
  if (in.preprocessing) {
    const ImagePreprocessing& p = *in.preprocessing;
    Wire::ImagePreprocessing* w = out->mutable_preprocessing();
    w->set_channels(p.channels);
    w->set_height(p.height);
    w->set_width(p.width);
    w->set_scale(p.scale);
    w->mutable_mean()->Add(p.mean.begin(), p.mean.end());
    w->mutable_std()->Add(p.stddev.begin(), p.stddev.end());
    w->set_invert(p.invert);
  }
  out->set_description(in.description);
  out->set_private_model(in.private_model);
}

Status DecodeRegistration(const somm::RegisterModelRequest& in, RegistrationRequest* out) {
  if (in.name().empty()) return InvalidArgument("registration: field 'name' is empty");
  if (in.task().empty()) {
    return InvalidArgument("registration of model '" + in.name() +
                           "': field 'task' is empty (e.g. \"classification/digits\")");
  }
  if (in.model().empty()) {
    return InvalidArgument("registration of model '" + in.name() +
                           "': field 'model' (the TorchScript file) is empty");
  }
  out->name = in.name();
  out->task = in.task();
  SOMM_RETURN_IF_ERROR(DecodeTensors(in.inputs(), "inputs", &out->inputs));
  SOMM_RETURN_IF_ERROR(DecodeTensors(in.outputs(), "outputs", &out->outputs));
  if (in.max_batch_size() < 0) {
    return InvalidArgument("registration of model '" + in.name() +
                           "': field 'max_batch_size' must not be negative");
  }
  out->max_batch_size = in.max_batch_size();
  out->platform = in.platform().empty() ? kDefaultPlatform : in.platform();
  out->model_bytes = in.model();
  if (in.has_validation()) {
    out->validation_count = in.validation().count();
    out->validation_inputs = in.validation().inputs();
    out->validation_labels = in.validation().labels();
  }
  if (in.has_preprocessing()) {
    const Wire::ImagePreprocessing& w = in.preprocessing();
    ImagePreprocessing p;
    p.channels = w.channels();
    p.height = w.height();
    p.width = w.width();
    p.scale = w.scale();
    p.mean.assign(w.mean().begin(), w.mean().end());
    p.stddev.assign(w.std().begin(), w.std().end());
    p.invert = w.invert();
    out->preprocessing = std::move(p);
  }
  out->description = in.description();
  out->private_model = in.private_model();
  return Status::Ok();
}

void EncodeRegistrationStatus(const RegistrationStatus& in, somm::GetVariantsResponse* out) {
  out->set_name(in.name);
  out->set_state(in.state);
  out->set_phase(in.phase);
  out->set_done(in.done);
  out->set_total(in.total);
  out->set_message(in.message);
  for (const std::string& s : in.skipped) out->add_skipped(s);
  for (const VariantProfile& p : in.variants) out->add_variants_json(ProfileToJson(p));
}

StatusOr<RegistrationStatus> DecodeRegistrationStatus(const somm::GetVariantsResponse& in) {
  RegistrationStatus out;
  out.name = in.name();
  out.state = in.state();
  out.phase = in.phase();
  out.done = in.done();
  out.total = in.total();
  out.message = in.message();
  out.skipped.assign(in.skipped().begin(), in.skipped().end());
  for (int i = 0; i < in.variants_json_size(); ++i) {
    SOMM_ASSIGN_OR_RETURN(
        VariantProfile p,
        ProfileFromJson(in.variants_json(i), "variants_json[" + std::to_string(i) + "]"));
    out.variants.push_back(std::move(p));
  }
  return out;
}

void EncodeDecisions(const std::vector<DecisionRecord>& in, somm::RecentDecisionsResponse* out) {
  for (const DecisionRecord& d : in) {
    auto* w = out->add_decisions();
    w->set_unix_ms(d.unix_ms);
    w->set_target(d.target);
    w->set_requirements(d.requirements);
    w->set_outcome(d.outcome);
    w->set_variant(d.variant);
    w->set_hardware(d.hardware);
    w->set_predicted_latency_ms(d.predicted_latency_ms);
    w->set_cost_usd(d.cost_usd);
    w->set_reason(d.reason);
    w->set_actual_latency_ms(d.actual_latency_ms);
    w->set_status(d.status);
  }
}

std::vector<DecisionRecord> DecodeDecisions(const somm::RecentDecisionsResponse& in) {
  std::vector<DecisionRecord> out;
  out.reserve(in.decisions_size());
  for (const auto& w : in.decisions()) {
    DecisionRecord d{w.unix_ms(), w.target(), w.requirements(), w.outcome(), w.variant(),
                     w.hardware(), w.predicted_latency_ms(), w.cost_usd(), w.reason()};
    d.actual_latency_ms = w.actual_latency_ms();
    d.status = w.status();
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace somm::grpc_codec
