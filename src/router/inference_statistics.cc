#include "router/inference_statistics.h"

#include <algorithm>

namespace somm {
namespace {

constexpr auto kRelaxed = std::memory_order_relaxed;

uint64_t NonNegative(int64_t ns) { return ns > 0 ? static_cast<uint64_t>(ns) : 0; }

}  // namespace

void InferenceStatistics::Duration::Add(int64_t ns_taken) {
  count.fetch_add(1, kRelaxed);
  ns.fetch_add(NonNegative(ns_taken), kRelaxed);
}

DurationStat InferenceStatistics::Duration::Read() const {
  return DurationStat{count.load(kRelaxed), ns.load(kRelaxed)};
}

InferenceStatistics::InferenceStatistics(int64_t max_batch_size)
    : dense_size_(std::min<int64_t>(std::max<int64_t>(max_batch_size, 1), kDenseBatchSizes) + 1),
      dense_(new BatchRow[static_cast<size_t>(dense_size_)]) {}

InferenceStatistics::BatchRow& InferenceStatistics::RowFor(int64_t batch_size) {
  batch_size = std::max<int64_t>(batch_size, 0);
  if (batch_size < dense_size_) return dense_[static_cast<size_t>(batch_size)];
  MutexLock lock(&sparse_mu_);
  std::unique_ptr<BatchRow>& row = sparse_[batch_size];
  if (!row) row = std::make_unique<BatchRow>();
  return *row;
}

void InferenceStatistics::RecordSuccess(int64_t samples, int64_t total_ns, const BatchStats& batch,
                                        int64_t unix_ms) {
  // compute_ns covers the inputs' assembly and the model's run.
  const int64_t infer_ns = batch.compute_ns - batch.input_ns;
  success_.Add(total_ns);
  queue_.Add(batch.queue_ns);
  input_.Add(batch.input_ns);
  infer_.Add(infer_ns);
  output_.Add(batch.output_ns);
  inference_count_.fetch_add(NonNegative(samples), kRelaxed);
  last_inference_ms_.store(NonNegative(unix_ms), kRelaxed);
  // One query of each batch carries the batch's execution.
  if (!batch.first_in_batch) return;
  execution_count_.fetch_add(1, kRelaxed);
  BatchRow& row = RowFor(batch.batch_size);
  row.executions.fetch_add(1, kRelaxed);
  row.input_ns.fetch_add(NonNegative(batch.input_ns), kRelaxed);
  row.infer_ns.fetch_add(NonNegative(infer_ns), kRelaxed);
  row.output_ns.fetch_add(NonNegative(batch.output_ns), kRelaxed);
}

void InferenceStatistics::RecordCacheHit(int64_t total_ns, int64_t unix_ms) {
  // Triton's success and queue counts include cache hits; a hit waits in
  // no queue here.
  success_.Add(total_ns);
  queue_.Add(0);
  cache_hit_.Add(total_ns);
  last_inference_ms_.store(NonNegative(unix_ms), kRelaxed);
}

void InferenceStatistics::RecordCacheMiss(int64_t insert_ns) { cache_miss_.Add(insert_ns); }

void InferenceStatistics::RecordFailure(int64_t total_ns, int64_t unix_ms) {
  fail_.Add(total_ns);
  last_inference_ms_.store(NonNegative(unix_ms), kRelaxed);
}

ModelStatistics InferenceStatistics::Snapshot() const {
  ModelStatistics s;
  s.last_inference_ms = last_inference_ms_.load(kRelaxed);
  s.inference_count = inference_count_.load(kRelaxed);
  s.execution_count = execution_count_.load(kRelaxed);
  InferStatistics& i = s.inference_stats;
  i.success = success_.Read();
  i.fail = fail_.Read();
  i.queue = queue_.Read();
  i.compute_input = input_.Read();
  i.compute_infer = infer_.Read();
  i.compute_output = output_.Read();
  i.cache_hit = cache_hit_.Read();
  i.cache_miss = cache_miss_.Read();
  auto add_row = [&s](int64_t size, const BatchRow& row) {
    const uint64_t n = row.executions.load(kRelaxed);
    if (n == 0) return;
    s.batch_stats.push_back(BatchSizeStatistics{static_cast<uint64_t>(size),
                                                {n, row.input_ns.load(kRelaxed)},
                                                {n, row.infer_ns.load(kRelaxed)},
                                                {n, row.output_ns.load(kRelaxed)}});
  };
  for (int64_t size = 0; size < dense_size_; ++size) add_row(size, dense_[static_cast<size_t>(size)]);
  MutexLock lock(&sparse_mu_);
  for (const auto& [size, row] : sparse_) add_row(size, *row);
  return s;
}

}  // namespace somm
