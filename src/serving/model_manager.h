// ModelManager: the embedded InferenceServer. It owns the models of one model
// repository, their loaded versions and each version's instances (an
// ExecutableModel plus its Batcher), and it routes queries to them.
//
// Lifecycle: Start() scans the repository and loads every model it finds; a
// model whose config or file is broken is recorded as UNAVAILABLE with the
// reason and does not stop the others. LoadModel() (re)loads one model from
// disk: the new versions come up first, then replace the old ones, which
// finish their queued queries before they are destroyed. UnloadModel() does
// the same without a replacement. Shutdown() refuses new queries and drains
// every queue.
//
// Thread-safety: all methods may be called concurrently. Queries hold no lock
// while they wait; the models map is guarded by a shared mutex.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <vector>

#include "metrics/serving_metrics.h"
#include "runtime/backend.h"
#include "serving/inference_server.h"

namespace somm {

struct ModelManagerOptions {
  std::string repository_path;
  std::string server_name = "somm";
  std::string server_version = "0.1.0";
  // Device every instance is placed on; CPU unless told otherwise.
  Device device;
};

class ModelManager : public InferenceServer {
 public:
  // `backend` and `metrics` must outlive the manager.
  ModelManager(ModelManagerOptions options, Backend& backend, ServingMetrics& metrics);
  ~ModelManager() override;

  // Loads every model in the repository. Fails only if the repository itself
  // cannot be read.
  Status Start();
  void Shutdown();

  bool IsLive() const override { return true; }
  bool IsReady() const override { return !shutting_down_.load(); }
  ServerMetadata GetServerMetadata() const override;
  StatusOr<ModelMetadata> GetModelMetadata(const std::string& name,
                                           const std::string& version) const override;
  StatusOr<bool> IsModelReady(const std::string& name, const std::string& version) const override;
  void Infer(InferenceRequest request, InferCallback done) override;
  std::vector<RepositoryEntry> RepositoryIndex(bool ready_only) const override;
  Status LoadModel(const std::string& name) override;
  Status UnloadModel(const std::string& name) override;

  // Total queries waiting in all queues (for tests and status).
  int64_t QueuedQueries() const;

  struct LoadedVersion;  // opaque: defined in model_manager.cc
  struct ModelEntry;     // opaque: defined in model_manager.cc

 private:
  StatusOr<std::shared_ptr<LoadedVersion>> Resolve(const std::string& name,
                                                   const std::string& version) const;
  std::shared_ptr<ModelEntry> BuildModel(const std::string& name);
  StatusOr<std::shared_ptr<LoadedVersion>> LoadVersion(const ModelConfig& config, int64_t version,
                                                       const std::string& path);
  std::vector<std::string> ListModelFolders() const;

  const ModelManagerOptions options_;
  Backend& backend_;
  ServingMetrics& metrics_;
  std::atomic<bool> shutting_down_{false};
  std::mutex load_mu_;  // serialises Load/Unload so two reloads never interleave
  mutable std::shared_mutex mu_;
  std::map<std::string, std::shared_ptr<ModelEntry>> models_;  // guarded by mu_
};

}  // namespace somm
