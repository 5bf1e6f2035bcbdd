#include "runtime/torch/torch_variant_builder.h"

#include <torch/cuda.h>
#include <torch/script.h>

#include <filesystem>
#include <optional>
#include <system_error>

#include "runtime/torch/torch_archive_check.h"

namespace somm {
namespace {

std::string FirstLine(const char* what) {
  std::string s(what);
  const auto nl = s.find('\n');
  return nl == std::string::npos ? s : s.substr(0, nl);
}

StatusOr<std::optional<torch::ScalarType>> TargetType(const VariantRecipe& recipe) {
  switch (recipe.precision) {
    case DataType::kFp32:
      return std::optional<torch::ScalarType>();
    case DataType::kBf16:
      return std::optional<torch::ScalarType>(torch::kBFloat16);
    case DataType::kFp16:
      if (recipe.device.kind != DeviceKind::kCuda) {
        return InvalidArgument(
            "fp16 variants are built for CUDA only: libtorch's CPU kernels "
            "lack most fp16 ops");
      }
      return std::optional<torch::ScalarType>(torch::kHalf);
    default:
      return InvalidArgument(std::string("cannot build a variant with precision ") +
                             DataTypeName(recipe.precision));
  }
}

StatusOr<torch::Device> TargetDevice(const VariantRecipe& recipe) {
  if (recipe.device.kind == DeviceKind::kCpu) return torch::Device(torch::kCPU);
#ifdef SOMM_WITH_CUDA
  if (!torch::cuda::is_available())
    return Unavailable("CUDA variant requested but no GPU is available");
  return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(recipe.device.index));
#else
  return Unavailable("CUDA variant requested but this build of libtorch has no CUDA");
#endif
}

// Module::to(dtype) would also convert integer buffers; only floating-point
// state changes precision.
void ConvertFloatingState(torch::jit::Module& module, torch::ScalarType type) {
  torch::NoGradGuard no_grad;
  for (torch::Tensor p : module.parameters()) {
    if (p.is_floating_point()) p.set_data(p.to(type));
  }
  for (torch::Tensor b : module.buffers()) {
    if (b.is_floating_point()) b.set_data(b.to(type));
  }
}

}  // namespace

Status BuildTorchVariant(const VariantRecipe& recipe, const std::string& src_path,
                         const std::string& dst_path) {
  SOMM_ASSIGN_OR_RETURN(std::optional<torch::ScalarType> type, TargetType(recipe));
  SOMM_ASSIGN_OR_RETURN(torch::Device device, TargetDevice(recipe));
  if (!std::filesystem::is_regular_file(src_path)) return NotFound("no model file at " + src_path);
  SOMM_RETURN_IF_ERROR(CheckTorchArchive(src_path));
  const std::string tmp = dst_path + ".tmp";
  std::string step = "load";
  try {
    torch::jit::Module module = torch::jit::load(src_path, device);
    SOMM_RETURN_IF_ERROR(CheckLoadedTensors(module));
    module.eval();
    if (type) {
      step = "convert to " + std::string(DataTypeName(recipe.precision));
      ConvertFloatingState(module, *type);
    }
    step = "freeze";
    torch::jit::Module out = torch::jit::freeze(module);
    step = "save";
    out.save(tmp);
  } catch (const c10::Error& e) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    return InvalidArgument(src_path + ": " + step + " failed: " + FirstLine(e.what()));
  } catch (const std::exception& e) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    return InvalidArgument(src_path + ": " + step + " failed: " + e.what());
  }
  std::error_code ec;
  std::filesystem::rename(tmp, dst_path, ec);
  if (ec) return Internal("cannot move " + tmp + " to " + dst_path + ": " + ec.message());
  return Status::Ok();
}

}  // namespace somm
