// PipelineConfig: the parsed form of <repo>/<name>/pipeline.yaml, a
// pipeline of steps that clients call as one model (docs/pipelines.md).
//
// A pipeline declares its own Open Inference Protocol signature (inputs and
// outputs, per sample: a query adds the batch dimension) and a directed
// acyclic graph of steps. Each step is one of
//   * `model: NAME` (optionally `version: N`): a model of the repository;
//   * `task: T` with `min_accuracy`: model-less, the selector picks the
//     model and variant per query;
//   * `preprocess: {...}`: decode PNG/JPEG bytes into NCHW FP32
//     (image/image_decode.h);
//   * `postprocess: {...}`: softmax, then argmax or top-k with labels;
//   * `cascade: {models: [cheap, ..., best], confidence: top_probability|margin,
//     min_accuracy: A | threshold: T}`: each sample goes to the next model
//     only when the one before is not confident enough (cascade.h); with
//     min_accuracy the threshold is chosen when the pipeline loads, on the
//     first model's validation data;
//   * `switch: {parameter: P | input: I, cases: {value: MODEL, ...},
//     default: MODEL}`: the model of the case the request parameter P
//     (per query) or the pipeline input I (per sample) names;
//   * `fanout: {models: [...], join: each|mean|concat}`: every model at
//     once on the same inputs, their outputs joined.
// A step's `inputs` map each of its input names to a pipeline input
// (`image`) or an earlier step's output (`decode.pixels`); the pipeline's
// `outputs` each name a step output in `from`.
//
// ParsePipelineConfig checks what the file alone can tell: fields and their
// types, unknown fields, step names, references to unknown steps and
// pipeline inputs, and cycles; `steps` comes back in an order that runs
// every step after those it reads (the file's order where it allows). What
// needs the models (datatypes, shapes, unknown models) is checked by
// BindPipeline (pipeline_plan.h). Errors are InvalidArgument, of the form
// "<file>: field 'steps[1].inputs.pixels': problem", naming the step.
// Never throws; pure apart from LoadPipelineConfig's reads.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "image/image_decode.h"
#include "pipeline/cascade.h"
#include "repository/model_config.h"

namespace somm::pipeline {

inline constexpr char kPipelineFile[] = "pipeline.yaml";
inline constexpr int kMaxSteps = 32;

enum class StepKind { kModel, kTask, kPreprocess, kPostprocess, kCascade, kSwitch, kFanout };
const char* StepKindName(StepKind kind);

struct PreprocessOptions {
  image::ImageTransform transform;
  image::ImageLimits limits;
};

struct PostprocessOptions {
  bool softmax = true;
  bool argmax = false;  // outputs `class`, `score` (and `label`)
  int top_k = 0;        // > 0: outputs `classes`, `scores` (and `labels`)
  std::string labels_file;          // a file in the pipeline's folder, one label a line
  std::vector<std::string> labels;  // its lines, read by LoadPipelineConfig
};

inline constexpr int kMaxCascadeStages = 4;

struct CascadeOptions {
  std::vector<std::string> models;  // 2..kMaxCascadeStages, cheapest first
  Confidence on = Confidence::kTopProbability;
  // Exactly one: the accuracy the threshold is chosen to meet on the
  // validation data, or the threshold itself.
  std::optional<double> min_accuracy;
  std::optional<double> threshold;
};

inline constexpr int kMaxBranches = 8;

struct SwitchOptions {
  // Exactly one: a request parameter (one value per query) or a pipeline
  // input with one element per sample (BYTES, INT32, INT64 or BOOL).
  std::string parameter;
  std::string input;
  std::vector<std::pair<std::string, std::string>> cases;  // value -> model
  std::string default_model;  // "" = none: a value no case names is refused
};

enum class Join { kEach, kMean, kConcat };
const char* JoinName(Join join);

struct FanoutOptions {
  std::vector<std::string> models;  // 2..kMaxBranches, run at once
  // each: every model's outputs, as `<model>.<output>`; mean: the
  // element-wise mean of same-named FP32 outputs; concat: same-named
  // outputs joined along their last dimension, in the models' order.
  Join join = Join::kEach;
};

struct StepConfig {
  std::string name;
  StepKind kind = StepKind::kModel;
  std::string model;    // kModel
  std::string version;  // kModel; "" = the server picks
  std::string task;     // kTask
  std::optional<double> min_accuracy;  // kTask
  PreprocessOptions preprocess;
  PostprocessOptions postprocess;
  CascadeOptions cascade;
  SwitchOptions switch_;
  FanoutOptions fanout;
  // Step input name -> source: a pipeline input, or "step.output".
  std::vector<std::pair<std::string, std::string>> inputs;
  std::vector<std::string> outputs;  // declared output names (optional; checked)
  int index_in_file = 0;             // for messages: steps[i]
};

struct PipelineOutput {
  TensorSpec spec;   // per sample
  std::string from;  // "step.output"
};

struct PipelineConfig {
  std::string name;
  std::string description;
  int64_t max_batch_size = 8;        // samples (images) per query
  std::vector<TensorSpec> inputs;    // per sample
  std::vector<PipelineOutput> outputs;
  std::vector<StepConfig> steps;     // in an order that runs each after its sources
};

// Splits "step.output" at the first dot; a pipeline input has no step.
std::pair<std::string, std::string> SplitSource(const std::string& source);

StatusOr<PipelineConfig> ParsePipelineConfig(const std::string& yaml_text,
                                             const std::string& source);
// Reads <dir>/pipeline.yaml and the labels files it names (plain file names
// in <dir>, at most 1 MiB each). The name defaults to the folder's and,
// when given, must match it.
StatusOr<PipelineConfig> LoadPipelineConfig(const std::string& dir);
// Whether <dir> holds a pipeline.yaml and no model.yaml.
bool IsPipelineFolder(const std::string& dir);

}  // namespace somm::pipeline
