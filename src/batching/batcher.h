// Batcher: the dynamic batcher of one instance.
//
// Queries (BatchTask) wait in a bounded FIFO queue. One worker thread owned by
// the Batcher cuts batches from the head of the queue and runs them on the
// instance's ExecutableModel, then splits the outputs back to their queries.
// A batch is cut
//   * at once when the waiting samples reach max_batch_size, or the largest
//     preferred batch size (cut at that preferred size);
//   * when the oldest query has waited max_queue_delay_us (everything that
//     fits, up to max_batch_size).
// Only queries whose non-batch dims agree go into one batch.
//
// Enqueue never blocks: a full queue is RESOURCE_EXHAUSTED at once, a stopped
// batcher is UNAVAILABLE. Each task's `done` runs exactly once, on the worker
// thread (or in Enqueue's caller when Enqueue fails, which then returns the
// error instead of calling done). Stop() stops intake, executes everything
// already queued, and joins. All methods are thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"
#include "common/tensor.h"
#include "runtime/backend.h"

namespace somm {

using SteadyClock = std::chrono::steady_clock;

struct BatcherOptions {
  // Names the instance in errors and the worker thread, e.g. "digits-mlp:1#0".
  std::string name;
  // 0: the model takes no batch dim; every query executes alone, unchanged.
  int64_t max_batch_size = 0;
  // How long the oldest query may wait for company. 0 = cut at once with
  // whatever is queued (batches still form while the model is busy).
  int64_t max_queue_delay_us = 0;
  // Ascending; see the cutting rule above.
  std::vector<int64_t> preferred_batch_sizes;
  // Queries waiting (not yet executing) beyond this are rejected.
  int64_t max_queue_size = 1024;
};

// What one query experienced.
struct BatchStats {
  int64_t queue_ns = 0;    // enqueue -> batch execution start
  int64_t compute_ns = 0;  // ExecutableModel::Execute of its batch
  int64_t batch_size = 0;  // samples in its batch
};

struct BatchTask {
  // Inputs in model order. When batching, each has the query's sample count
  // as dim 0 (all inputs agree).
  std::vector<Tensor> inputs;
  // Called once with the query's outputs (sliced from the batch) or an error.
  std::function<void(Status, std::vector<Tensor>, const BatchStats&)> done;
};

// Called on the worker thread after every executed batch (for metrics).
using BatchObserver = std::function<void(int64_t batch_size, int64_t compute_ns, bool ok)>;

class Batcher {
 public:
  Batcher(BatcherOptions options, std::unique_ptr<ExecutableModel> model,
          BatchObserver observer = {});
  ~Batcher();  // Stop()s if still running.
  Batcher(const Batcher&) = delete;
  Batcher& operator=(const Batcher&) = delete;

  Status Enqueue(BatchTask task);
  void Stop();

  int64_t queue_length() const;  // queries waiting, not counting the executing batch
  bool busy() const;             // queued or executing work

  // What the selector needs to predict a new query's latency here.
  struct Load {
    int64_t queued_queries = 0;
    int64_t queued_samples = 0;
    bool executing = false;
    SteadyClock::time_point executing_since{};
    int64_t executing_samples = 0;
  };
  Load load() const;
  const BatcherOptions& options() const { return options_; }

 private:
  struct Queued {
    BatchTask task;
    int64_t samples;
    SteadyClock::time_point enqueued;
  };

  void Run();
  // How many queued tasks from the head form the next batch, and whether it
  // should run now. Requires mu_.
  size_t TasksForNextBatch(bool* ready, SteadyClock::time_point* wake_at) const;
  void Execute(std::vector<Queued> batch);

  const BatcherOptions options_;
  const std::unique_ptr<ExecutableModel> model_;
  const BatchObserver observer_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Queued> queue_;  // guarded by mu_
  bool stopping_ = false;     // guarded by mu_
  bool executing_ = false;    // guarded by mu_
  int64_t queued_samples_ = 0;                  // guarded by mu_
  SteadyClock::time_point executing_since_{};  // guarded by mu_
  int64_t executing_samples_ = 0;               // guarded by mu_
  std::thread worker_;
};

// Concatenates tensors of one input along dim 0 (they must agree on the
// other dims). Exposed for tests.
Tensor ConcatenateBatch(const std::vector<const Tensor*>& parts);
// Splits `batched` (dim 0 == sum of sizes) into pieces of `sizes` samples.
Status SplitBatch(Tensor batched, const std::vector<int64_t>& sizes,
                  std::vector<Tensor>* pieces);

}  // namespace somm
