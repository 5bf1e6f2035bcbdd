#include "pipeline/pipeline_plan.h"

#include <algorithm>

namespace somm::pipeline {
namespace {

// What one built-in step may produce for one query.
constexpr int64_t kMaxStepBytes = int64_t{1} << 30;

std::string Where(const StepConfig& step) {
  return "steps[" + std::to_string(step.index_in_file) + "] (step '" + step.name + "')";
}

Status FieldError(const std::string& pipeline, const std::string& field, const Status& problem) {
  return Status(problem.code() == StatusCode::kNotFound ? StatusCode::kNotFound
                                                        : StatusCode::kInvalidArgument,
                "pipeline '" + pipeline + "': field '" + field + "': " + problem.message());
}

std::string Names(const std::vector<TensorSpec>& specs) {
  std::string s;
  for (const auto& spec : specs) s += (s.empty() ? "" : ", ") + spec.name;
  return s;
}

const TensorSpec* Find(const std::vector<TensorSpec>& specs, const std::string& name) {
  for (const auto& s : specs) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

bool FullyKnown(const Shape& shape) {
  return std::none_of(shape.begin(), shape.end(), [](int64_t d) { return d < 0; });
}

// Checks that the step's inputs feed exactly the inputs `sig` takes; the
// source spec of each is appended to `sources` when given.
Status CheckFed(const std::string& pipeline, const std::string& at, const StepConfig& step,
                const StepSignature& sig,
                const std::function<StatusOr<TensorSpec>(const std::string&)>& source_spec,
                std::vector<TensorSpec>* sources) {
  for (const auto& [name, source] : step.inputs) {
    const std::string in_field = at + ".inputs." + name;
    const TensorSpec* takes = Find(sig.inputs, name);
    if (takes == nullptr) {
      return FieldError(pipeline, in_field,
                        InvalidArgument("the " + std::string(StepKindName(step.kind)) +
                                        " takes no input '" + name + "' (it takes " +
                                        Names(sig.inputs) + ")"));
    }
    auto from = source_spec(source);
    if (!from.ok()) return FieldError(pipeline, in_field, from.status());
    if (Status s = CheckEdge(*from, *takes); !s.ok()) return FieldError(pipeline, in_field, s);
    if (sources) sources->push_back(*from);
  }
  for (const auto& takes : sig.inputs) {
    const bool fed = std::any_of(step.inputs.begin(), step.inputs.end(),
                                 [&](const auto& kv) { return kv.first == takes.name; });
    if (!fed) {
      return FieldError(pipeline, at + ".inputs", InvalidArgument("input '" + takes.name + "' is not fed"));
    }
  }
  return Status::Ok();
}

// Whether a stage tenant may join the pipeline's owner so far.
Status JoinOwner(const std::string& pipeline, const std::string& field, const std::string& tenant,
                 std::string* owner) {
  if (tenant.empty()) return Status::Ok();
  if (!owner->empty() && *owner != tenant) {
    return FieldError(pipeline, field, InvalidArgument("the steps use private models of two tenants"));
  }
  *owner = tenant;
  return Status::Ok();
}

// A cascade step: each stage a batching model fed the step's inputs, each
// with one FP32 output of the same, known, number of values.
Status BindCascade(const std::string& pipeline, const StepConfig& step, const SignatureLookup& lookup,
                   const std::function<StatusOr<TensorSpec>(const std::string&)>& source_spec,
                   std::string* owner, BoundStep* bound) {
  const std::string at = Where(step);
  for (size_t k = 0; k < step.cascade.models.size(); ++k) {
    const std::string field = at + ".cascade.models[" + std::to_string(k) + "]";
    StepConfig as_model = step;
    as_model.kind = StepKind::kModel;
    as_model.model = step.cascade.models[k];
    auto sig = lookup(as_model);
    if (!sig.ok()) return FieldError(pipeline, field, sig.status());
    const std::string m = "model '" + as_model.model + "'";
    if (!sig->batched) {
      return FieldError(pipeline, field, InvalidArgument(m + " does not batch (max_batch_size 0)"));
    }
    SOMM_RETURN_IF_ERROR(JoinOwner(pipeline, field, sig->owner_tenant, owner));
    SOMM_RETURN_IF_ERROR(CheckFed(pipeline, at, as_model, *sig, source_spec,
                                  k == 0 ? &bound->sources : nullptr));
    if (sig->outputs.size() != 1 || sig->outputs[0].datatype != DataType::kFp32 ||
        !FullyKnown(sig->outputs[0].shape) || ElementCount(sig->outputs[0].shape) < 2) {
      return FieldError(pipeline, field,
                        InvalidArgument(m + " gives " + Names(sig->outputs) +
                                        "; a cascade stage gives one FP32 output of two or more "
                                        "class scores (logits)"));
    }
    const int64_t classes = ElementCount(sig->outputs[0].shape);
    if (k == 0) {
      bound->classes = classes;
      bound->inputs = sig->inputs;
      bound->outputs = {sig->outputs[0], TensorSpec{"stage", DataType::kInt64, {1}}};
      if (sig->outputs[0].name == "stage") {
        return FieldError(pipeline, field, InvalidArgument("a stage's output may not be named 'stage'"));
      }
    } else if (classes != bound->classes) {
      return FieldError(pipeline, field,
                        InvalidArgument(m + " scores " + std::to_string(classes) +
                                        " classes where the first stage scores " +
                                        std::to_string(bound->classes)));
    }
    bound->stages.push_back(std::move(sig).value());
  }
  return Status::Ok();
}

}  // namespace

const char* BuiltinInputName(StepKind kind) {
  return kind == StepKind::kPreprocess ? "image" : "logits";
}

Status CheckEdge(const TensorSpec& from, const TensorSpec& to) {
  if (from.datatype != to.datatype) {
    return InvalidArgument(std::string("datatype ") + DataTypeName(from.datatype) +
                           " does not match " + DataTypeName(to.datatype));
  }
  if (from.shape.size() == to.shape.size()) {
    bool fits = true;
    for (size_t i = 0; i < from.shape.size(); ++i) {
      fits = fits && (from.shape[i] == to.shape[i] || from.shape[i] == -1 || to.shape[i] == -1);
    }
    if (fits) return Status::Ok();
  }
  if (FullyKnown(from.shape) && FullyKnown(to.shape) &&
      ElementCount(from.shape) == ElementCount(to.shape)) {
    return Status::Ok();  // reshaped, same bytes
  }
  return InvalidArgument("shape " + ShapeToString(from.shape) + " (per sample) does not fit " +
                         ShapeToString(to.shape));
}

StatusOr<std::vector<TensorSpec>> BuiltinOutputs(const StepConfig& step, const TensorSpec& input) {
  if (step.kind == StepKind::kPreprocess) {
    if (input.datatype != DataType::kBytes || ElementCount(input.shape) != 1) {
      return InvalidArgument(std::string("preprocess takes one BYTES element per sample (an "
                                         "encoded image), not ") +
                             DataTypeName(input.datatype) + " " + ShapeToString(input.shape));
    }
    const auto& t = step.preprocess.transform;
    return std::vector<TensorSpec>{{"pixels", DataType::kFp32, {t.channels, t.height, t.width}}};
  }
  const PostprocessOptions& p = step.postprocess;
  if (input.datatype != DataType::kFp32 || !FullyKnown(input.shape)) {
    return InvalidArgument(std::string("postprocess takes FP32 scores of a known size, not ") +
                           DataTypeName(input.datatype) + " " + ShapeToString(input.shape));
  }
  const int64_t classes = ElementCount(input.shape);
  std::vector<TensorSpec> out = {{"probabilities", DataType::kFp32, {classes}}};
  if (!p.labels.empty() && static_cast<int64_t>(p.labels.size()) != classes) {
    return InvalidArgument("the labels file holds " + std::to_string(p.labels.size()) +
                           " labels but the scores have " + std::to_string(classes) + " classes");
  }
  if (p.top_k > classes) {
    return InvalidArgument("top_k " + std::to_string(p.top_k) + " is over the " +
                           std::to_string(classes) + " classes");
  }
  if (p.argmax) {
    out.push_back({"class", DataType::kInt64, {1}});
    out.push_back({"score", DataType::kFp32, {1}});
    if (!p.labels.empty()) out.push_back({"label", DataType::kBytes, {1}});
  } else if (p.top_k > 0) {
    out.push_back({"classes", DataType::kInt64, {p.top_k}});
    out.push_back({"scores", DataType::kFp32, {p.top_k}});
    if (!p.labels.empty()) out.push_back({"labels", DataType::kBytes, {p.top_k}});
  }
  return out;
}

StatusOr<PipelinePlan> BindPipeline(const PipelineConfig& config, const SignatureLookup& lookup) {
  PipelinePlan plan;
  plan.name = config.name;
  plan.description = config.description;
  plan.max_batch_size = config.max_batch_size;
  plan.inputs = config.inputs;
  plan.outputs = config.outputs;
  std::map<std::string, TensorSpec> values;
  for (const auto& in : config.inputs) values[in.name] = in;
  std::map<std::string, std::vector<TensorSpec>> step_outputs;
  std::string owner;

  // The spec of a source, or why there is none.
  const std::function<StatusOr<TensorSpec>(const std::string&)> source_spec =
      [&](const std::string& source) -> StatusOr<TensorSpec> {
    if (auto it = values.find(source); it != values.end()) return it->second;
    const auto [step, output] = SplitSource(source);
    const auto& outs = step_outputs.at(step);  // the parse checked the step exists and runs first
    return InvalidArgument("step '" + step + "' has no output '" + output + "' (it gives " +
                           Names(outs) + ")");
  };

  for (const StepConfig& step : config.steps) {
    BoundStep bound;
    bound.config = step;
    const std::string at = Where(step);
    if (step.kind == StepKind::kCascade) {
      SOMM_RETURN_IF_ERROR(BindCascade(config.name, step, lookup, source_spec, &owner, &bound));
    } else if (step.kind == StepKind::kModel || step.kind == StepKind::kTask) {
      const std::string field = at + (step.kind == StepKind::kModel ? ".model" : ".task");
      auto sig = lookup(step);
      if (!sig.ok()) return FieldError(config.name, field, sig.status());
      if (!sig->batched) {
        return FieldError(config.name, field,
                          InvalidArgument("model '" + step.model +
                                          "' does not batch (max_batch_size 0); a pipeline step "
                                          "needs one that does"));
      }
      SOMM_RETURN_IF_ERROR(JoinOwner(config.name, field, sig->owner_tenant, &owner));
      SOMM_RETURN_IF_ERROR(CheckFed(config.name, at, step, *sig, source_spec, &bound.sources));
      bound.inputs = sig->inputs;
      bound.outputs = sig->outputs;
    } else {
      const std::string expected = BuiltinInputName(step.kind);
      if (step.inputs.size() != 1 || step.inputs[0].first != expected) {
        return FieldError(config.name, at + ".inputs",
                          InvalidArgument(std::string(StepKindName(step.kind)) +
                                          " takes one input, '" + expected + "'"));
      }
      const std::string in_field = at + ".inputs." + expected;
      auto from = source_spec(step.inputs[0].second);
      if (!from.ok()) return FieldError(config.name, in_field, from.status());
      auto outs = BuiltinOutputs(step, *from);
      if (!outs.ok()) return FieldError(config.name, in_field, outs.status());
      if (step.kind == StepKind::kPreprocess &&
          config.max_batch_size * ElementCount(outs->front().shape) * int64_t{4} > kMaxStepBytes) {
        return FieldError(config.name, at + ".preprocess",
                          InvalidArgument("max_batch_size images of this size take over " +
                                          std::to_string(kMaxStepBytes) + " bytes"));
      }
      bound.sources.push_back(*from);
      bound.inputs = {TensorSpec{expected, from->datatype, from->shape}};
      bound.outputs = std::move(outs).value();
    }
    for (const std::string& declared : step.outputs) {
      if (Find(bound.outputs, declared) == nullptr) {
        return FieldError(config.name, at + ".outputs",
                          InvalidArgument("no output '" + declared + "' (it gives " +
                                          Names(bound.outputs) + ")"));
      }
    }
    step_outputs[step.name] = bound.outputs;
    for (const auto& out : bound.outputs) values[step.name + "." + out.name] = out;
    for (const auto& [_, source] : step.inputs) ++plan.readers[source];
    plan.steps.push_back(std::move(bound));
  }
  for (size_t i = 0; i < config.outputs.size(); ++i) {
    const PipelineOutput& out = config.outputs[i];
    const std::string field = "outputs[" + std::to_string(i) + "].from";
    auto from = source_spec(out.from);
    if (!from.ok()) return FieldError(config.name, field, from.status());
    if (Status s = CheckEdge(*from, out.spec); !s.ok()) return FieldError(config.name, field, s);
    ++plan.readers[out.from];
  }
  plan.owner_tenant = owner;
  return plan;
}

}  // namespace somm::pipeline
