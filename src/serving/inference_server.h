// InferenceServer: everything a protocol frontend (REST, gRPC) may ask of
// somm. Frontends hold a reference to one and never see models, instances or
// batchers. The embedded server (serving/model_manager.h) implements it
// in-process; a distributed frontend would implement it with RPCs.
//
// Thread-safety: every method may be called concurrently from any thread.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "repository/model_config.h"
#include "serving/inference.h"

namespace somm {

struct ServerMetadata {
  std::string name;
  std::string version;
  std::vector<std::string> extensions;
};

struct TensorMetadata {
  std::string name;
  std::string datatype;
  Shape shape;  // including -1 for the batch dim when the model batches
};

struct ModelMetadata {
  std::string name;
  std::vector<std::string> versions;  // loaded versions, ascending
  std::string platform;
  std::vector<TensorMetadata> inputs;
  std::vector<TensorMetadata> outputs;
  Parameters parameters;  // task, max_batch_size, accuracy, ...
};

// One row of the repository index.
struct RepositoryEntry {
  std::string name;
  std::string version;  // "" when no version is known (e.g. config error)
  std::string state;    // READY, UNAVAILABLE, LOADING, UNLOADING
  std::string reason;   // why it is not READY
};

class InferenceServer {
 public:
  virtual ~InferenceServer() = default;

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

  virtual std::vector<RepositoryEntry> RepositoryIndex(bool ready_only) const = 0;
  virtual Status LoadModel(const std::string& name) = 0;
  virtual Status UnloadModel(const std::string& name) = 0;
};

}  // namespace somm
