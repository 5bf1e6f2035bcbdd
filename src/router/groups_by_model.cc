#include "router/groups_by_model.h"

#include <algorithm>
#include <functional>

namespace somm {

std::vector<cluster::GroupState> GroupsByModel::Of(
    const std::shared_ptr<const cluster::ClusterState>& snapshot,
    const std::vector<std::string>& models) {
  std::shared_ptr<const Index> index;
  {
    MutexLock lock(&mu_);
    if (indexed_ != snapshot || !index_) {
      auto built = std::make_shared<Index>();
      built->reserve(snapshot->groups.size());
      for (size_t i = 0; i < snapshot->groups.size(); ++i) {
        built->emplace_back(std::hash<std::string_view>{}(snapshot->groups[i].model), i);
      }
      std::sort(built->begin(), built->end());
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
    const std::string& model = models[m];
    const size_t hash = std::hash<std::string_view>{}(model);
    auto from = std::lower_bound(index->begin(), index->end(), hash,
                                 [](const auto& e, size_t h) { return e.first < h; });
    for (; from != index->end() && from->first == hash; ++from) {
      if (snapshot->groups[from->second].model == model) picked.push_back(from->second);
    }
  }
  std::sort(picked.begin(), picked.end());
  std::vector<cluster::GroupState> out;
  out.reserve(picked.size());
  for (size_t i : picked) out.push_back(snapshot->groups[i]);
  return out;
}

}  // namespace somm
