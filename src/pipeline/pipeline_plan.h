// PipelinePlan: a parsed pipeline (pipeline_config.h) bound to the
// signatures of the models and tasks its steps call, checked end to end
// before any query runs it.
//
// BindPipeline asks `lookup` for each model or task step's signature (the
// server's metadata: per-sample shapes, whether the model batches, its
// owner), derives the built-in steps' signatures from their options and
// their sources, and checks every edge: the source exists (an unknown step
// output names the outputs there are), the datatypes agree, the per-sample
// shapes agree (-1 matches any size; two fully known shapes of the same
// element count also agree, and the value is reshaped, as
// `[1, 8, 8]` -> `[64]`), every model input is fed and nothing else is. It
// also counts each value's readers, so that a run moves a value into its
// last reader instead of copying it. A cascade step's stages are each
// bound as a model step fed the step's inputs, and must each give one FP32
// output of the same number of classes; the step gives that output (named
// as the first stage's) and `stage`, INT64 [1], the stage that answered.
// A switch's cases and a fan-out's branches are bound the same way (each
// model fed the step's inputs): a switch's models must give the same
// outputs, which it gives; a fan-out gives each model's as
// `<model>.<output>` (join each), or their element-wise mean (mean: the
// same FP32 outputs) or their concatenation along the last dimension
// (concat: the same outputs but for that dimension).
// Errors are InvalidArgument (NotFound for an unknown model or task) naming
// the step and the field.
//
// Pure: no I/O, no threads.
#pragma once

#include <chrono>

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "pipeline/pipeline_config.h"
#include "repository/model_config.h"

namespace somm::pipeline {

// What a model or task step takes and gives, per sample.
struct StepSignature {
  std::vector<TensorSpec> inputs;
  std::vector<TensorSpec> outputs;
  bool batched = true;      // false: the model takes no batch dimension
  std::string owner_tenant;  // "" = public
  int64_t max_batch_size = 0;  // a model's (0: not known)
  std::vector<std::string> versions;  // a model's loaded versions, ascending
};

using SignatureLookup = std::function<StatusOr<StepSignature>(const StepConfig& step)>;

struct BoundStep {
  StepConfig config;
  std::vector<TensorSpec> inputs;   // as the step takes them, per sample
  std::vector<TensorSpec> outputs;  // as it gives them, per sample
  // For each of config.inputs: the spec of its source.
  std::vector<TensorSpec> sources;
  // kCascade, kSwitch, kFanout: the models it queries and their
  // signatures (a cascade's stages, a switch's distinct case models, the
  // default last, a fan-out's branches).
  std::vector<std::string> models;
  std::vector<StepSignature> stages;
  // kSwitch on an input: its spec.
  TensorSpec switch_input;
  // kCascade: the classes of the stages' one output, and the threshold
  // (set when the pipeline loads, cascade_step.h).
  int64_t classes = 0;
  double threshold = 0;
  // The cascade's and each stage's top-1 on the validation data (-1 and
  // empty when it had none): a query's min_accuracy is held against the
  // first, and each stage is asked for a variant as accurate as the one
  // it was calibrated with.
  double validation_accuracy = -1;
  std::vector<double> validation_reach;  // per stage, as CascadeFigures::reach
  std::vector<double> stage_accuracy;
  std::string calibration;  // how the threshold was set, for metadata and answers
};

struct PipelinePlan {
  std::string name;
  std::string description;
  int64_t max_batch_size = 8;
  std::vector<TensorSpec> inputs;
  std::vector<PipelineOutput> outputs;
  std::vector<BoundStep> steps;  // in run order
  // Readers of each value ("image", "decode.pixels"): step inputs and
  // pipeline outputs.
  std::map<std::string, int> readers;
  // The tenant of the private models its steps use ("" = none): the
  // pipeline is that tenant's (two tenants' models in one pipeline are
  // refused).
  std::string owner_tenant;
};

StatusOr<PipelinePlan> BindPipeline(const PipelineConfig& config, const SignatureLookup& lookup);

// Whether a value of `from` may feed `to` (per sample), and the reason
// when not.
Status CheckEdge(const TensorSpec& from, const TensorSpec& to);

// The output specs of a built-in step, given the spec of its one input.
StatusOr<std::vector<TensorSpec>> BuiltinOutputs(const StepConfig& step, const TensorSpec& input);
// The input a built-in step takes: `image` (preprocess), `logits` (postprocess).
const char* BuiltinInputName(StepKind kind);

// A per-sample shape with its batch dim in front: [batch, per_sample...].
Shape Batched(int64_t batch, const Shape& per_sample);
// Whole microseconds since `since` (a step's time in its explanation).
int64_t MicrosecondsSince(std::chrono::steady_clock::time_point since);

}  // namespace somm::pipeline
