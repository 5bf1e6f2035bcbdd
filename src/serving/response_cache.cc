#include "serving/response_cache.h"

#include <utility>

#include "crypto/digest.h"

namespace somm {
namespace {

void AppendField(std::string* out, std::string_view field) {
  // Length-prefixed, so that no two different queries concatenate to the
  // same bytes ("ab"+"c" against "a"+"bc").
  *out += std::to_string(field.size());
  *out += ':';
  out->append(field);
}

int64_t SizeOf(const std::string& key, const InferenceResponse& r) {
  int64_t bytes = static_cast<int64_t>(key.size() + r.model_name.size() + r.model_version.size());
  for (const Tensor& t : r.outputs) {
    bytes += static_cast<int64_t>(t.data.size() + t.name.size() + t.shape.size() * sizeof(int64_t));
  }
  return bytes;
}

}  // namespace

std::string ResponseCache::KeyFor(const std::string& model, int64_t version, uint64_t generation,
                                  const std::vector<Tensor>& inputs,
                                  const std::vector<RequestedOutput>& outputs) {
  std::string material;
  size_t size = 64;
  for (const Tensor& t : inputs) size += t.data.size() + t.name.size() + 32;
  material.reserve(size);
  for (const Tensor& t : inputs) {
    AppendField(&material, t.name);
    AppendField(&material, DataTypeName(t.datatype));
    AppendField(&material, ShapeToString(t.shape));
    AppendField(&material, t.data);
  }
  material += '|';
  for (const RequestedOutput& o : outputs) AppendField(&material, o.name);
  std::string key;
  AppendField(&key, model);
  AppendField(&key, std::to_string(version));
  AppendField(&key, std::to_string(generation));
  key += crypto::Sha256Hex(material);
  return key;
}

std::optional<InferenceResponse> ResponseCache::Lookup(const std::string& model,
                                                       const std::string& key) {
  MutexLock lock(&mu_);
  ModelTable& table = models_[model];
  auto it = table.index.find(key);
  if (it == table.index.end()) {
    ++table.stats.misses;
    return std::nullopt;
  }
  ++table.stats.hits;
  table.lru.splice(table.lru.begin(), table.lru, it->second);
  return it->second->response;
}

void ResponseCache::Insert(const std::string& model, const std::string& key,
                           const InferenceResponse& response, int64_t max_bytes) {
  const int64_t bytes = SizeOf(key, response);
  if (bytes > max_bytes) return;
  MutexLock lock(&mu_);
  ModelTable& table = models_[model];
  if (auto it = table.index.find(key); it != table.index.end()) {
    // Two misses for one key raced; the first answer stays.
    table.lru.splice(table.lru.begin(), table.lru, it->second);
    return;
  }
  while (!table.lru.empty() && table.stats.bytes + bytes > max_bytes) {
    const Entry& last = table.lru.back();
    table.stats.bytes -= last.bytes;
    --table.stats.entries;
    ++table.stats.evictions;
    table.index.erase(last.key);
    table.lru.pop_back();
  }
  table.lru.push_front(Entry{key, response, bytes});
  table.index.emplace(key, table.lru.begin());
  table.stats.bytes += bytes;
  ++table.stats.entries;
}

void ResponseCache::InvalidateModel(const std::string& model) {
  MutexLock lock(&mu_);
  auto it = models_.find(model);
  if (it == models_.end()) return;
  ModelTable& table = it->second;
  table.lru.clear();
  table.index.clear();
  table.stats.bytes = 0;
  table.stats.entries = 0;
}

ResponseCacheStats ResponseCache::StatsFor(const std::string& model) const {
  MutexLock lock(&mu_);
  auto it = models_.find(model);
  return it == models_.end() ? ResponseCacheStats{} : it->second.stats;
}

ResponseCacheStats ResponseCache::Stats() const {
  MutexLock lock(&mu_);
  ResponseCacheStats sum;
  for (const auto& [_, table] : models_) {
    sum.hits += table.stats.hits;
    sum.misses += table.stats.misses;
    sum.evictions += table.stats.evictions;
    sum.entries += table.stats.entries;
    sum.bytes += table.stats.bytes;
  }
  return sum;
}

}  // namespace somm
