// The torchscript platform's registration (runtime/backend_registry.h):
// TorchScript files named model.pt, reported to OIP clients as
// pytorch_torchscript, and the variants libtorch can make of them.
//
// Torch-free, so every binary knows the platform; torch_backend.cc binds the
// factory where libtorch is linked. The variants, in generation order:
//   ts-fp32       the registered file, hard-linked (copied across filesystems)
//   ts-opt        frozen; the backend runs optimize_for_inference when it loads
//                 it (LoadOptions::optimize_for_inference: the optimised graph
//                 cannot be saved in torch 1.13 and is specific to its device)
//   ts-int8       dynamic int8 Linear layers, via tools/quantize_dynamic.py run
//                 with `python` (libtorch's C++ API has no dynamic
//                 quantisation); CPU only (quantized kernels are CPU kernels)
//   ts-bf16       bf16 weights, CPU only, built only where the CPU has
//                 avx512_bf16 or AMX (elsewhere bf16 is emulated: slower than fp32)
//   ts-fp16-cuda  fp16 weights on CUDA, only when the backend reports a GPU
#pragma once

#include "runtime/backend_registry.h"

namespace somm {

inline constexpr char kTorchScriptPlatform[] = "torchscript";

inline constexpr char kVariantFp32[] = "ts-fp32";
inline constexpr char kVariantOpt[] = "ts-opt";
inline constexpr char kVariantInt8[] = "ts-int8";
inline constexpr char kVariantBf16[] = "ts-bf16";
inline constexpr char kVariantFp16Cuda[] = "ts-fp16-cuda";

BackendRegistration TorchScriptRegistration();

}  // namespace somm
