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
  auto source_spec = [&](const std::string& source) -> StatusOr<TensorSpec> {
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
    if (step.kind == StepKind::kModel || step.kind == StepKind::kTask) {
      const std::string field = at + (step.kind == StepKind::kModel ? ".model" : ".task");
      auto sig = lookup(step);
      if (!sig.ok()) return FieldError(config.name, field, sig.status());
      if (!sig->batched) {
        return FieldError(config.name, field,
                          InvalidArgument("model '" + step.model +
                                          "' does not batch (max_batch_size 0); a pipeline step "
                                          "needs one that does"));
      }
      if (!sig->owner_tenant.empty()) {
        if (!owner.empty() && owner != sig->owner_tenant) {
          return FieldError(config.name, field,
                            InvalidArgument("the steps use private models of two tenants"));
        }
        owner = sig->owner_tenant;
      }
      for (const auto& [name, source] : step.inputs) {
        const std::string in_field = at + ".inputs." + name;
        const TensorSpec* takes = Find(sig->inputs, name);
        if (takes == nullptr) {
          return FieldError(config.name, in_field,
                            InvalidArgument("the " + std::string(StepKindName(step.kind)) +
                                            " takes no input '" + name + "' (it takes " +
                                            Names(sig->inputs) + ")"));
        }
        auto from = source_spec(source);
        if (!from.ok()) return FieldError(config.name, in_field, from.status());
        if (Status s = CheckEdge(*from, *takes); !s.ok()) {
          return FieldError(config.name, in_field, s);
        }
        bound.sources.push_back(*from);
      }
      for (const auto& takes : sig->inputs) {
        const bool fed = std::any_of(step.inputs.begin(), step.inputs.end(),
                                     [&](const auto& kv) { return kv.first == takes.name; });
        if (!fed) {
          return FieldError(config.name, at + ".inputs",
                            InvalidArgument("input '" + takes.name + "' is not fed"));
        }
      }
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
