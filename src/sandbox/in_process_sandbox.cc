#include "sandbox/in_process_sandbox.h"

#include <filesystem>

namespace somm {

StatusOr<ProbeReport> InProcessModelSandbox::Probe(const ProbeRequest& request) {
  if (stopped_) return Unavailable("server is shutting down");
  SOMM_RETURN_IF_ERROR(ProbeWithBackend(request, backends_));
  return ProbeReport{};  // not measured: this process holds much else
}

StatusOr<VariantSet> InProcessModelSandbox::GenerateVariants(
    const VariantJobRequest& request, std::function<void(const VariantProgress&)> progress) {
  if (stopped_) return Unavailable("server is shutting down");
  VariantPipelineOptions options = request.options;
  const auto cancelled = options.cancelled;
  options.cancelled = [this, cancelled] { return stopped_.load() || (cancelled && cancelled()); };
  SOMM_ASSIGN_OR_RETURN(Backend* const backend, backends_.For(request.config.platform));
  auto result = GenerateAndProfile(request.config, request.version, request.model_dir, *backend,
                                   options, std::move(progress));
  if (request.private_files && !options.variants_root.empty()) {
    // One process, one umask: the files are restricted once written.
    RestrictToOwner((std::filesystem::path(options.variants_root) / request.config.name).string());
  }
  return result;
}

}  // namespace somm
