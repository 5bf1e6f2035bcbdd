#include "variants/variant_profiler.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "common/host_probe.h"

namespace somm {
namespace {

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

StatusOr<double> TimeBatch(ExecutableModel& model, const std::vector<Tensor>& inputs,
                           const ProfilerOptions& options) {
  std::vector<Tensor> outputs;
  for (int i = 0; i < options.warmup_runs; ++i)
    SOMM_RETURN_IF_ERROR(model.Execute(inputs, &outputs));
  std::vector<double> samples;
  const auto point_start = Clock::now();
  for (int i = 0; i < std::max(1, options.runs_per_point); ++i) {
    const auto start = Clock::now();
    SOMM_RETURN_IF_ERROR(model.Execute(inputs, &outputs));
    samples.push_back(MsSince(start));
    if (static_cast<int>(samples.size()) >= options.min_runs &&
        MsSince(point_start) > options.point_budget_ms) {
      break;
    }
  }
  return Median(std::move(samples));
}

StatusOr<HardwareMeasurement> ProfileOnThisThread(Backend& backend, const LoadOptions& load,
                                                  const HardwareConfig& hw,
                                                  const ProfilerOptions& options,
                                                  const ValidationData* validation) {
  const std::function<int64_t()> resident =
      options.resident_bytes ? options.resident_bytes : std::function<int64_t()>(ResidentBytes);
  if (!options.resident_bytes) ReleaseFreeMemory();
  HardwareMeasurement m;
  m.profile.hardware = hw;
  const int64_t before = resident();
  const auto load_start = Clock::now();
  SOMM_ASSIGN_OR_RETURN(std::unique_ptr<ExecutableModel> model, backend.Load(load));
  m.profile.load_time_ms = MsSince(load_start);
  model->BindToThread();
  const int64_t after_load = resident();

  const bool batched = load.max_batch_size > 0;
  std::vector<Tensor> outputs;
  Status s = model->Execute(SyntheticInputs(load, batched ? load.max_batch_size : 0), &outputs);
  if (!s.ok()) return Status(s.code(), "max-batch run: " + s.message());
  const int64_t after_run = resident();
  if (before >= 0 && after_load >= 0 && after_run >= 0) {
    const int64_t growth = std::max<int64_t>(0, std::max(after_load, after_run) - before);
    m.profile.peak_memory_mb = static_cast<double>(growth) / (1024.0 * 1024.0);
  }

  std::vector<int64_t> batches = batched ? options.batches : std::vector<int64_t>{1};
  if (batches.empty()) batches = {1};
  std::vector<LatencyPoint> points;
  for (int64_t b : batches) {
    auto ms = TimeBatch(*model, SyntheticInputs(load, batched ? b : 0), options);
    if (!ms.ok()) {
      return Status(ms.status().code(),
                    "batch " + std::to_string(b) + ": " + ms.status().message());
    }
    points.push_back({b, *ms});
  }
  m.profile.latency = LatencyCurve::Fit(std::move(points));
  if (validation != nullptr) {
    auto acc = MeasureTop1(*model, *validation, load.max_batch_size);
    if (acc.ok()) {
      m.accuracy = *acc;
    } else {
      m.accuracy_error = acc.status().message();
    }
  }
  return m;
}

}  // namespace

std::vector<Tensor> SyntheticInputs(const LoadOptions& load, int64_t batch) {
  std::vector<Tensor> inputs;
  uint32_t state = 12345;  // a fixed LCG: identical inputs for every variant
  for (const auto& spec : load.inputs) {
    Tensor t;
    t.name = spec.name;
    t.datatype = spec.datatype;
    if (batch > 0) t.shape.push_back(batch);
    for (int64_t d : spec.shape) t.shape.push_back(d < 0 ? 1 : d);
    const int64_t count = ElementCount(t.shape);
    t.data.assign(static_cast<size_t>(count) * DataTypeSize(spec.datatype), '\0');
    if (spec.datatype == DataType::kFp32) {
      for (int64_t i = 0; i < count; ++i) {
        state = state * 1664525u + 1013904223u;
        const float v = static_cast<float>(state >> 8) / static_cast<float>(1u << 24);
        std::memcpy(t.data.data() + i * 4, &v, 4);
      }
    }
    inputs.push_back(std::move(t));
  }
  return inputs;
}

StatusOr<HardwareMeasurement> ProfileVariantOn(Backend& backend, LoadOptions load,
                                               const HardwareConfig& hw,
                                               const ProfilerOptions& options,
                                               const ValidationData* validation) {
  load.device = Device{hw.device, hw.device_index};
  load.intra_op_threads = hw.threads;
  StatusOr<HardwareMeasurement> result = Internal("profiling thread did not run");
  std::thread worker([&] { result = ProfileOnThisThread(backend, load, hw, options, validation); });
  worker.join();
  return result;
}

}  // namespace somm
