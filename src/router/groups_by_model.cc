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
      const size_t n = snapshot->groups.size();
      size_t buckets = 1;
      while (buckets < n) buckets <<= 1;
      built->mask = buckets - 1;
      built->heads.assign(buckets, kEnd);
      built->hashes.resize(n);
      built->next.resize(n);
      for (size_t i = n; i-- > 0;) {  // backwards: each bucket lists in order
        const size_t h = std::hash<std::string_view>{}(snapshot->groups[i].model);
        built->hashes[i] = h;
        built->next[i] = built->heads[h & built->mask];
        built->heads[h & built->mask] = static_cast<uint32_t>(i);
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
    const std::string& model = models[m];
    const size_t hash = std::hash<std::string_view>{}(model);
    for (uint32_t i = index->heads[hash & index->mask]; i != kEnd; i = index->next[i]) {
      if (index->hashes[i] == hash && snapshot->groups[i].model == model) picked.push_back(i);
    }
  }
  std::sort(picked.begin(), picked.end());
  std::vector<cluster::GroupState> out;
  out.reserve(picked.size());
  for (size_t i : picked) out.push_back(snapshot->groups[i]);
  return out;
}

}  // namespace somm
