// Batcher: the dynamic batcher of one instance.
//
// Queries (BatchTask) wait in a bounded FIFO queue. One worker thread owned by
// the Batcher cuts batches from the head of the queue and runs them on the
// instance's ExecutableModel, then splits the outputs back to their queries.
// A batch holds at most batch_cap() samples (see "Deadlines"; without
// deadline queries the cap stays at max_batch_size, or at the largest
// preferred batch size when that is smaller) and is cut
//   * at once when the waiting samples reach the cap;
//   * when the oldest query has waited max_queue_delay_us (everything that
//     fits), or earlier when a deadline in the batch requires (below).
// Only queries whose non-batch dims agree go into one batch. A query larger
// than the cap runs alone; queries are never split.
//
// Deadlines. A query may carry a deadline (its latency SLO). A predictor
// (slo_policy.h) estimates the compute time of a batch of n samples: online
// from this instance's executed batches, else from
// BatcherOptions::predict_compute_us, else unknown. A query with a deadline
// that is not best_effort is
//   * rejected by Enqueue, RESOURCE_EXHAUSTED, when the predicted finish (the
//     rest of the executing batch, then the queued samples in batches of the
//     cap, then its own) is after its deadline; DEADLINE_EXCEEDED when the
//     deadline has already passed. With no prediction only the latter applies;
//   * dropped unexecuted, DEADLINE_EXCEEDED, when the worker finds that its
//     deadline has passed or that even a batch of its own would end after it;
//   * counted in the batch cap's AIMD: after each successful batch holding
//     such queries, cap + 1 (up to the ceiling above) when the batch ended by
//     every such deadline, floor(0.9 cap) (at least 1) when not.
// Waiting for company also respects deadlines, best_effort ones included: a
// batch is cut no later than min(deadline) - predicted(cap) - margin, where
// margin = max(50 us, 5% of predicted(cap)) (predicted 0 when unknown), so a
// batch that then fills up to the cap still ends in time. Deadlines only
// ever shorten the wait: max_queue_delay_us = 0 still means "never hold a
// query back", because an operator who chose that values latency over
// batch size, and waiting until just before each deadline would push every
// query's latency up to its SLO at low load.
//
// Enqueue never blocks: a full queue is RESOURCE_EXHAUSTED at once, a stopped
// batcher is UNAVAILABLE. Each task's `done` runs exactly once, on the worker
// thread (or in Enqueue's caller when Enqueue fails, which then returns the
// error instead of calling done). Stop() stops intake, executes everything
// already queued (dropping expired queries as above), and joins. All methods
// are thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "batching/batch_types.h"
#include "batching/slo_policy.h"
#include "common/clock.h"
#include "common/status.h"
#include "common/tensor.h"
#include "runtime/backend.h"

namespace somm {

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
  // Predicted compute time in microseconds of a batch of `batch` samples on
  // this instance, e.g. from the variant's profile; seeds the predictor (see
  // "Deadlines"). Called only in the constructor, once per batch size
  // 1..max(1, max_batch_size). Empty: nothing known until batches have run.
  std::function<double(int64_t batch)> predict_compute_us;
  // RunInlineIfIdle() runs a query on its caller's thread when a batch of
  // its size is predicted to take at most this many microseconds (and the
  // instance is idle). 0 = never: every query goes through the queue. The
  // caller must then tolerate `done` running on its own thread, and the
  // model must use one intra-op thread (a second OpenMP team would start on
  // the caller's thread otherwise).
  double inline_max_compute_us = 0;
  // ... and only while queries come at least this many microseconds apart
  // on average (a moving mean over about the last 8 arrivals, each gap
  // counted up to 4x this). Closer is load: the caller's thread is then
  // needed to take in the next queries, which batch, and a query run inline
  // would hold them. Between the two: a lone client through a router leaves
  // about 200 us between its queries on loopback, 16 clients about 60 us.
  double inline_min_gap_us = kDefaultInlineMinGapUs;
  // Every time the batcher reads (enqueue, execution, deadlines) and its
  // waits for the queue delay; must outlive the Batcher. null = Clock::Real().
  // Task deadlines are points on this clock.
  const Clock* clock = nullptr;
};


struct BatchTask {
  // Inputs in model order. When batching, each has the query's sample count
  // as dim 0 (all inputs agree).
  std::vector<Tensor> inputs;
  // Called once with the query's outputs (sliced from the batch) or an error.
  std::function<void(Status, std::vector<Tensor>, const BatchStats&)> done;
  // When the answer is due; max() = no latency SLO.
  SteadyClock::time_point deadline = SteadyClock::time_point::max();
  // Run whatever the prediction: never rejected, dropped or counted in the
  // batch cap for its deadline (which then only shortens waiting).
  bool best_effort = false;
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
  // Runs `task` at once on the calling thread, as a batch of its own, when
  // the instance is idle (nothing queued or executing, and queries come
  // inline_min_gap_us apart on average: only at low load), queries are never
  // held back for company (max_queue_delay_us 0), and the batch is predicted
  // to take at most options().inline_max_compute_us: for a small model the
  // hand-off to the batcher thread and back costs more than the batch
  // (docs/history/router-hop.md, "The gRPC hop"). Then `done` has run, on this thread,
  // when it returns true. Otherwise it returns false with `task` untouched,
  // for Enqueue. The batcher thread starts nothing while such a batch runs.
  bool RunInlineIfIdle(BatchTask& task);
  // Runs `inputs` (one batch, dim 0 its samples) `runs` times on the
  // batcher's thread, one after the other, as it executes a query's batch,
  // before the instance takes queries: the first runs of a freshly loaded
  // model there are many times slower than the rest (TorchScript's
  // profiling runs, the thread's OpenMP team, cold caches), and a query that
  // paid for them would cost far more than predicted. Blocks until they
  // ran. The runs come kWarmUpPause apart, as a lone client's queries do,
  // not back to back. The predictor learns every run; the observer sees none (they are
  // no queries' batches). Returns the median compute time, in µs, of the
  // later half of the runs (the settled ones), or nullopt when none ran.
  // With a `budget`, the runs stop once they have taken that long (a slow
  // model's batches have nothing to settle beside their own time); nullopt
  // runs them all (model.yaml asked for them). Call it only before the
  // instance is handed queries.
  std::optional<double> WarmUp(const std::vector<Tensor>& inputs, int runs,
                               std::optional<std::chrono::milliseconds> budget =
                                   kWarmUpBudget);
  // WarmUp's default budget, and the pause before each of its runs but
  // the first.
  static constexpr std::chrono::milliseconds kWarmUpBudget{250};
  static constexpr std::chrono::milliseconds kWarmUpPause{2};
  void Stop();

  int64_t queue_length() const;     // queries waiting, not counting the executing batch
  bool busy() const;                // queued or executing work
  int64_t batch_cap() const;        // the most samples a batch may hold (1 without batch dim)
  int64_t rejected_slo() const;     // Enqueue refusals for a deadline, since construction
  int64_t dropped_expired() const;  // queries dropped unexecuted for their deadline
  // What the predictor (seed plus what it observed) expects a batch of
  // `batch` samples to take, µs; nullopt when unknown.
  std::optional<double> PredictComputeUs(int64_t batch) const;

  // What the selector needs to predict a new query's latency here.
  struct Load {
    int64_t queued_queries = 0;
    int64_t queued_samples = 0;
    bool executing = false;
    SteadyClock::time_point executing_since{};
    int64_t executing_samples = 0;
    int64_t batch_cap = 0;
    // Predicted microseconds until everything executing and queued now has
    // been computed; -1 while the predictor knows nothing.
    double predicted_backlog_us = -1;
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
  // The rejection of a task with a deadline that the queue cannot meet, or
  // OK. Requires mu_.
  Status AdmitForDeadline(const BatchTask& task, int64_t samples, SteadyClock::time_point now);
  // Predicted microseconds until the executing batch and `samples` queued
  // samples are computed. Requires mu_.
  std::optional<double> PredictBacklogUs(int64_t samples, SteadyClock::time_point now) const;
  struct Expired {
    Queued queued;
    Status why;
  };
  // Removes the queued tasks that can no longer meet their deadline. Requires mu_.
  std::vector<Expired> TakeExpired(SteadyClock::time_point now);
  void FailExpired(std::vector<Expired> expired);
  // How many queued tasks from the head form the next batch, and whether it
  // should run now. Requires mu_.
  size_t TasksForNextBatch(bool* ready, SteadyClock::time_point* wake_at) const;
  void Execute(std::vector<Queued> batch);
  // Feeds a finished batch to the predictor and the cap. Takes mu_.
  void LearnFromBatch(const std::vector<Queued>& batch, int64_t samples, int64_t compute_ns,
                      SteadyClock::time_point end);

  const BatcherOptions options_;
  const Clock& clock_;
  const std::unique_ptr<ExecutableModel> model_;
  const BatchObserver observer_;
  std::atomic<bool> warming_{false};  // WarmUp's batches run: the observer skips them

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Queued> queue_;                   // guarded by mu_
  bool stopping_ = false;                      // guarded by mu_
  bool executing_ = false;                     // guarded by mu_
  bool inline_running_ = false;  // a RunInlineIfIdle batch; guarded by mu_
  // Arrivals seen by RunInlineIfIdle: the last, and the moving mean of the
  // gaps between them (starts as if the instance had been idle).
  SteadyClock::time_point last_arrival_{};     // guarded by mu_
  double mean_arrival_gap_us_ = -1;            // guarded by mu_; < 0: none yet
  int64_t queued_samples_ = 0;                 // guarded by mu_
  SteadyClock::time_point executing_since_{};  // guarded by mu_
  int64_t executing_samples_ = 0;              // guarded by mu_
  int64_t slo_queued_ = 0;       // queued tasks with a deadline, not best_effort; guarded by mu_
  ComputePredictor predictor_;   // guarded by mu_
  BatchCapAimd cap_;             // guarded by mu_
  int64_t rejected_slo_ = 0;     // guarded by mu_
  int64_t dropped_expired_ = 0;  // guarded by mu_
  std::thread worker_;
};

// Concatenates tensors of one input along dim 0 (they must agree on the
// other dims). Exposed for tests.
Tensor ConcatenateBatch(const std::vector<const Tensor*>& parts);
// Splits `batched` (dim 0 == sum of sizes) into pieces of `sizes` samples.
Status SplitBatch(Tensor batched, const std::vector<int64_t>& sizes, std::vector<Tensor>* pieces);

}  // namespace somm
