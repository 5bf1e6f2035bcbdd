// InferenceApi: what an application may ask of somm: liveness, readiness,
// metadata and inference itself (the KServe v2 / Open Inference Protocol
// core, over REST and gRPC). Batch jobs need nothing else.
//
// Thread-safety: every method may be called concurrently from any thread.
#pragma once

#include <string>

#include "api/inference.h"
#include "api/records.h"
#include "common/status.h"

namespace somm {

class InferenceApi {
 public:
  virtual ~InferenceApi() = default;

  virtual bool IsLive() const = 0;
  virtual bool IsReady() const = 0;  // live and not shutting down
  virtual ServerMetadata GetServerMetadata() const = 0;
  // version "" = any ready version.
  virtual StatusOr<ModelMetadata> GetModelMetadata(const std::string& name,
                                                   const std::string& version) const = 0;
  virtual StatusOr<bool> IsModelReady(const std::string& name,
                                      const std::string& version) const = 0;

  // Asynchronous: `done` runs exactly once, possibly before Infer returns.
  virtual void Infer(InferenceRequest request, InferCallback done) = 0;
};

}  // namespace somm
