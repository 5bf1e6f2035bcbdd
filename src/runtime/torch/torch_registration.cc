#include "runtime/torch/torch_registration.h"

#include <algorithm>

namespace somm {
namespace {

bool HasDevice(const VariantHost& host, DeviceKind kind) {
  return std::any_of(host.hardware.begin(), host.hardware.end(),
                     [&](const HardwareConfig& hw) { return hw.device == kind; });
}

constexpr char kNoCpu[] = "no CPU hardware config to run it on";

}  // namespace

BackendRegistration TorchScriptRegistration() {
  BackendRegistration r;
  r.platform = kTorchScriptPlatform;
  r.model_file = "model.pt";
  r.metadata_platform = "pytorch_torchscript";

  VariantKind fp32;
  fp32.name = kVariantFp32;
  fp32.precision = "fp32";
  fp32.optimization = "as registered";
  fp32.build = VariantKind::Build::kAsRegistered;

  // The file is the frozen module; the backend runs optimize_for_inference
  // at load (see LoadOptions for why not here).
  VariantKind opt;
  opt.name = kVariantOpt;
  opt.precision = "fp32";
  opt.optimization = "frozen; optimize_for_inference at load";
  opt.build = VariantKind::Build::kBackend;
  opt.optimize_at_load = true;

  VariantKind int8;
  int8.name = kVariantInt8;
  int8.precision = "int8";
  int8.optimization = "dynamic int8";
  int8.build = VariantKind::Build::kTool;
  int8.tool = "quantize_dynamic.py";
  int8.runs_on = DeviceKind::kCpu;
  int8.skip_reason = [](const VariantHost& host) -> std::string {
    if (!HasDevice(host, DeviceKind::kCpu)) return kNoCpu;
    if (!host.has_tools_dir) {
      return "no tools_dir configured, so tools/quantize_dynamic.py cannot be found";
    }
    return "";
  };

  VariantKind bf16;
  bf16.name = kVariantBf16;
  bf16.precision = "bf16";
  bf16.optimization = "frozen, weights in bf16 (cpu)";
  bf16.build = VariantKind::Build::kBackend;
  bf16.recipe.precision = DataType::kBf16;
  bf16.runs_on = DeviceKind::kCpu;
  bf16.skip_reason = [](const VariantHost& host) -> std::string {
    if (!HasDevice(host, DeviceKind::kCpu)) return kNoCpu;
    if (!host.cpu.UsefulBf16()) return "CPU lacks avx512_bf16/AMX, bf16 would be emulated";
    return "";
  };

  VariantKind fp16;
  fp16.name = kVariantFp16Cuda;
  fp16.precision = "fp16";
  fp16.optimization = "frozen, weights in fp16 (cuda)";
  fp16.build = VariantKind::Build::kBackend;
  fp16.recipe.precision = DataType::kFp16;
  fp16.runs_on = DeviceKind::kCuda;
  fp16.skip_reason = [](const VariantHost& host) -> std::string {
    if (!HasDevice(host, DeviceKind::kCuda)) {
      return "no CUDA hardware config: the backend reports no GPU "
             "(CPU-only libtorch or no device)";
    }
    return "";
  };

  r.variants = {fp32, opt, int8, bf16, fp16};
  return r;
}

}  // namespace somm
