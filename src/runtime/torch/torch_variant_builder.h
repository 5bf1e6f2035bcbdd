// BuildTorchVariant: libtorch's half of Backend::BuildVariant.
//
// Loads a TorchScript file, applies a VariantRecipe and saves the result:
//   * precision kBf16 / kFp16: floating-point parameters and buffers are
//     converted (integer buffers, such as indices, are left alone); fp16 is
//     built on, and for, CUDA only, since libtorch's CPU kernels lack most
//     fp16 ops;
//   * always: torch::jit::freeze, so weights are constants in the saved graph
//     (freeze also folds conv/batch-norm and other numerics-preserving
//     rewrites). optimize_for_inference is not applied here: its output is
//     not serialisable in torch 1.13 (LoadOptions::optimize_for_inference
//     runs it at load instead).
// The file is written to dst + ".tmp" and renamed, so a reader never sees a
// half-written variant. Torch-free header; errors are Status values naming
// the file and the step that failed. Thread-safe (no shared state).
#pragma once

#include <string>

#include "common/status.h"
#include "runtime/backend.h"

namespace somm {

Status BuildTorchVariant(const VariantRecipe& recipe, const std::string& src_path,
                         const std::string& dst_path);

}  // namespace somm
