// InProcessModelSandbox: a ModelSandbox (model_sandbox.h) that runs the
// model code on the caller's thread, through the backend of the model's
// platform (from a BackendSet, runtime/backend_set.h): no confinement and
// no limits. For unit tests (fake backends, no somm binary) and for
// components that never see a user's model; servers use ProcessModelSandbox.
//
// Shutdown() makes later calls fail and cancels a variant job at its next
// step (as VariantPipelineOptions::cancelled does); a probe in progress
// finishes. Thread-safe.
#pragma once

#include <atomic>
#include <string>
#include <utility>

#include "sandbox/model_sandbox.h"

namespace somm {

class InProcessModelSandbox : public ModelSandbox {
 public:
  explicit InProcessModelSandbox(BackendSet backends) : backends_(std::move(backends)) {}

  std::string Describe() const override { return "the serving process itself (no confinement)"; }
  StatusOr<ProbeReport> Probe(const ProbeRequest& request) override;
  StatusOr<VariantSet> GenerateVariants(
      const VariantJobRequest& request,
      std::function<void(const VariantProgress&)> progress) override;
  void Shutdown() override { stopped_ = true; }

 private:
  const BackendSet backends_;
  std::atomic<bool> stopped_{false};
};

}  // namespace somm
