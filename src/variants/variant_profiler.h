// ProfileVariantOn: measures one variant file on one hardware configuration
// through the Backend seam (Load + Execute only, so it works for any
// backend and can be tested with a fake one).
//
// Each call runs on a fresh thread that it starts and joins: the variant is
// loaded with LoadOptions::intra_op_threads = the config's threads and the
// thread calls BindToThread(), so the intra-op thread count of one config
// never leaks into the next (OpenMP keeps it per thread).
//
// What is measured (all on that thread):
//   * load_time_ms: Backend::Load, including the backend's own warm-up;
//   * peak_memory_mb: growth of the process's resident set from before the
//     load to the larger of after-load and after one max-batch run. Freed
//     heap is handed back to the OS first, so earlier loads do not hide this
//     one's growth. It is process-wide, so concurrent activity (other
//     threads serving) adds noise; GPU memory is not counted;
//   * latency at each batch size: `warmup_runs` untimed runs, then up to
//     `runs_per_point` timed runs (the median is kept). Timing stops early,
//     after at least `min_runs`, once a point has used `point_budget_ms`, so
//     a large model at batch 64 costs seconds, not minutes;
//   * top-1 accuracy, when validation data is passed.
// Inputs for timing are synthetic (deterministic values in [0, 1)); dense
// kernels do not care about the values.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "runtime/backend.h"
#include "variants/validation_data.h"
#include "profiles/variant_profile.h"

namespace somm {

struct ProfilerOptions {
  // Batch sizes to time. Ignored when the model does not batch
  // (max_batch_size 0): then one point, "batch 1", with no batch dim.
  std::vector<int64_t> batches = {1};
  int warmup_runs = 2;
  int runs_per_point = 9;
  int min_runs = 3;
  double point_budget_ms = 250;
  // Resident set in bytes. Unset: hand freed heap back to the OS, then read
  // /proc/self/statm (host_probe.h).
  std::function<int64_t()> resident_bytes;
};

struct HardwareMeasurement {
  HardwareProfile profile;
  // Set when `validation` was given and the run succeeded; otherwise
  // accuracy_error says why not (a model that serves but cannot take its own
  // validation data still gets a latency profile).
  std::optional<double> accuracy;
  std::string accuracy_error;
};

// `load` names the variant file and the signature; its device and thread
// count are replaced by `hw`'s. Errors: the load or a run failed (the
// message says which batch).
StatusOr<HardwareMeasurement> ProfileVariantOn(Backend& backend, LoadOptions load,
                                               const HardwareConfig& hw,
                                               const ProfilerOptions& options,
                                               const ValidationData* validation);

// A batch of `batch` synthetic samples for `load`'s inputs (batch <= 0: one
// sample without a batch dim). Variable dims (-1) become 1.
std::vector<Tensor> SyntheticInputs(const LoadOptions& load, int64_t batch);

}  // namespace somm
