// The simulator's model zoo: what the trace's models are, read from a model
// repository's model.yaml files and persisted variant profiles, and the
// (variant, hardware) options of each model in the plain form the
// simulator's own policies (infaas_policy.h, oracle_policy.h) decide on.
//
// Thread-safety: plain functions and values.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "loadgen/trace.h"
#include "profiles/price_list.h"
#include "registry/model_registry.h"

namespace somm::sim {

// The registry only reads the repository here: nothing is registered, so
// nothing is ever loaded through a backend.
class NoBackend : public Backend {
 public:
  std::string Name() const override { return "simulated"; }
  std::vector<Device> Devices() const override { return {Device{}}; }
  StatusOr<std::unique_ptr<ExecutableModel>> Load(const LoadOptions&) override {
    return Unimplemented("the simulator loads no model");
  }
};

// The models the trace names, sorted; an error for a row without one.
StatusOr<std::vector<std::string>> TraceModels(const loadgen::Trace& trace);

// Reads the trace's models from the repository into `registry`.
Status PublishZoo(ModelRegistry& registry, const std::vector<std::string>& models);

// A profile's batch-1 latency (the measured point, else the fitted line).
double Batch1Ms(const HardwareProfile& hp);
// The best batch-1 latency of any usable variant on any hardware (0: none).
double BestBatch1Ms(const VersionRecord& v);

// One usable (variant, hardware) option of a model, as its profile gives it.
struct Candidate {
  std::string variant;
  HardwareConfig hardware;
  const HardwareProfile* profile = nullptr;  // in the VersionRecord
  std::optional<double> accuracy;
  double batch1_ms = 0;
  // One replica's best throughput: max over the profiled batches up to the
  // model's max_batch_size of batch * 1000 / latency(batch).
  double capacity_qps = 0;
  double load_ms = 0;
  int64_t memory_bytes = 0;
  int cores = 1;         // the threads it runs on (CPU)
  double usd_per_s = 0;  // one replica's price
  // The price of a query at full capacity.
  double UsdPerQuery() const { return capacity_qps > 0 ? usd_per_s / capacity_qps : 0; }
};

// Every usable, profiled option of `v` on at most `max_cores` threads, in a
// stable order (profile order, then hardware order).
std::vector<Candidate> Candidates(const VersionRecord& v, const PriceList& prices, int max_cores);

// Throughput of one replica whose batches may take at most `max_batch_ms`
// (the profiled batches only; 0 when even batch 1 takes longer).
double CapacityWithin(const Candidate& c, int64_t max_batch, double max_batch_ms);

}  // namespace somm::sim
