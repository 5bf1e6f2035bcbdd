// A pipeline's cascade step at work (pipeline_config.h `cascade:`; the
// policy is cascade.h): its calibration when the pipeline loads, and one
// query's run through its stages.
//
// CalibrateCascade is the cascade's registration. It reads the validation
// data of the first stage's model (<repo>/<model>/<latest loaded
// version>/validation/, variants/validation_data.h), runs it through every
// stage with InferenceServer::Infer as a server-internal caller, and sets
// the step's threshold: chosen by ChooseThreshold for `min_accuracy`, or
// the given `threshold`, evaluated on the data when there is some. It
// blocks until the stages answer (at most `timeout` each) and returns
// what it found as text for the metadata and the answers; an error
// (FailedPrecondition when no threshold meets the accuracy) is the
// pipeline's load error.
//
// RunCascade runs one query's step: every sample through the first stage,
// then only the samples whose confidence is below the threshold through
// the next (a sub-batch of those rows, in order), and so on; each stage's
// answer rows are merged back in place. Each stage is a query through
// `inner` with the query's caller and parameters, so authentication,
// selection and batching apply to it as to any query; a query's
// min_accuracy is the cascade's (the caller checks it against the
// calibration) and each stage is asked, instead, for the accuracy it was
// calibrated at (`stage_min_accuracy`). `done` gets the
// step's outputs (the stages' scores, and `stage`, INT64 [batch, 1]) and
// its explanation: the threshold, which stage answered each sample, and
// each stage's own explanation with its rows. It is called once, on the
// thread of the last stage's answer (or the caller's on an early error).
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "api/inference_server.h"
#include "pipeline/pipeline_plan.h"

namespace somm::pipeline {

StatusOr<std::string> CalibrateCascade(InferenceServer& inner, const std::string& repository,
                                       BoundStep* step,
                                       std::chrono::seconds timeout = std::chrono::seconds(120));

struct CascadeQuery {
  InferenceServer* inner = nullptr;
  const BoundStep* step = nullptr;  // outlives the run (the caller holds its plan)
  InferenceRequest base;            // caller, id, parameters; no inputs
  std::vector<Tensor> inputs;       // batched, per-sample shapes as the first stage takes them
  int64_t batch = 0;
  // The latency_slo_ms to send the next stage (called before each), or
  // an error to answer with instead; null: no SLO.
  std::function<StatusOr<double>()> budget_ms;
  // Each stage's min_accuracy (empty: the base parameters' as they are).
  std::vector<double> stage_min_accuracy;
};

struct CascadeResult {
  std::vector<Tensor> outputs;  // the stages' scores, then `stage`
  std::string explanation;
};

void RunCascade(CascadeQuery query, std::function<void(StatusOr<CascadeResult>)> done);

}  // namespace somm::pipeline
