// Private to serving/: the structures ModelManager's three source files
// (model_manager.cc, model_selection.cc, model_registration.cc) share.
#pragma once

#include <atomic>
#include <climits>
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
  // How the variant as registered loads (plain queries run it, with
  // instance_count replicas on base_hardware at first). Its group lives in
  // `groups` under GroupKey(kAsRegistered, base_hardware); in managed mode the
  // controller may evict it, and the next plain query loads it again.
  LoadOptions base_load;
  // Static mode: the configured instances never change (nothing is evicted).
  bool pinned = false;

  // Demand signals, reset by the controller every tick.
  std::atomic<int64_t> arrivals{0};
  std::atomic<int64_t> tightest_slo_us{INT64_MAX};
  std::atomic<int64_t> strictest_accuracy_ppm{0};

  mutable std::mutex variants_mu;
  std::vector<VariantProfile> profiles;                         // guarded by variants_mu
  std::map<std::string, std::shared_ptr<InstanceGroup>> groups;  // guarded by variants_mu

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
  std::optional<double> latency_slo_ms;  // the query's deadline, from its arrival
  bool best_effort = false;
};

int64_t MicrosSince(SteadyClock::time_point t);
bool IsPositiveInteger(const std::string& s);

// Loads `count` batcher-backed instances of one variant, each loaded with
// `load` (file, precision, device, threads), batching as `config` says;
// `curve` (may be empty) seeds the batcher's latency predictions.
StatusOr<std::vector<std::unique_ptr<Batcher>>> LoadReplicas(Backend& backend,
                                                             const ModelConfig& config,
                                                             const LoadOptions& load,
                                                             const std::string& variant_id,
                                                             const LatencyCurve& curve, int first,
                                                             int count, ModelMetrics* metrics);

// Milliseconds since the Unix epoch, for decision records.
int64_t NowUnixMs();

}  // namespace somm
