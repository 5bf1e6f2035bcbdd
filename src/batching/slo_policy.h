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
//
// Thread-safety: none (values; the owner serialises access).
#pragma once

#include <cstdint>
#include <functional>
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

}  // namespace somm
