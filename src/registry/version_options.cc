#include "registry/version_options.h"


namespace somm {

std::shared_ptr<const std::vector<cluster::VariantOption>> VersionOptions::Of(
    const VersionPtr& version) {
  MutexLock lock(&mu_);
  auto it = entries_.find(version.get());
  if (it != entries_.end() && it->second.version.lock() == version) return it->second.options;
  auto built = std::make_shared<std::vector<cluster::VariantOption>>();
  AppendOptions(*version, built.get());
  entries_[version.get()] = Entry{version, built};
  if (entries_.size() > prune_above_) {
    std::erase_if(entries_, [](const auto& e) { return e.second.version.expired(); });
    prune_above_ = 2 * entries_.size() + 64;
  }
  return built;
}

void VersionOptions::Append(const VersionPtr& version,
                            std::vector<cluster::VariantOption>* out) {
  const auto options = Of(version);
  out->insert(out->end(), options->begin(), options->end());
}

}  // namespace somm
