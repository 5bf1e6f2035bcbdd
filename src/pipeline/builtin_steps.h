// The built-in steps of a pipeline, on tensors: `preprocess` (encoded
// images in, NCHW FP32 out, through image/image_decode.h) and
// `postprocess` (softmax, argmax, top-k with labels). Shapes carry the
// batch first: a query of N samples gives N rows.
//
// Contract: every image of a batch is checked against the limits from its
// header before any is decoded, so a batch with one hostile image costs
// header reads only; errors are InvalidArgument naming the image's index.
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/tensor.h"
#include "pipeline/pipeline_config.h"

namespace somm::pipeline {

// A BYTES tensor's elements (4-byte little-endian length, then the bytes).
StatusOr<std::vector<std::string_view>> SplitBytes(const Tensor& tensor);
std::string JoinBytes(const std::vector<std::string>& elements);

// `images`: BYTES, `batch` elements -> `pixels`: FP32 [batch, C, H, W].
StatusOr<Tensor> RunPreprocess(const PreprocessOptions& options, const Tensor& images,
                               int64_t batch);

// `scores`: FP32, batch x classes -> `probabilities` [batch, classes] and,
// with argmax, `class` / `score` (/ `label`) [batch, 1]; with top_k,
// `classes` / `scores` (/ `labels`) [batch, k], best first (ties: lower
// class first).
StatusOr<std::vector<Tensor>> RunPostprocess(const PostprocessOptions& options,
                                             const Tensor& scores, int64_t batch);

}  // namespace somm::pipeline
