// InferenceApi: what an application may ask of somm: liveness, readiness,
// metadata and inference itself (the KServe v2 / Open Inference Protocol
// core, over REST and gRPC). Batch jobs need nothing else.
//
// Thread-safety: every method may be called concurrently from any thread.
#pragma once

#include <string>
#include <vector>

#include "api/inference.h"
#include "api/model_statistics.h"
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

  // Triton's statistics extension (api/model_statistics.h): name "" = every
  // model, version "" = every version. An unknown model or version is the
  // NOT_FOUND metadata answers; the frontend has already refused a model
  // the caller may not see, and drops those from the every-model list.
  // A server that keeps none answers UNIMPLEMENTED.
  virtual StatusOr<std::vector<ModelStatistics>> GetModelStatistics(
      const std::string& name, const std::string& version) const {
    return Unimplemented("statistics are not kept by this server");
  }
  // Triton's model configuration extension: one version's configuration
  // (version "" = the one metadata describes).
  virtual StatusOr<ModelConfiguration> GetModelConfiguration(const std::string& name,
                                                             const std::string& version) const {
    return Unimplemented("model configuration is not offered by this server");
  }
};

}  // namespace somm
