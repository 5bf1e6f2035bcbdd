// A pipeline's switch and fan-out steps at work (pipeline_config.h
// `switch:` and `fanout:`; bound by pipeline_plan.h).
//
// RunSwitch sends the query to the model of the case its value names: the
// value of a request parameter, for the whole query; or, switching on a
// pipeline input, each sample's value, the samples of each case sent to
// its model as one sub-batch (all cases at once) and the answer rows
// merged back in order. A value no case names goes to the default model;
// without one the query is refused (InvalidArgument naming the value and
// the cases). RunFanout sends the step's inputs to every branch at once
// and joins their outputs (each, mean, concat).
//
// Every model query goes through `inner` with the query's caller and
// parameters, as a model step's does. `done` gets the step's outputs and
// its explanation (the value or values, each model's rows and its own
// explanation), once, on the thread of the last answer (or the caller's on
// an early error); a branch's error is the step's.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "api/inference_server.h"
#include "pipeline/pipeline_plan.h"

namespace somm::pipeline {

struct BranchQuery {
  InferenceServer* inner = nullptr;
  const BoundStep* step = nullptr;  // outlives the run (the caller holds its plan)
  InferenceRequest base;            // caller, id, parameters; no inputs
  std::vector<Tensor> inputs;       // batched, as the step's first model takes them
  int64_t batch = 0;
  // The latency_slo_ms to send (called once, before the models are asked),
  // or an error to answer with instead; null: no SLO.
  std::function<StatusOr<double>()> budget_ms;
  // A switch's value: the request parameter's (nullopt: not sent), or the
  // pipeline input's tensor, one element per sample.
  std::optional<Parameter> parameter;
  Tensor selector;
};

struct BranchResult {
  std::vector<Tensor> outputs;
  std::string explanation;
};

using BranchDone = std::function<void(StatusOr<BranchResult>)>;

void RunSwitch(BranchQuery query, BranchDone done);
void RunFanout(BranchQuery query, BranchDone done);

// A parameter's value as a case is written: strings as they are, integers
// in decimal, true / false, other numbers as %g.
std::string ParameterText(const Parameter& p);

}  // namespace somm::pipeline
