// SLO policy of the dynamic batcher: what a batch will cost and how large
// batches may grow. Pure state machines with no thread and no clock, so that
// they are tested without timing; the Batcher (batcher.h) owns one of each per
// instance, feeds them what it observes and guards them with its lock.
//
//   * ComputePredictor: the compute time of a batch of n samples on this
//     instance. It starts from an optional seed (the variant's profile) and
//     learns online from every executed batch.
//   * BatchCapAimd: the adaptive upper bound on the samples in one batch.
//     Additive increase after a batch that met every deadline in it,
//     multiplicative decrease after one that did not.
//   * PredictQueueUs: the compute time of queued samples cut at the cap.
//   * NextBatchOf: which queued tasks form the next batch. The live batcher
//     and the simulator's worker both batch by it.
//
// Thread-safety: none (values; the owner serialises access).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <vector>

namespace somm {

class ComputePredictor {
 public:
  // Weight of a new observation in the running average of its batch size.
  // Small enough that one outlier (a framework's slow first runs, a noisy
  // neighbour) moves a prediction by a fifth, large enough to follow a
  // lasting change within about ten batches.
  static constexpr double kAlpha = 0.2;

  // Batch sizes 1..max(1, max_batch). `seed` (may be empty) is asked once per
  // size, here and never again, so it need not be thread-safe or cheap; a
  // result that is not a positive finite number means "unknown at that size".
  ComputePredictor(int64_t max_batch, const std::function<double(int64_t batch)>& seed);

  // A batch of `batch` samples computed in `us` microseconds.
  void Observe(int64_t batch, double us);

  // Predicted microseconds for a batch of `batch` samples (clamped into
  // 1..max_batch), or nullopt while nothing at all is known. A size with
  // observations gets their running average; else the seed, scaled by how
  // far observations have strayed from the seed so far; else linear
  // interpolation between the nearest known sizes (below the smallest known
  // size: its time; above the largest: its time per sample times n).
  std::optional<double> PredictUs(int64_t batch) const;

 private:
  // The value of `batch` from its own observations or the seed; <= 0 when neither.
  double KnownUs(int64_t batch) const;

  std::vector<double> seed_us_;  // by batch size; index 0 unused; <= 0 unknown
  std::vector<double> ewma_us_;  // by batch size; 0 = never observed
  double seed_scale_ = 1.0;      // running average of observed / seed
};

class BatchCapAimd {
 public:
  // Starts at `ceiling` (at least 1) and never exceeds it.
  explicit BatchCapAimd(int64_t ceiling);

  int64_t cap() const { return cap_; }
  int64_t ceiling() const { return ceiling_; }

  // After a batch holding deadline queries: on time, cap + 1 (up to the
  // ceiling); late, floor(cap * 0.9), at least 1.
  void OnBatch(bool met_every_deadline);

 private:
  const int64_t ceiling_;
  int64_t cap_;
};

// Predicted microseconds to compute `samples` queued samples cut into batches
// of `cap` (full batches, then the remainder), or nullopt when `predictor`
// knows nothing (even for zero samples, which otherwise take zero time).
std::optional<double> PredictQueueUs(const ComputePredictor& predictor, int64_t samples,
                                     int64_t cap);

// One queued task as the batch rule sees it: its samples, and the time left
// until its deadline (+infinity for a task without an SLO, or best effort).
struct QueuedTaskView {
  int64_t samples = 1;
  double slack_us = std::numeric_limits<double>::infinity();
};

// The next batch: how many tasks from the head of the queue, and their samples.
struct NextBatch {
  size_t tasks = 0;
  int64_t samples = 0;
  bool cut = false;  // it ends before the queue does: the cap, a deadline or a task that cannot join
};

// The longest prefix of the queue [first, last) within `cap` samples that,
// started now, still ends by the tightest deadline in it as `predictor` times
// it: a query with a tight SLO behind relaxed ones cuts the batch short rather
// than wait out a long one. The head always goes, even past the cap or its own
// deadline (dropping late tasks is the caller's). `view(task)` gives a task's
// QueuedTaskView, or nullopt for one that cannot share the head's batch (it
// ends the prefix).
template <class It, class ViewOf>
NextBatch NextBatchOf(const ComputePredictor& predictor, int64_t cap, It first, It last,
                      ViewOf&& view) {
  NextBatch batch;
  double tightest_us = std::numeric_limits<double>::infinity();
  for (It it = first; it != last; ++it) {
    const std::optional<QueuedTaskView> task = view(*it);
    if (!task || (batch.tasks > 0 && batch.samples + task->samples > cap)) {
      batch.cut = true;
      break;
    }
    const double with_task = std::min(tightest_us, task->slack_us);
    if (batch.tasks > 0 && std::isfinite(with_task)) {
      const std::optional<double> us = predictor.PredictUs(batch.samples + task->samples);
      if (us && *us > with_task) {
        batch.cut = true;
        break;
      }
    }
    tightest_us = with_task;
    batch.samples += task->samples;
    ++batch.tasks;
  }
  return batch;
}

}  // namespace somm
