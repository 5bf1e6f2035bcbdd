// Backend: the narrow seam between somm and an execution framework.
//
// A Backend turns a model file into an ExecutableModel bound to one device.
// somm's core never sees framework types: tensors cross this seam as
// somm::Tensor (raw bytes + dtype + shape). Today the only backend is
// libtorch (runtime/torch/); ONNX Runtime or TensorRT would slot in here.
//
// Threading: Backend::Load may be called from any thread, concurrently.
// One ExecutableModel is driven by one thread at a time (its batcher), which
// calls BindToThread() once before its first Execute().
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/tensor.h"
#include "repository/model_config.h"

namespace somm {

enum class DeviceKind { kCpu, kCuda };

struct Device {
  DeviceKind kind = DeviceKind::kCpu;
  int index = 0;
  std::string ToString() const {
    return kind == DeviceKind::kCpu ? "cpu" : "cuda:" + std::to_string(index);
  }
};

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
};

}  // namespace somm
