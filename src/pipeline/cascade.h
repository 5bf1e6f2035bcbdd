// The cascade policy: a cheap model answers a sample when it is confident
// enough, and the next model only the samples it is not. Pure functions,
// no I/O, no clock; cascade_step.h does the querying.
//
// A stage's confidence in a sample is computed from its FP32 logits:
// `top_probability` is the softmax's top-1, `margin` its top-1 minus its
// top-2 (both in [0, 1]). A sample goes on to the next stage when the
// stage's confidence is below the threshold; the last stage answers every
// sample that reaches it. One threshold serves every stage but the last.
//
// ChooseThreshold is the calibration done when a pipeline loads: from each
// stage's confidence in, and correctness on, every validation sample, it
// returns the threshold with the lowest escalation (a higher threshold
// never sends fewer samples on, so this is the lowest threshold) whose
// cascade accuracy meets `min_accuracy`, or FailedPrecondition when even
// sending every sample to the last stage does not. The chosen threshold
// is the midpoint between the confidences on either side of the cut, so
// the validation samples fall on the side they were counted on.
//
// The sub-batch helpers gather the rows of a batched tensor that go on and
// scatter a later stage's answer rows back into place, keeping the order.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/tensor.h"

namespace somm::pipeline {

enum class Confidence { kTopProbability, kMargin };
const char* ConfidenceName(Confidence on);

// The confidence of each of `rows` rows of `classes` logits.
std::vector<double> Confidences(Confidence on, const float* logits, int64_t rows, int64_t classes);
// The index of a row's largest logit (ties: the lower class).
int64_t Argmax(const float* row, int64_t classes);

// What a threshold does on a validation set.
struct CascadeFigures {
  double threshold = 0;
  double accuracy = 0;            // of the cascade
  std::vector<double> reach;      // per stage: the share of samples that reach it (reach[0] = 1)
  std::vector<int64_t> answered;  // per stage: samples it answered
};

// confidence[k][s]: stage k's confidence in sample s, for every stage but
// the last; correct[k][s]: whether stage k's top-1 is sample s's label, for
// every stage. All rows have the same, non-zero, number of samples.
StatusOr<CascadeFigures> ChooseThreshold(const std::vector<std::vector<double>>& confidence,
                                         const std::vector<std::vector<bool>>& correct,
                                         double min_accuracy);
CascadeFigures EvaluateThreshold(const std::vector<std::vector<double>>& confidence,
                                 const std::vector<std::vector<bool>>& correct, double threshold);

// The indices of the samples whose confidence is below `threshold`, in order.
std::vector<int64_t> Escalated(const std::vector<double>& confidence, double threshold);

// The rows `rows` (ascending indices) of a tensor whose first dimension is
// the batch, as a tensor of rows.size() rows; BYTES tensors included.
StatusOr<Tensor> GatherRows(const Tensor& batch, const std::vector<int64_t>& rows);
// Writes the rows of `part` (rows.size() rows) over rows `rows` of `into`
// (same datatype and per-row size; not BYTES).
Status ScatterRows(const Tensor& part, const std::vector<int64_t>& rows, Tensor* into);

}  // namespace somm::pipeline
