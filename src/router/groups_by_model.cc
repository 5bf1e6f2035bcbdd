#include "router/groups_by_model.h"

#include <algorithm>

namespace somm {

std::vector<cluster::GroupState> GroupsByModel::Of(
    const std::shared_ptr<const cluster::ClusterState>& snapshot,
    const std::vector<std::string>& models) {
  std::shared_ptr<const Index> index;
  {
    MutexLock lock(&mu_);
    if (indexed_ != snapshot || !index_) {
      auto built = std::make_shared<Index>();
      for (size_t i = 0; i < snapshot->groups.size(); ++i) {
        (*built)[snapshot->groups[i].model].push_back(i);
      }
      indexed_ = snapshot;
      index_ = std::move(built);
    }
    index = index_;
  }
  std::vector<size_t> picked;
  for (size_t m = 0; m < models.size(); ++m) {
    if (std::find(models.begin(), models.begin() + static_cast<std::ptrdiff_t>(m), models[m]) !=
        models.begin() + static_cast<std::ptrdiff_t>(m)) {
      continue;  // named twice (two versions of one model)
    }
    auto it = index->find(models[m]);
    if (it != index->end()) picked.insert(picked.end(), it->second.begin(), it->second.end());
  }
  std::sort(picked.begin(), picked.end());
  std::vector<cluster::GroupState> out;
  out.reserve(picked.size());
  for (size_t i : picked) out.push_back(snapshot->groups[i]);
  return out;
}

}  // namespace somm
