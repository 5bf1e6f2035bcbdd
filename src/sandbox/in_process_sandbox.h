// InProcessModelSandbox: a ModelSandbox (model_sandbox.h) that runs the
// model code on the caller's thread, through a Backend: no confinement and
// no limits. For unit tests (fake backends, no somm binary) and for
// components that never see a user's model; servers use ProcessModelSandbox.
//
// Shutdown() makes later calls fail and cancels a variant job at its next
// step (as VariantPipelineOptions::cancelled does); a probe in progress
// finishes. Thread-safe.
#pragma once

#include <atomic>
#include <string>

#include "sandbox/model_sandbox.h"

namespace somm {

class InProcessModelSandbox : public ModelSandbox {
 public:
  explicit InProcessModelSandbox(Backend& backend) : backend_(backend) {}

  std::string Describe() const override { return "the serving process itself (no confinement)"; }
  StatusOr<ProbeReport> Probe(const ProbeRequest& request) override;
  StatusOr<VariantSet> GenerateVariants(
      const VariantJobRequest& request,
      std::function<void(const VariantProgress&)> progress) override;
  void Shutdown() override { stopped_ = true; }

 private:
  Backend& backend_;
  std::atomic<bool> stopped_{false};
};

}  // namespace somm
