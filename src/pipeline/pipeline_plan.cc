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

// The models a switch or fan-out step queries, each a batching model fed
// the step's inputs, into bound->models and bound->stages.
Status BindModels(const std::string& pipeline, const StepConfig& step,
                  const std::vector<std::pair<std::string, std::string>>& models,
                  const SignatureLookup& lookup,
                  const std::function<StatusOr<TensorSpec>(const std::string&)>& source_spec,
                  std::string* owner, BoundStep* bound) {
  for (const auto& [field, model] : models) {
    if (std::find(bound->models.begin(), bound->models.end(), model) != bound->models.end()) continue;
    StepConfig as_model = step;
    as_model.kind = StepKind::kModel;
    as_model.model = model;
    auto sig = lookup(as_model);
    if (!sig.ok()) return FieldError(pipeline, field, sig.status());
    if (!sig->batched) {
      return FieldError(pipeline, field,
                        InvalidArgument("model '" + model + "' does not batch (max_batch_size 0)"));
    }
    SOMM_RETURN_IF_ERROR(JoinOwner(pipeline, field, sig->owner_tenant, owner));
    SOMM_RETURN_IF_ERROR(CheckFed(pipeline, Where(step), as_model, *sig, source_spec,
                                  bound->stages.empty() ? &bound->sources : nullptr));
    if (bound->stages.empty()) bound->inputs = sig->inputs;
    bound->models.push_back(model);
    bound->stages.push_back(std::move(sig).value());
  }
  return Status::Ok();
}

bool SameSpecs(const std::vector<TensorSpec>& a, const std::vector<TensorSpec>& b, bool but_last_dim) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].name != b[i].name || a[i].datatype != b[i].datatype ||
        a[i].shape.size() != b[i].shape.size()) {
      return false;
    }
    for (size_t d = 0; d + (but_last_dim ? 1 : 0) < a[i].shape.size(); ++d) {
      if (a[i].shape[d] != b[i].shape[d]) return false;
    }
  }
  return true;
}

std::string Describe(const std::vector<TensorSpec>& specs) {
  std::string s;
  for (const auto& t : specs) {
    s += (s.empty() ? "" : ", ") + t.name + " " + DataTypeName(t.datatype) + " " + ShapeToString(t.shape);
  }
  return s;
}

Status BindSwitch(const std::string& pipeline, const StepConfig& step, const SignatureLookup& lookup,
                  const std::function<StatusOr<TensorSpec>(const std::string&)>& source_spec,
                  std::string* owner, BoundStep* bound) {
  const std::string at = Where(step) + ".switch";
  const SwitchOptions& sw = step.switch_;
  std::vector<std::pair<std::string, std::string>> models;
  for (const auto& [value, model] : sw.cases) models.emplace_back(at + ".cases." + value, model);
  if (!sw.default_model.empty()) models.emplace_back(at + ".default", sw.default_model);
  SOMM_RETURN_IF_ERROR(BindModels(pipeline, step, models, lookup, source_spec, owner, bound));
  for (size_t k = 1; k < bound->stages.size(); ++k) {
    if (!SameSpecs(bound->stages[k].outputs, bound->stages[0].outputs, false)) {
      return FieldError(pipeline, at,
                        InvalidArgument("model '" + bound->models[k] + "' gives " +
                                        Describe(bound->stages[k].outputs) + " where '" +
                                        bound->models[0] + "' gives " +
                                        Describe(bound->stages[0].outputs) +
                                        "; a switch's models must give the same outputs"));
    }
  }
  bound->outputs = bound->stages[0].outputs;
  if (sw.input.empty()) return Status::Ok();
  auto spec = source_spec(sw.input);
  if (!spec.ok()) return FieldError(pipeline, at + ".input", spec.status());
  const DataType t = spec->datatype;
  if (ElementCount(spec->shape) != 1 ||
      (t != DataType::kBytes && t != DataType::kInt32 && t != DataType::kInt64 && t != DataType::kBool)) {
    return FieldError(pipeline, at + ".input",
                      InvalidArgument("a switch reads one BYTES, INT32, INT64 or BOOL element per "
                                      "sample, not " + std::string(DataTypeName(t)) + " " +
                                      ShapeToString(spec->shape)));
  }
  for (const auto& out : bound->outputs) {
    if (out.datatype == DataType::kBytes) {
      return FieldError(pipeline, at + ".input",
                        InvalidArgument("a switch per sample merges its models' rows, and output '" +
                                        out.name + "' is BYTES; switch on a parameter instead"));
    }
  }
  bound->switch_input = *spec;
  return Status::Ok();
}

Status BindFanout(const std::string& pipeline, const StepConfig& step, const SignatureLookup& lookup,
                  const std::function<StatusOr<TensorSpec>(const std::string&)>& source_spec,
                  std::string* owner, BoundStep* bound) {
  const std::string at = Where(step) + ".fanout";
  std::vector<std::pair<std::string, std::string>> models;
  for (size_t k = 0; k < step.fanout.models.size(); ++k) {
    models.emplace_back(at + ".models[" + std::to_string(k) + "]", step.fanout.models[k]);
  }
  SOMM_RETURN_IF_ERROR(BindModels(pipeline, step, models, lookup, source_spec, owner, bound));
  const Join join = step.fanout.join;
  if (join == Join::kEach) {
    for (size_t k = 0; k < bound->stages.size(); ++k) {
      for (TensorSpec out : bound->stages[k].outputs) {
        out.name = bound->models[k] + "." + out.name;
        bound->outputs.push_back(std::move(out));
      }
    }
    return Status::Ok();
  }
  const std::vector<TensorSpec>& first = bound->stages[0].outputs;
  for (size_t k = 0; k < bound->stages.size(); ++k) {
    const auto& outs = bound->stages[k].outputs;
    bool fits = SameSpecs(outs, first, join == Join::kConcat);
    for (const auto& o : outs) {
      fits = fits && FullyKnown(o.shape) && !o.shape.empty() &&
             (join == Join::kMean ? o.datatype == DataType::kFp32 : o.datatype != DataType::kBytes);
    }
    if (!fits) {
      return FieldError(pipeline, at + ".join",
                        InvalidArgument(std::string("join ") + JoinName(join) + " needs " +
                                        (join == Join::kMean
                                             ? "every model to give the same FP32 outputs"
                                             : "every model to give the same outputs, numeric and "
                                               "of known shapes, but for their last dimension") +
                                        ": '" + bound->models[k] + "' gives " + Describe(outs) +
                                        ", '" + bound->models[0] + "' " + Describe(first)));
    }
  }
  bound->outputs = first;
  if (join == Join::kConcat) {
    for (size_t i = 0; i < first.size(); ++i) {
      int64_t last = 0;
      for (const auto& sig : bound->stages) last += sig.outputs[i].shape.back();
      bound->outputs[i].shape.back() = last;
    }
  }
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
      bound.models = step.cascade.models;
    } else if (step.kind == StepKind::kSwitch) {
      SOMM_RETURN_IF_ERROR(BindSwitch(config.name, step, lookup, source_spec, &owner, &bound));
      if (!step.switch_.input.empty()) ++plan.readers[step.switch_.input];
    } else if (step.kind == StepKind::kFanout) {
      SOMM_RETURN_IF_ERROR(BindFanout(config.name, step, lookup, source_spec, &owner, &bound));
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

Shape Batched(int64_t batch, const Shape& per_sample) {
  Shape s = {batch};
  s.insert(s.end(), per_sample.begin(), per_sample.end());
  return s;
}

int64_t MicrosecondsSince(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() -
                                                               since)
      .count();
}

}  // namespace somm::pipeline
