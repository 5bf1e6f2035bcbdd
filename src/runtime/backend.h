// Backend: the narrow seam between somm and an execution framework.
//
// A Backend turns a model file into an ExecutableModel bound to one device.
// somm's core never sees framework types: tensors cross this seam as
// somm::Tensor (raw bytes + dtype + shape). Today the only backend is
// libtorch (runtime/torch/); ONNX Runtime or TensorRT would slot in here.
//
// Threading: Backend::Load and Backend::BuildVariant may be called from any
// thread, concurrently. One ExecutableModel is driven by one thread at a time
// (its batcher), which calls BindToThread() once before its first Execute().
//
// Variants: BuildVariant derives a variant's model file from the registered
// one (frozen, optionally at reduced precision); variants/ decides
// which variants to build and profiles them through Load/Execute. A variant
// built with a reduced `precision` is loaded with LoadOptions::precision set
// to the same type, and the backend converts at the seam, so every variant
// keeps the registered model's signature (FP32 in, FP32 out).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/tensor.h"
#include "profiles/device.h"
#include "repository/model_config.h"

namespace somm {


struct LoadOptions {
  std::string model_name;  // for error messages
  int64_t model_version = 1;
  std::string model_path;  // the TorchScript file
  Device device;
  int intra_op_threads = 1;
  // > 0: inputs carry a batch dim in front of the config's shapes.
  int64_t max_batch_size = 0;
  // The config's signature: inputs are handed to the model in this order and
  // outputs are matched to these names (by position for tuple outputs).
  std::vector<TensorSpec> inputs;
  std::vector<TensorSpec> outputs;
  // The type the model's weights compute in. kFp32 (the default) hands
  // inputs over as declared. kBf16 or kFp16 (a reduced-precision variant):
  // FP32 inputs are cast to it before the model runs and its outputs are cast
  // back to the declared FP32, so callers never see the difference.
  DataType precision = DataType::kFp32;
  // Run the framework's inference graph optimisations once loaded (libtorch:
  // torch::jit::optimize_for_inference, which freezes first if needed). This
  // happens at load, not in BuildVariant, because in torch 1.13 the optimised
  // graph holds MKLDNN constant tensors that TorchScript cannot serialise (the
  // saved file fails to load), and because it is specific to the device.
  bool optimize_for_inference = false;
  // Whether a query is waiting for this load (an on-demand load of a
  // variant). By default a load is background work: it takes only the CPU
  // that serving threads leave idle, so it cannot slow them down, and on a
  // saturated machine it waits (runtime/torch/torch_threads.h). An urgent
  // load competes at normal priority instead.
  bool urgent = false;
  // Warm-up before the instance is ready (model.yaml's warmup): runs at each
  // batch size (-1 runs: the backend's default; empty sizes: batch 1).
  int warmup_runs = -1;
  std::vector<int64_t> warmup_batch_sizes;
};

// How BuildVariant derives a variant's file from the registered model file.
// The result is always frozen (weights become constants of the graph).
struct VariantRecipe {
  // Convert weights to this type: kFp32 leaves them alone; kBf16, kFp16.
  DataType precision = DataType::kFp32;
  // Where the variant will run; the file may only work there (fp16 on CUDA).
  Device device;
};

class ExecutableModel {
 public:
  virtual ~ExecutableModel() = default;
  // Prepares the calling thread (for example its intra-op thread count).
  virtual void BindToThread() {}
  // Runs one batch. `inputs` follow LoadOptions::inputs order; on success
  // `outputs` follows LoadOptions::outputs order. Never throws.
  virtual Status Execute(const std::vector<Tensor>& inputs, std::vector<Tensor>* outputs) = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string Name() const = 0;
  // Devices this process can run on, detected at run time. CPU is always first.
  virtual std::vector<Device> Devices() const = 0;
  virtual StatusOr<std::unique_ptr<ExecutableModel>> Load(const LoadOptions& options) = 0;
  // Writes the variant of the model file `src_path` that `recipe` describes
  // to `dst_path` (overwriting it). Backends without variant support keep
  // this default.
  virtual Status BuildVariant(const VariantRecipe& recipe, const std::string& src_path,
                              const std::string& dst_path) {
    return Unimplemented("backend '" + Name() + "' cannot build variants");
  }
};

}  // namespace somm
