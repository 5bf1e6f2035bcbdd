// ModelSandbox: where a registration runs a user's model code before the
// model is served. A registered model is TorchScript, and TorchScript runs
// in the process that loads it; registration runs it twice before anything
// is served: the probe (load, then one run on zeros of the declared
// signature, as Backend::Load's warm-up does) and the variant job
// (variants/variant_pipeline.h: build, profile, measure accuracy). A sandbox
// runs both somewhere the model can do no harm to the server:
//
//   * ProcessModelSandbox (process_sandbox.h): a child process of the somm
//     binary, confined (confinement.h) and bounded in CPU time, memory and
//     wall-clock time. A model that loops or eats memory fails with a clear
//     reason and the server notices nothing else. Every server uses it.
//   * InProcessModelSandbox (in_process_sandbox.h): the same work on the
//     caller's thread, through a Backend. Unit tests of the registry, the
//     router and the controller use it (fake backends, no somm binary).
//
// Contract of both:
//   * Probe(r) loads r.model_dir/<r.version>/<the model file of its
//     platform> (runtime/backend_registry.h) with the signature of
//     r.model_dir/model.yaml and runs it once; OK when it answers, with
//     what it measured (ProbeReport). Errors name the problem; messages may
//     name r.model_dir's paths (the caller rewrites them).
//   * GenerateVariants(r, progress) is GenerateAndProfile() of r (same
//     files written under r.options.variants_root, same result), with
//     `progress` called on the calling thread as the work advances, and
//     r.options.cancelled polled: true stops it with UNAVAILABLE. With
//     r.private_files, what it writes is 0700 folders and 0600 files.
//   * Shutdown() stops every probe and job in progress at once (they fail
//     with UNAVAILABLE) and refuses later ones. A server calls it first when
//     it stops, so no registration delays a SIGTERM.
//   * Every method may be called from any thread, concurrently.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "common/status.h"
#include "profiles/device.h"
#include "repository/model_config.h"
#include "runtime/backend.h"
#include "runtime/backend_set.h"
#include "variants/variant_pipeline.h"

namespace somm {

struct ProbeRequest {
  std::string model_name;  // for messages
  // A model folder: model.yaml and <version>/<model file> (a
  // registration's staging folder).
  std::string model_dir;
  int64_t version = 1;
  Device device;
};

struct VariantJobRequest {
  ModelConfig config;
  int64_t version = 1;
  std::string model_dir;  // <repo>/<model>
  // variants_root, hardware, tolerance, tools_dir, python, cancelled. The
  // host-probe seams (cpu_features, resident_bytes) are honoured in process
  // only; a child process probes its own host.
  VariantPipelineOptions options;
  // A private model: its variants' files are 0600 and their folders 0700.
  bool private_files = false;
};

// What a probe measured of a model that answered.
struct ProbeReport {
  // The most memory loading the model and running it once added to the
  // process that did it: its resident set's peak over what it held before
  // the load (PeakMemoryMark). What one instance of the model costs a
  // server, near enough (a server's larger batches may take more). 0 = not
  // measured (InProcessModelSandbox: its process holds much else).
  int64_t peak_memory_bytes = 0;
};

// The resident-set peak of this process from now on: Begin() resets the
// kernel's high-water mark (/proc/self/clear_refs) and notes the resident
// set; AddedBytes() is the mark's peak since, over that. Linux only; 0
// where /proc cannot be read.
class PeakMemoryMark {
 public:
  static PeakMemoryMark Begin();
  int64_t AddedBytes() const;

 private:
  int64_t resident_at_begin_ = 0;
};

class ModelSandbox {
 public:
  virtual ~ModelSandbox() = default;
  // What runs the model code, for the log ("a child process (user and
  // network namespaces, seccomp filter, rlimits)").
  virtual std::string Describe() const = 0;
  virtual StatusOr<ProbeReport> Probe(const ProbeRequest& request) = 0;
  virtual StatusOr<VariantSet> GenerateVariants(
      const VariantJobRequest& request, std::function<void(const VariantProgress&)> progress) = 0;
  virtual void Shutdown() = 0;
};

// The options a probe loads with: the config's signature, its batching, the
// device, the backend's default warm-up (one run at batch 1 checks the
// signature).
LoadOptions ProbeLoadOptions(const ModelConfig& config, const std::string& model_file,
                             int64_t version, const Device& device);

// Runs a probe on this thread through the backend of the model's platform
// (model.yaml's, from `backends`): what both sandboxes do (a child process,
// in its own process). Errors as ModelSandbox::Probe.
Status ProbeWithBackend(const ProbeRequest& request, const BackendSet& backends);

// Makes `path` and everything under it 0700 (folders) / 0600 (files);
// links are left alone. Best effort.
void RestrictToOwner(const std::string& path);

}  // namespace somm
