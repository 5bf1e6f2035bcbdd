#include "cli/batch_setup.h"

#include <filesystem>

namespace somm {

StatusOr<BatchJobs::Options> BatchSetup(const BatchRootFlags& flags, const std::string& state_dir,
                                        const std::string& sub, const std::string& repository,
                                        auth::Guard* guard) {
  const std::filesystem::path state(state_dir);
  BatchPaths::Options po;
  po.root = flags.root.empty() ? (state / "batch-files").string() : flags.root;
  po.admin_roots = flags.admin_roots;
  po.repository = repository;
  SOMM_ASSIGN_OR_RETURN(BatchPaths paths, BatchPaths::Create(std::move(po)));
  BatchJobs::Options bo;
  bo.state_dir = (sub.empty() ? state / "batch" : state / "batch" / sub).string();
  bo.paths = std::make_shared<const BatchPaths>(std::move(paths));
  if (guard != nullptr) {
    bo.audit = [guard](const BatchEvent& e) {
      guard->Audit({e.key_id, e.tenant, e.action, e.job, e.outcome, e.detail});
    };
  }
  return bo;
}

}  // namespace somm
