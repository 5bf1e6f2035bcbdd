// InferenceStatistics: one model version's counters for Triton's statistics
// extension (api/model_statistics.h), kept by the router that answers the
// version's queries: in `somm serve` every query, in a cluster the queries
// this router routed (each worker's batch report travels back with its
// answer, worker/worker_api.h's BatchStats).
//
// Recording is on every query's path, so it is relaxed atomic adds and no
// allocation: the batch sizes up to kDenseBatchSizes (or the model's
// max_batch_size, if smaller) have a row each from the start; a larger
// size takes a lock the first time it is seen, and its row lives on.
// Snapshot() reads the counters one by one while queries may still add to
// them: each figure is exact, a snapshot taken mid-query may show one
// counter of that query moved and another not yet.
//
// Thread-safety: every method may be called concurrently.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>

#include "api/model_statistics.h"
#include "batching/batch_types.h"
#include "common/mutex.h"

namespace somm {

class InferenceStatistics {
 public:
  // Batch sizes counted without a lock.
  static constexpr int64_t kDenseBatchSizes = 1024;

  explicit InferenceStatistics(int64_t max_batch_size);
  InferenceStatistics(const InferenceStatistics&) = delete;
  InferenceStatistics& operator=(const InferenceStatistics&) = delete;

  // A query answered by a run of the model: its own samples, the time from
  // its arrival to its answer, what its batch reported, when it was answered.
  void RecordSuccess(int64_t samples, int64_t total_ns, const BatchStats& batch, int64_t unix_ms);
  // A query answered from the response cache: the model did not run.
  void RecordCacheHit(int64_t total_ns, int64_t unix_ms);
  // An answer kept in the response cache after a lookup missed it.
  void RecordCacheMiss(int64_t insert_ns);
  // A query of this version that failed, `total_ns` after it arrived.
  void RecordFailure(int64_t total_ns, int64_t unix_ms);

  // The counters now; name and version are the caller's to fill in.
  ModelStatistics Snapshot() const;

 private:
  struct Duration {
    std::atomic<uint64_t> count{0};
    std::atomic<uint64_t> ns{0};
    void Add(int64_t ns_taken);
    DurationStat Read() const;
  };
  struct BatchRow {
    std::atomic<uint64_t> executions{0};
    std::atomic<uint64_t> input_ns{0};
    std::atomic<uint64_t> infer_ns{0};
    std::atomic<uint64_t> output_ns{0};
  };
  BatchRow& RowFor(int64_t batch_size);

  Duration success_, fail_, queue_, input_, infer_, output_, cache_hit_, cache_miss_;
  std::atomic<uint64_t> inference_count_{0};
  std::atomic<uint64_t> execution_count_{0};
  std::atomic<uint64_t> last_inference_ms_{0};
  const int64_t dense_size_;                   // rows [0, dense_size_)
  const std::unique_ptr<BatchRow[]> dense_;    // indexed by batch size
  mutable Mutex sparse_mu_;
  // Batch sizes of dense_size_ and up; rows are never removed.
  std::map<int64_t, std::unique_ptr<BatchRow>> sparse_ SOMM_GUARDED_BY(sparse_mu_);
};

}  // namespace somm
