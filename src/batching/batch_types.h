// The batcher's small types used beyond it: what a query experienced in a
// batch (BatchStats, which travels with an answer out of the worker,
// worker/worker_api.h), the clock its deadlines are points on, and the
// default of the inline gap (the worker's flags start from it). Kept apart
// from the batcher so that those who use them do not include it.
#pragma once

#include <chrono>
#include <cstdint>

namespace somm {

using SteadyClock = std::chrono::steady_clock;

// BatcherOptions::inline_min_gap_us unless set; the worker's options and the
// `somm worker` flag start from it too.
inline constexpr double kDefaultInlineMinGapUs = 120;

// What one query experienced.
struct BatchStats {
  int64_t queue_ns = 0;    // enqueue -> batch execution start
  int64_t compute_ns = 0;  // its batch's inputs assembled and ExecutableModel::Execute
  int64_t batch_size = 0;  // samples in its batch
  // True for one query of each executed batch: a router in another process
  // counts the worker's batches by it (somm_inference_batch_size).
  bool first_in_batch = false;
  // The parts of the batch's run that Triton's statistics report apart
  // (api/model_statistics.h): the inputs joined into one batch (part of
  // compute_ns, which covers the assembly and the model's run), and the
  // outputs cut back into each query's (after compute_ns).
  int64_t input_ns = 0;
  int64_t output_ns = 0;
};

}  // namespace somm
