// VariantProfile: what somm knows about one variant of one model version,
// measured when the variant was generated: latency against batch size on each
// hardware configuration, peak memory, load time, and accuracy on the model's
// validation data. Profiles are written next to the variant as profile.json
// (<repo>/.somm/variants/<model>/<version>/<variant>/) and survive restarts.
//
// Producers: variants/ (generation + profiling). Consumers: selector/ (pure
// policy) and serving/ (placement). Plain values; no locking.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "profiles/device.h"

namespace somm {

// Where and how wide an instance runs: a device plus intra-op threads.
struct HardwareConfig {
  DeviceKind device = DeviceKind::kCpu;
  int device_index = 0;
  int threads = 1;
  // "cpu1", "cpu2", "cuda0": the suffix of variant ids.
  std::string Name() const;
  bool operator==(const HardwareConfig& o) const {
    return device == o.device && device_index == o.device_index && threads == o.threads;
  }
};

struct LatencyPoint {
  int64_t batch = 1;
  double latency_ms = 0;  // median of the measured runs
};

// latency(batch) = intercept + slope * batch, fitted by least squares to the
// measured points; the points are kept for inspection.
struct LatencyCurve {
  std::vector<LatencyPoint> points;
  double intercept_ms = 0;
  double slope_ms = 0;
  double Predict(int64_t batch) const { return intercept_ms + slope_ms * static_cast<double>(batch); }
  // The measured points, interpolated: the profile's own figures where it
  // has them, the first point's below it, and the fitted line beyond the
  // last (and where there are none). What a batch of that size takes when
  // the machine is as it was profiled: the line can be far off at small
  // batches (a fit bent by batch 64 put batch 1 at 0.075 ms, measured 0.18).
  double Measured(int64_t batch) const;
  static LatencyCurve Fit(std::vector<LatencyPoint> points);
};

struct HardwareProfile {
  HardwareConfig hardware;
  LatencyCurve latency;
  double peak_memory_mb = 0;  // resident memory the loaded variant added, incl. a max batch run
  double load_time_ms = 0;
};

struct VariantProfile {
  std::string model;
  int64_t version = 1;
  std::string variant;       // e.g. "ts-int8"; with a hardware name it makes an instance id
  std::string precision;     // fp32, int8, bf16, fp16
  std::string optimization;  // "as-registered", "frozen+optimize_for_inference", ...
  std::string file;          // the variant's TorchScript file
  std::optional<double> accuracy;  // top-1 on the validation data; unset = no data
  std::string accuracy_source;
  bool usable = true;
  std::string unusable_reason;  // e.g. "accuracy 0.71 is 0.26 below the original's 0.97"
  std::vector<HardwareProfile> hardware;

  // "digits-mlp:1:ts-int8"
  std::string Id() const { return model + ":" + std::to_string(version) + ":" + variant; }
  const HardwareProfile* For(const HardwareConfig& hw) const;
};

std::string ProfileToJson(const VariantProfile& profile);
StatusOr<VariantProfile> ProfileFromJson(const std::string& json, const std::string& source);

}  // namespace somm
