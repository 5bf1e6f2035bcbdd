// VariantPipeline: "register a model once; somm generates and profiles its
// variants". GenerateAndProfile turns one registered model version into every
// variant that applies to it and to this worker's hardware, profiles each on
// each hardware configuration, and persists the results:
//
//   <variants_root>/<model>/<version>/<variant>/<model file>  the variant
//   <variants_root>/<model>/<version>/<variant>/profile.json  its VariantProfile
//   <variants_root>/<model>/<version>/skipped.json            variants not built, and why
//
// The variants are those the model's runtime lists in its registration
// (runtime/backend_registry.h, VariantKind; TorchScript's are in
// runtime/torch/torch_registration.h), in that order, with the file name of
// its platform; the first is the registered file, hard-linked (copied
// across filesystems). Reduced-precision variants are loaded with
// LoadOptions::precision, so all of them keep the registered FP32 signature
// (LoadOptionsForVariant).
//
// Accuracy: top-1 on <model_dir>/<version>/validation/ (validation_data.h),
// measured once per variant on the first hardware config it runs on. A
// variant more than `accuracy_tolerance` below the registered one is kept, with
// usable=false and the two figures in unusable_reason, so the selector and
// the operator see why it is never chosen. Without validation data ts-fp32
// takes the accuracy declared in model.yaml and the other variants have none
// (accuracy_source says so), which keeps them out of queries with a
// min_accuracy floor rather than guessing.
//
// Threading: GenerateAndProfile blocks for the whole run (seconds for the
// digits models; see the defaults below) and is meant for a background thread
// of the registry. It starts and joins one thread per (variant, hardware)
// measurement. Concurrent calls for different models are safe (separate
// folders) but skew each other's timings; the registry should run one at a
// time. `progress` is called on the calling thread.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "repository/model_config.h"
#include "runtime/backend.h"
#include "common/host_probe.h"
#include "profiles/variant_profile.h"

namespace somm {

struct VariantPipelineOptions {
  // <repo>/.somm/variants; created when missing.
  std::string variants_root;
  // Configurations to profile on; empty = DefaultHardware(backend).
  std::vector<HardwareConfig> hardware;
  // A variant whose top-1 is more than this below ts-fp32's is unusable.
  double accuracy_tolerance = 0.02;
  // Batch sizes to time; empty = DefaultProfileBatches(max_batch_size).
  std::vector<int64_t> profile_batches;
  // Per batch point: untimed runs, then the median of up to runs_per_point
  // timed runs, cut short (after 3) once a point has taken point_budget_ms.
  // A straight-line fit through 7 points needs no more; the budget keeps a
  // resnet18 at batch 64 from taking minutes.
  int warmup_runs = 2;
  int runs_per_point = 9;
  double point_budget_ms = 250;
  // A variant made by a tool (TorchScript's ts-int8: quantize_dynamic.py):
  // `python` runs <tools_dir>/<tool>. An empty tools_dir skips it (with
  // that reason).
  // Polled between steps; true stops the run with UNAVAILABLE ("cancelled"),
  // so a server shutting down does not wait for a whole profiling run.
  std::function<bool()> cancelled;
  std::string python = "/usr/bin/python3";
  std::string tools_dir;
  // Seams for tests. Unset: /proc/cpuinfo and /proc/self/statm.
  std::optional<CpuFeatures> cpu_features;
  std::function<int64_t()> resident_bytes;
};

// phase: "build" (current = variant), "profile" (current = "ts-opt on cpu2"),
// "done". done/total count steps: one build per planned variant plus one
// measurement per (variant, hardware config).
struct VariantProgress {
  std::string phase;
  int done = 0;
  int total = 0;
  std::string current;
};

struct SkippedVariant {
  std::string variant;
  std::string reason;  // e.g. "CPU lacks avx512_bf16/AMX, bf16 would be emulated"
};

struct VariantSet {
  std::vector<VariantProfile> profiles;  // ts-fp32 first, unusable ones included
  std::vector<SkippedVariant> skipped;
  // Problems that did not stop the run, e.g. a variant that failed on one
  // of several hardware configs (it has no profile for that config).
  std::vector<std::string> warnings;
};

// Builds, profiles and persists the variants of <model_dir>/<version>/<the
// model file of config.platform> (model_dir = <repo>/<model>). Errors: the
// platform is not registered, the registered file is missing or
// cannot be loaded and run on any config (nothing can be served), or the
// variants folder cannot be written. Every other failure is recorded in the
// result: a variant that cannot be built is skipped, one that fails on every
// config is unusable. Files of variants from an earlier run that this run did
// not produce are removed.
StatusOr<VariantSet> GenerateAndProfile(const ModelConfig& config, int64_t version,
                                        const std::string& model_dir, Backend& backend,
                                        const VariantPipelineOptions& options,
                                        std::function<void(const VariantProgress&)> progress);

// Every profile.json under <variants_root>/<model>/<version>/, ts-fp32 first
// then in generation order; each profile's `file` is re-pointed at the
// model file beside it (named as the runtime that lists the variant names
// its files), so a moved repository still loads. NotFound when the
// folder is absent (nothing generated yet); InvalidArgument naming the file
// when a profile is malformed.
StatusOr<std::vector<VariantProfile>> LoadProfiles(const std::string& variants_root,
                                                   const std::string& model, int64_t version);
// LoadProfiles plus skipped.json.
StatusOr<VariantSet> LoadVariantSet(const std::string& variants_root, const std::string& model,
                                    int64_t version);

// How serving loads a profiled variant: the config's signature, the
// variant's file, precision and load-time optimisation, the hardware
// config's device and thread count.
LoadOptions LoadOptionsForVariant(const ModelConfig& config, const VariantProfile& profile,
                                  const HardwareConfig& hw);

// cpu1, cpu2, cpu4, cpu8 (as far as the machine has cores), then one config
// per CUDA device the backend reports.
std::vector<HardwareConfig> DefaultHardware(const Backend& backend);
// The same for the devices `devices` lists.
std::vector<HardwareConfig> DefaultHardware(const std::vector<Device>& devices);
// 1, 2, 4, ... up to max_batch_size (which is always included); {1} when the
// model does not batch.
std::vector<int64_t> DefaultProfileBatches(int64_t max_batch_size);

}  // namespace somm
