// The text side of somm's model-less CLI: parsing the flags of `somm register`
// and `somm infer --param`, and the tables and progress line that `somm
// register --wait`, `somm variants`, `somm models` and `somm decisions` print.
//
// Pure functions of their arguments (no I/O), so each is unit-tested apart
// from any server. Parse errors are InvalidArgument naming the flag and what
// was expected.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"
#include "repository/model_config.h"
#include "api/inference.h"
#include "api/inference_server.h"

namespace somm {

// "pixels:FP32:64", "image:FP32:3x224x224" or "image:FP32:3,-1,-1": a tensor's
// name, datatype and per-sample dims (-1 = variable; an empty dims part is a
// scalar). `flag` names the option in errors ("--input").
StatusOr<TensorSpec> ParseTensorFlag(std::string_view text, const std::string& flag);

// "key=value" for `somm infer --param`: true/false become bool, anything
// strtod reads whole (and finite) becomes double, the rest stays a string.
StatusOr<std::pair<std::string, Parameter>> ParseParamFlag(std::string_view text);

// "[#####.....] 5/10 profiling ts-int8 on cpu1": a 10-cell bar of done/total
// and the phase in progress.
std::string ProgressLine(const RegistrationStatus& status);

// The VARIANTS cell of `somm models`: "READY (3 variants)", "GENERATING 4/9",
// "FAILED", or the state as reported.
std::string VariantsSummary(const RegistrationStatus& status);

// One row per variant: id, precision, usable, accuracy, latency at batch 1 on
// each hardware configuration (ms), load time and peak memory (the largest
// over its hardware), followed by why unusable variants are unusable and
// which variants were skipped.
std::string VariantTable(const RegistrationStatus& status);

// The decision log in the order given (servers send newest first): time
// (UTC), target, requirements, outcome, variant, hardware, predicted latency,
// cost, reason.
std::string DecisionTable(const std::vector<DecisionRecord>& decisions);

}  // namespace somm
