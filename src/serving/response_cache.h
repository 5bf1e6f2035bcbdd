// ResponseCache: answers a model version has given, kept so that the same
// query is answered again without running the model (model.yaml's
// `response_cache: {enable: true, max_mb: N}`, docs/lifecycle.md).
//
// Key: the model, the version, the registry's generation of that version (a
// reload publishes a new generation, so its old entries are never found
// again) and a SHA-256 over every input's name, datatype, shape and bytes
// plus the requested outputs; KeyFor builds it. A 256-bit digest, not a fast
// 64-bit hash: a collision would hand one client another's answer.
//
// Memory: each model has its own bound (max_bytes, counted as the answer's
// tensor bytes plus its key and names); inserting past it evicts that model's
// least recently used entries, so one busy model never pushes another's out.
// An answer larger than the bound is not kept. InvalidateModel drops a
// model's entries (a new version, a reload, an unload).
//
// The router consults it (Router::AnsweredFromCache) before a query goes
// to a worker or waits for a load, and keeps each answer it finishes.
//
// Thread-safety: every method may be called concurrently; one lock (mu_)
// guards the table and is never held while calling out.
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/mutex.h"
#include "api/inference.h"

namespace somm {

struct ResponseCacheStats {
  int64_t hits = 0;
  int64_t misses = 0;
  int64_t evictions = 0;
  int64_t entries = 0;
  int64_t bytes = 0;  // what the entries hold now, over every model
};

class ResponseCache {
 public:
  static std::string KeyFor(const std::string& model, int64_t version, uint64_t generation,
                            const std::vector<Tensor>& inputs,
                            const std::vector<RequestedOutput>& outputs);

  // The kept answer, counted as a hit; nullopt (a miss) otherwise.
  std::optional<InferenceResponse> Lookup(const std::string& model, const std::string& key);
  // Keeps `response` for `key` under `model`'s bound of `max_bytes`.
  void Insert(const std::string& model, const std::string& key, const InferenceResponse& response,
              int64_t max_bytes);
  void InvalidateModel(const std::string& model);
  ResponseCacheStats Stats() const;
  ResponseCacheStats StatsFor(const std::string& model) const;

 private:
  struct Entry {
    std::string key;
    InferenceResponse response;
    int64_t bytes = 0;
  };
  struct ModelTable {
    std::list<Entry> lru;  // most recent first
    std::unordered_map<std::string, std::list<Entry>::iterator> index;
    ResponseCacheStats stats;
  };

  mutable Mutex mu_;
  std::map<std::string, ModelTable> models_ SOMM_GUARDED_BY(mu_);
};

}  // namespace somm
