// Private to serving/: the structures ModelManager's three source files
// (model_manager.cc, model_selection.cc, model_registration.cc) share.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "serving/instance_group.h"
#include "serving/model_manager.h"

namespace somm {

// The variant name of a model as registered (variants/ generates it first).
inline constexpr char kAsRegistered[] = "ts-fp32";

// "ts-int8@cpu1": the key of an instance group within a model version.
inline std::string GroupKey(const std::string& variant, const HardwareConfig& hw) {
  return variant + "@" + hw.Name();
}

struct ModelManager::LoadedVersion {
  ModelConfig config;
  int64_t version = 0;
  std::string version_str;
  Device device;
  HardwareConfig base_hardware;  // where the configured instances run
  ModelMetrics* metrics = nullptr;
  // The configured instances: the variant as registered, instance_count
  // replicas on base_hardware. Plain queries run here.
  std::shared_ptr<InstanceGroup> base;

  mutable std::mutex variants_mu;
  std::vector<VariantProfile> profiles;                         // guarded by variants_mu
  std::map<std::string, std::shared_ptr<InstanceGroup>> groups;  // guarded by variants_mu
  std::mutex group_load_mu;  // one on-demand load at a time per version

  ~LoadedVersion();
};

struct ModelManager::ModelEntry {
  std::string name;
  std::optional<ModelConfig> config;  // unset when model.yaml is broken
  std::map<int64_t, std::shared_ptr<LoadedVersion>> versions;  // READY versions
  std::vector<RepositoryEntry> problems;  // what failed to load, and why
};

// Where one query goes, and why.
struct ModelManager::Route {
  std::shared_ptr<LoadedVersion> version;
  std::shared_ptr<InstanceGroup> group;
  int instance = -1;
  DecisionRecord decision;
  double price_per_s = 0;  // of the chosen hardware, for the actual cost
};

int64_t MicrosSince(SteadyClock::time_point t);
bool IsPositiveInteger(const std::string& s);

// Builds `count` batcher-backed instances of one variant, each loaded with
// `load` (file, precision, device, threads), batching as `config` says.
StatusOr<std::shared_ptr<InstanceGroup>> LoadInstanceGroup(Backend& backend,
                                                           const ModelConfig& config,
                                                           const LoadOptions& load,
                                                           const std::string& variant_id,
                                                           const HardwareConfig& hw, int count,
                                                           ModelMetrics* metrics);

}  // namespace somm
