// The simulator's model zoo: what the trace's models are, read from a model
// repository's model.yaml files and persisted variant profiles, and the
// (variant, hardware) options of each model in the plain form the
// simulator's own policies (infaas_policy.h, oracle_policy.h) decide on.
//
// Thread-safety: plain functions and values.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "loadgen/trace.h"
#include "profiles/price_list.h"
#include "registry/model_catalog.h"

namespace somm::sim {

// What one trace row asks for, as the live router reads it: a row with a
// task is a task query (the router takes the task before the model), served
// by any model of the repository registered for the task; a row with only a
// model is that model's query.
struct RowTarget {
  std::string label;                 // the model's name, or "task:<task>": the results' row
  std::vector<VersionPtr> versions;  // the model, or every model of the task (name order)
  double best_b1_ms = 0;             // the least BestBatch1Ms over them (0: none usable)
};

// The trace's zoo, published into a registry (PublishTraceZoo).
struct TraceZoo {
  std::vector<std::string> models;  // every model published, sorted: named and the tasks'
  std::vector<std::string> named;   // the models the model rows name, sorted
  std::map<std::string, RowTarget> by_model;
  std::map<std::string, RowTarget> by_task;
  // Whether some row is a task row or carries min_accuracy or max_cost: the
  // report then says what the constraints refused.
  bool constraints = false;

  const RowTarget& TargetOf(const loadgen::TraceQuery& q) const {
    return q.task.empty() ? by_model.at(q.model) : by_task.at(q.task);
  }
};

// Reads the models the trace's rows name and, for each task a row names,
// every model folder of the repository whose model.yaml registers that task
// and that has a usable profile, and publishes them into `registry`. Errors: a row with neither a model
// nor a task, a model the repository lacks, a task no model serves.
StatusOr<TraceZoo> PublishTraceZoo(ModelCatalog& registry, const loadgen::Trace& trace);

// The feasibility rule of the report (simulation.h): whether some usable
// variant of the row's models, on any profiled hardware, meets all of the
// query's constraints by its profile: accuracy at least min_accuracy
// (unknown accuracy meets no floor), batch-1 latency within the SLO, and
// the batch-1 charge (QueryChargeUsd, as the selector predicts it) within
// max_cost. Without min_accuracy and max_cost it is the SLO against the
// best batch-1 latency alone, the rule model rows always had.
bool Feasible(const RowTarget& target, const loadgen::TraceQuery& q, const PriceList& prices);

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
  int64_t max_batch = 1;  // its model's max_batch_size
  double usd_per_s = 0;  // one replica's price
  // A query's predicted charge alone in a batch (the selector's rule 3,
  // without the calibrated overhead): what max_cost is held against.
  double charge_usd = 0;
  // The price of a query at full capacity.
  double UsdPerQuery() const { return capacity_qps > 0 ? usd_per_s / capacity_qps : 0; }
};

// Every usable, profiled option of `v` on at most `max_cores` threads, in a
// stable order (profile order, then hardware order).
std::vector<Candidate> Candidates(const VersionRecord& v, const PriceList& prices, int max_cores);

// Whether `c` honours the query's min_accuracy and max_cost (see Feasible);
// the policies that choose for themselves (INFaaS, the oracle) choose only
// among such candidates, as somm's selector does.
bool Honours(const Candidate& c, const loadgen::TraceQuery& q);

// Throughput of one replica whose batches may take at most `max_batch_ms`
// (the profiled batches only; 0 when even batch 1 takes longer).
double CapacityWithin(const Candidate& c, int64_t max_batch, double max_batch_ms);

}  // namespace somm::sim
