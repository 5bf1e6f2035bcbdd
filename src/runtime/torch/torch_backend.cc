#include "runtime/torch/torch_backend.h"

#include <spdlog/spdlog.h>
#include <torch/cuda.h>
#include <torch/script.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <optional>
#include <utility>

#include "runtime/torch/torch_archive_check.h"
#include "runtime/torch/torch_registration.h"
#include "runtime/torch/torch_threads.h"
#include "runtime/torch/torch_variant_builder.h"
#include "common/host_probe.h"

namespace somm {
namespace {

StatusOr<torch::ScalarType> ToTorchType(DataType type) {
  switch (type) {
    case DataType::kBool: return torch::kBool;
    case DataType::kUint8: return torch::kByte;
    case DataType::kInt8: return torch::kChar;
    case DataType::kInt16: return torch::kShort;
    case DataType::kInt32: return torch::kInt;
    case DataType::kInt64: return torch::kLong;
    case DataType::kFp16: return torch::kHalf;
    case DataType::kBf16: return torch::kBFloat16;
    case DataType::kFp32: return torch::kFloat;
    case DataType::kFp64: return torch::kDouble;
    default:
      return Unimplemented(std::string("datatype ") + DataTypeName(type) +
                           " is not supported by the torchscript backend");
  }
}

DataType FromTorchType(torch::ScalarType type) {
  switch (type) {
    case torch::kBool: return DataType::kBool;
    case torch::kByte: return DataType::kUint8;
    case torch::kChar: return DataType::kInt8;
    case torch::kShort: return DataType::kInt16;
    case torch::kInt: return DataType::kInt32;
    case torch::kLong: return DataType::kInt64;
    case torch::kHalf: return DataType::kFp16;
    case torch::kBFloat16: return DataType::kBf16;
    case torch::kFloat: return DataType::kFp32;
    case torch::kDouble: return DataType::kFp64;
    default: return DataType::kInvalid;
  }
}

// The first line of a c10::Error is the useful part; the rest is a C++
// backtrace that means nothing to a client.
std::string FirstLine(const char* what) {
  std::string s(what);
  const auto nl = s.find('\n');
  return nl == std::string::npos ? s : s.substr(0, nl);
}

// The type a reduced-precision variant computes in; nullopt = as declared.
StatusOr<std::optional<torch::ScalarType>> ComputeType(DataType precision) {
  switch (precision) {
    case DataType::kFp32: return std::optional<torch::ScalarType>();
    case DataType::kBf16: return std::optional<torch::ScalarType>(torch::kBFloat16);
    case DataType::kFp16: return std::optional<torch::ScalarType>(torch::kHalf);
    default:
      return InvalidArgument(std::string("precision ") + DataTypeName(precision) +
                             " is not supported (FP32, BF16 or FP16)");
  }
}

class TorchModel : public ExecutableModel {
 public:
  TorchModel(LoadOptions options, torch::jit::Module module, torch::Device device,
             std::optional<torch::ScalarType> compute_type, const TorchBackendOptions& backend)
      : options_(std::move(options)),
        module_(std::move(module)),
        device_(device),
        compute_type_(compute_type),
        background_(backend.background),
        release_memory_(backend.release_memory_on_unload),
        pacer_(backend.background_pacer) {}

  // Freeing a model's graph and weights takes 10-30 ms of CPU (mobilenet's
  // many small objects more than resnet18's large tensors): background work,
  // like the load. The memory is free (and with release_memory_, given back
  // to the system) when the destructor returns.
  // It never waits for the pacer (a destructor may run wherever the last
  // reference goes), but its work counts toward the next load's rest.
  ~TorchModel() override {
    const auto cpu = RunOnBackgroundThread(background_, "somm-unload", [this] {
      module_.reset();
      if (release_memory_) ReleaseFreeMemory();
    });
    if (pacer_) pacer_->Record(DutyCyclePacer::Clock::now(), cpu);
  }

  void BindToThread() override { BindIntraOpThreads(options_.intra_op_threads); }

  Status Execute(const std::vector<Tensor>& inputs, std::vector<Tensor>* outputs) override {
    try {
      return ExecuteOrThrow(inputs, outputs);
    } catch (const c10::Error& e) {
      return Internal("model '" + Label() + "' failed: " + FirstLine(e.what()));
    } catch (const std::exception& e) {
      return Internal("model '" + Label() + "' failed: " + e.what());
    }
  }

 private:
  std::string Label() const {
    return options_.model_name + ":" + std::to_string(options_.model_version);
  }

  Status ExecuteOrThrow(const std::vector<Tensor>& inputs, std::vector<Tensor>* outputs) {
    c10::InferenceMode guard;
    std::vector<torch::jit::IValue> args;
    args.reserve(inputs.size());
    for (const Tensor& in : inputs) {
      SOMM_ASSIGN_OR_RETURN(torch::ScalarType type, ToTorchType(in.datatype));
      // from_blob borrows the bytes without copying. The batcher owns them
      // and drops them after Execute, so a model that writes into its input
      // in place harms nothing.
      auto* data = const_cast<char*>(in.data.data());
      torch::Tensor t = torch::from_blob(data, in.shape, torch::TensorOptions().dtype(type));
      if (device_.is_cuda()) t = t.to(device_, /*non_blocking=*/false, /*copy=*/true);
      if (compute_type_ && t.is_floating_point()) t = t.to(*compute_type_);
      args.emplace_back(std::move(t));
    }
    torch::jit::IValue result = module_->forward(args);
    return CollectOutputs(result, outputs);
  }

  Status CollectOutputs(const torch::jit::IValue& result, std::vector<Tensor>* outputs) {
    const auto& specs = options_.outputs;
    std::vector<torch::Tensor> tensors;
    if (result.isTensor()) {
      tensors.push_back(result.toTensor());
    } else if (result.isTuple() || result.isList()) {
      const auto elems = result.isTuple() ? result.toTupleRef().elements().vec()
                                          : result.toList().vec();
      for (const auto& e : elems) {
        if (!e.isTensor()) return Internal("model '" + Label() + "' returned a non-tensor output");
        tensors.push_back(e.toTensor());
      }
    } else if (result.isGenericDict()) {
      auto dict = result.toGenericDict();
      for (const auto& spec : specs) {
        auto it = dict.find(spec.name);
        if (it == dict.end()) {
          return Internal("model '" + Label() + "' returned no output named '" + spec.name + "'");
        }
        tensors.push_back(it->value().toTensor());
      }
    } else {
      return Internal("model '" + Label() + "' returned " + result.tagKind() +
                      ", expected a tensor, a tuple, a list or a dict of tensors");
    }
    if (tensors.size() != specs.size()) {
      return Internal("model '" + Label() + "' returned " + std::to_string(tensors.size()) +
                      " outputs but its config declares " + std::to_string(specs.size()));
    }
    outputs->clear();
    for (size_t i = 0; i < tensors.size(); ++i) {
      torch::Tensor t = tensors[i].to(torch::kCPU).contiguous();
      // A reduced-precision variant answers in the declared type.
      if (compute_type_ && t.scalar_type() == *compute_type_ &&
          specs[i].datatype == DataType::kFp32) {
        t = t.to(torch::kFloat);
      }
      const DataType type = FromTorchType(t.scalar_type());
      if (type != specs[i].datatype) {
        return Internal("model '" + Label() + "' returned output '" + specs[i].name + "' as " +
                        DataTypeName(type) + " but its config declares " +
                        DataTypeName(specs[i].datatype));
      }
      Tensor out;
      out.name = specs[i].name;
      out.datatype = type;
      out.shape.assign(t.sizes().begin(), t.sizes().end());
      out.data.assign(static_cast<const char*>(t.data_ptr()), t.nbytes());
      outputs->push_back(std::move(out));
    }
    return Status::Ok();
  }

  const LoadOptions options_;
  std::optional<torch::jit::Module> module_;  // reset only by the destructor
  const torch::Device device_;
  const std::optional<torch::ScalarType> compute_type_;
  const BackgroundThreadOptions background_;
  const bool release_memory_;
  const std::shared_ptr<DutyCyclePacer> pacer_;  // shared with the backend; may be null
};

// A batch of one sample of zeros, for warm-up; empty when a dim is variable.
std::vector<Tensor> WarmupInputs(const LoadOptions& options, bool batched, int64_t batch = 1) {
  std::vector<Tensor> inputs;
  for (const auto& spec : options.inputs) {
    Tensor t;
    t.name = spec.name;
    t.datatype = spec.datatype;
    if (batched) t.shape.push_back(batch);
    t.shape.insert(t.shape.end(), spec.shape.begin(), spec.shape.end());
    const int64_t count = ElementCount(t.shape);
    if (count < 0 || spec.datatype == DataType::kBytes) return {};
    t.data.assign(static_cast<size_t>(count) * DataTypeSize(spec.datatype), '\0');
    inputs.push_back(std::move(t));
  }
  return inputs;
}

class TorchBackend : public Backend {
 public:
  explicit TorchBackend(TorchBackendOptions options) : options_(options) {}

  std::string Name() const override { return "torchscript"; }

  std::vector<Device> Devices() const override {
    std::vector<Device> devices = {Device{DeviceKind::kCpu, 0}};
#ifdef SOMM_WITH_CUDA
    const int n = static_cast<int>(torch::cuda::device_count());
    for (int i = 0; i < n; ++i) devices.push_back(Device{DeviceKind::kCuda, i});
#endif
    return devices;
  }

  // Background work (torch_threads.h): on the caller's thread (a REST
  // handler) at normal priority and with the process's default thread count,
  // a load competed on equal terms with the models that were serving.
  StatusOr<std::unique_ptr<ExecutableModel>> Load(const LoadOptions& options) override {
    std::optional<StatusOr<std::unique_ptr<ExecutableModel>>> result;
    BackgroundThreadOptions thread = options_.background;
    if (options.urgent) {  // a query waits: normal priority, still one thread
      thread.sched_idle = false;
      thread.nice = 0;
    }
    const auto cpu = RunOnBackgroundThread(thread, "somm-load",
                                           [&] { result.emplace(LoadOnThisThread(options)); });
    if (pacer_) pacer_->Record(DutyCyclePacer::Clock::now(), cpu);
    return std::move(*result);
  }

  Status BuildVariant(const VariantRecipe& recipe, const std::string& src_path,
                      const std::string& dst_path) override {
    return BuildTorchVariant(recipe, src_path, dst_path);
  }

 private:
  StatusOr<std::unique_ptr<ExecutableModel>> LoadOnThisThread(const LoadOptions& options) {
    const std::string label = options.model_name + ":" + std::to_string(options.model_version);
    for (const auto& spec : options.inputs) {
      auto type = ToTorchType(spec.datatype);
      if (!type.ok()) return InvalidArgument("model '" + label + "' input '" + spec.name +
                                             "': " + type.status().message());
    }
    auto compute_type = ComputeType(options.precision);
    if (!compute_type.ok()) {
      return InvalidArgument("model '" + label + "': " + compute_type.status().message());
    }
    if (!std::filesystem::is_regular_file(options.model_path)) {
      return NotFound("model '" + label + "': no model file at " + options.model_path);
    }
    torch::Device device(torch::kCPU);
    if (options.device.kind == DeviceKind::kCuda) {
#ifdef SOMM_WITH_CUDA
      if (!torch::cuda::is_available()) {
        return Unavailable("model '" + label + "': CUDA requested but no GPU is available");
      }
      device = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(options.device.index));
#else
      return Unavailable("model '" + label + "': this build of libtorch has no CUDA");
#endif
    }
    std::unique_ptr<TorchModel> model;
    const char* step = "load TorchScript file";
    if (Status archive = CheckTorchArchive(options.model_path); !archive.ok()) {
      return InvalidArgument("model '" + label + "': cannot load TorchScript file " +
                             options.model_path + ": " + archive.message());
    }
    try {
      torch::jit::Module module = torch::jit::load(options.model_path, device);
      if (Status tensors = CheckLoadedTensors(module); !tensors.ok()) {
        return InvalidArgument("model '" + label + "': cannot load TorchScript file " +
                               options.model_path + ": " + tensors.message());
      }
      if (Status operators = CheckOperators(module); !operators.ok()) {
        return InvalidArgument("model '" + label + "' refused: " + operators.message());
      }
      module.eval();
      if (options.optimize_for_inference) {
        step = "optimize_for_inference";
        module = torch::jit::optimize_for_inference(module);
      }
      model = std::make_unique<TorchModel>(options, std::move(module), device, *compute_type,
                                           options_);
    } catch (const c10::Error& e) {
      return InvalidArgument("model '" + label + "': cannot " + step + " " + options.model_path +
                             ": " + FirstLine(e.what()));
    } catch (const std::exception& e) {
      return InvalidArgument("model '" + label + "': cannot load " + options.model_path + ": " +
                             e.what());
    }
    SOMM_RETURN_IF_ERROR(Warmup(*model, options, label));
    return std::unique_ptr<ExecutableModel>(std::move(model));
  }

  // Warm-up doubles as a signature check: a model that cannot take one sample
  // of its declared inputs is refused at load time, not at the first query.
  Status Warmup(TorchModel& model, const LoadOptions& options, const std::string& label) {
    const bool batched = options.max_batch_size > 0;
    std::vector<Tensor> inputs = WarmupInputs(options, batched);
    if (inputs.empty()) return Status::Ok();  // variable dims: nothing sensible to send
    // The first run checks the signature; the rest (model.yaml's warmup, or
    // the backend's default) let libtorch's profiling executor settle on
    // its optimised graph before a query pays for it.
    const int runs = std::max(1, options.warmup_runs >= 0 ? options.warmup_runs : options_.warmup_runs);
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < runs; ++i) {
      std::vector<Tensor> outputs;
      Status s = model.Execute(inputs, &outputs);
      if (!s.ok()) {
        return InvalidArgument("model '" + label + "' does not accept its declared inputs " +
                               "(one sample of zeros): " + s.message());
      }
    }
    for (int64_t batch : options.warmup_batch_sizes) {
      if (!batched || batch == 1) continue;
      std::vector<Tensor> batch_inputs = WarmupInputs(options, true, batch);
      for (int i = 0; i < runs; ++i) {
        std::vector<Tensor> outputs;
        Status s = model.Execute(batch_inputs, &outputs);
        if (!s.ok()) {
          return InvalidArgument("model '" + label + "' failed its warm-up at batch " +
                                 std::to_string(batch) + ": " + s.message());
        }
      }
    }
    if (options.warmup_runs >= 0 || !options.warmup_batch_sizes.empty()) {
      spdlog::info("warm-up of {}: {} run(s) at batch 1{} in {:.1f} ms", label, runs,
                   options.warmup_batch_sizes.empty() ? "" : " and at each of model.yaml's sizes",
                   std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                       .count());
    }
    return Status::Ok();
  }

  const TorchBackendOptions options_;
  const std::shared_ptr<DutyCyclePacer> pacer_ = options_.background_pacer;  // may be null
};

}  // namespace

std::unique_ptr<Backend> CreateTorchBackend(TorchBackendOptions options) {
  return std::make_unique<TorchBackend>(options);
}

// Where libtorch is linked, the torchscript platform gets its factory; its
// names, file and variants are registered torch-free (torch_registration.cc).
// Nothing calls into this file by name (processes make backends through the
// registry), so the symbol is what keeps it in a binary: CMakeLists.txt
// asks the linker for it wherever somm_runtime_torch is linked.
extern "C" {
[[maybe_unused]] extern const bool somm_torch_factory_bound;
const bool somm_torch_factory_bound =
    BindBackendFactory(kTorchScriptPlatform, [](const BackendOptions& o) {
      TorchBackendOptions options;
      options.background_pacer = o.background_pacer;
      return CreateTorchBackend(std::move(options));
    });
}

}  // namespace somm
