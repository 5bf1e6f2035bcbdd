// Router: the InferenceServer that frontends talk to. Per query it resolves
// the target (a model, an exact variant, or a task), checks the inputs
// against the model's signature, runs the selector over the cluster state
// (cluster/cluster_state.h) when the query states requirements, and
// dispatches the decided query to a worker through its WorkerStub. A query
// whose variant is not loaded asks the controller for the load and waits for
// it in a callback: Infer() never blocks its caller, so it is safe on a REST
// I/O loop or a gRPC callback thread. Every response says what ran and why
// (somm_* parameters); every selector decision goes to the decision log.
//
// A malformed query (bad inputs, bad parameters) is answered before routing:
// it never triggers a load and never counts as demand.
//
// Demand: the router counts arrivals per model version (monotonic) and the
// tightest SLO and strictest accuracy floor seen, and PublishDemand() puts
// them into the cluster-state store, where any reader differences them.
//
// Workers: the router reaches them through a WorkerDirectory (one local
// worker when embedded; a gRPC stub per worker in a cluster). Among the
// workers that hold a query's group it picks by the power of two choices on
// queued work. A remote worker that fails a query (UNAVAILABLE: dead or
// unreachable; NOT_FOUND: the group left it) makes the router try another
// worker that holds the group, or load it elsewhere, while the query's SLO
// leaves time and at most kMaxAttempts times; a worker that was UNAVAILABLE
// is never tried again for that query.
//
// Zones: workers carry a zone label, and so may the router. Among the
// holders of a query's group the power of two choices runs on those in the
// router's zone; a holder in another zone is taken only when none is in the
// zone, or when the zone's predicted queue delay exceeds the other's plus
// the cross-zone round trip. The selector adds that round trip to groups
// held only in other zones. The response says which zone served the query
// and why (somm_zone, somm_zone_reason), and so does the decision log.
//
// Rollouts: a query that names its model but no version, while the model's
// canary runs (rollout/rollout.h), draws the canary's share: split, it goes
// to the canary version; shadow, it goes to the stable one and a copy to
// the canary, whose answer is only compared. The response says which
// (somm_rollout), and names the version that served it. Per version the
// router counts answers, failures, latency and shadow comparisons with the
// demand, and the controller's rollout policy compares them.
//
// In flight: from Infer() until its callback, every query counts in the
// metrics' somm_inflight_queries (the gauge routers are autoscaled on).
//
// Statistics: per version, the router counts what Triton's statistics
// extension reports (router/inference_statistics.h): successes and
// failures with their times, and from each answer's batch report the
// queue, compute and batch figures the worker measured.
//
// Thread-safety: every method may be called concurrently. Lock: stats_mu_
// (the per-version table of metrics handles, demand counters and
// statistics; held only to find or add a row, or to read one).
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include <absl/container/flat_hash_map.h>

#include "cluster/cluster_state_store.h"
#include "common/clock.h"
#include "common/mutex.h"
#include "controller/control_client.h"
#include "metrics/serving_metrics.h"
#include "registry/model_catalog.h"
#include "registry/registrar.h"
#include "registry/version_options.h"
#include "router/cost_calibration.h"
#include "api/decision_log.h"
#include "router/groups_by_model.h"
#include "router/routing_policy.h"
#include "selector/selector.h"
#include "api/inference_server.h"
#include "serving/response_cache.h"
#include "worker/worker_directory.h"

namespace somm {

struct RouterOptions {
  std::string id = "router";
  // The process's --model-control-mode (Triton's rule): LoadModel and
  // UnloadModel, the repository API, are refused FAILED_PRECONDITION in
  // every mode but explicit. What the controller loads and unloads on its
  // own (start-up, polling, registration, autoscaling) does not pass here.
  std::string model_control_mode = "explicit";
  std::string server_name = "somm";
  std::string server_version = "0.1.0";
  // Static provisioning (false): the selector only picks loaded variants
  // (an exact variant named in the request still loads on demand).
  bool managed = true;
  PriceList prices;
  // The clock of arrivals, SLO deadlines and the selector; null = the real
  // one (common/clock.h). Must outlive the router.
  const Clock* clock = nullptr;
  // What "ready" means beyond not shutting down (/v2/health/ready, gRPC
  // ServerReady): a cluster router's view of the cluster, `somm serve`'s
  // configured instances loaded. Null = up is ready.
  std::function<bool()> ready;
  // This router's zone ("" = zones not used: every worker is near). Among
  // the workers that hold a query's group it prefers those of its zone.
  std::string zone;
  // What a query pays to reach a worker of another zone and back: added to
  // the selector's prediction for groups held only in other zones, and what
  // a busier worker in this zone must lose by before the query goes across.
  // 1 ms: a round trip between two zones of one region is typically 0.5 to
  // 2 ms.
  double cross_zone_rtt_ms = 1.0;
  // Seeds the power of two choices' draws (0 = std::random_device): with a
  // seed, a query's draws follow from the seed, its id and its attempt, so
  // a simulated run repeats exactly.
  uint32_t seed = 0;
  // Where among a variant's holders a query goes (router/routing_policy.h);
  // null = the power of two choices.
  std::shared_ptr<const RoutingPolicy> routing_policy;
  // How an answer explains itself (docs/selection.md): false, one parameter
  // per fact (somm_variant, somm_reason, somm_cost_usd, ...); true, the same
  // facts as one string parameter `somm` ("decision=loaded variant=... ...
  // reason=<the rest>"), which costs a digits answer about 2 µs less to
  // encode over REST and 8 µs less over gRPC (bench/response_params.cc). A
  // query chooses for itself with the parameter somm_explain: "full" or
  // "compact".
  bool compact_explanation = false;
};

class Router : public InferenceServer {
 public:
  // Everything passed by reference must outlive the router, and so must
  // `registrar` (null: this router registers no model, as one that mounts
  // no repository).
  Router(RouterOptions options, ModelCatalog& catalog, Registrar* registrar,
         cluster::ClusterStateStore& store,
         WorkerDirectory& workers, ControlClient& controller, ServingMetrics& metrics,
         DecisionLog& log);
  ~Router() override;

  bool IsLive() const override { return true; }
  bool IsReady() const override {
    return !shutting_down_.load() && (!options_.ready || options_.ready());
  }
  ServerMetadata GetServerMetadata() const override;
  StatusOr<ModelMetadata> GetModelMetadata(const std::string& name,
                                           const std::string& version) const override;
  StatusOr<bool> IsModelReady(const std::string& name, const std::string& version) const override;
  void Infer(InferenceRequest request, InferCallback done) override;
  // Triton's statistics (what this router answered, per version since it
  // started; in a cluster each router counts the queries it routed) and
  // model configuration: router_statistics.cc.
  StatusOr<std::vector<ModelStatistics>> GetModelStatistics(
      const std::string& name, const std::string& version) const override;
  StatusOr<ModelConfiguration> GetModelConfiguration(const std::string& name,
                                                     const std::string& version) const override;
  std::vector<RepositoryEntry> RepositoryIndex(bool ready_only) const override;
  Status LoadModel(const std::string& name) override;
  Status UnloadModel(const std::string& name) override;
  Status RegisterModel(RegistrationRequest request) override;
  StatusOr<RegistrationStatus> GetRegistrationStatus(const std::string& name) const override;
  std::vector<DecisionRecord> RecentDecisions(size_t limit) const override;
  std::vector<TaskDescription> ListTasks(const Caller& caller) const override;
  StatusOr<TaskDescription> DescribeTask(const std::string& task,
                                         const Caller& caller) const override;
  std::shared_ptr<const cluster::ClusterState> ClusterView() const override {
    return store_.Read();
  }
  PriceList Prices() const override { return options_.prices; }
  StatusOr<RolloutView> ChangeRollout(const RolloutChange& change, const Caller& caller) override;
  StatusOr<RolloutView> GetRollout(const std::string& model, const Caller& caller) const override;
  std::vector<DecisionRecord> RecentActions(size_t limit) const override {
    return controller_.RecentActions(limit);
  }
  std::map<std::string, int64_t> ControlActionTotals() const override {
    return controller_.ActionTotals();
  }

  // Puts this router's demand counters into the store.
  void PublishDemand();
  // Queries in flight now (somm_inflight_queries): what offline batch jobs
  // (batch/batch_jobs.h) wait on.
  int64_t InflightQueries() const { return inflight_->load(std::memory_order_relaxed); }
  // Refuses new queries (UNAVAILABLE).
  void Shutdown() { shutting_down_ = true; }

  struct Query;  // one query on its way: router.cc
  // Dispatch attempts per query (the first one included).
  static constexpr int kMaxAttempts = 3;

 private:
  // OK under --model-control-mode explicit; else why `what` is refused.
  Status ModelControlAllowed(const char* what) const;
  struct VersionStats;
  struct ShadowPair;
  VersionStats& StatsFor(const VersionRecord& v);
  // One version's statistics now (zeros before its first query).
  ModelStatistics StatisticsOf(const std::string& model, const std::string& version) const;
  // Every group loaded now, as fresh as this router can see it.
  std::vector<cluster::GroupState> GroupsNow() const;
  // An unversioned query of a model whose canary runs: draws its side of
  // the split (and may switch `version` to the canary), or mirrors it to
  // the shadow version (rollout/rollout.h).
  void ApplyRollout(Query& q, const Rollout& rollout, const InferenceRequest& request,
                    StatusOr<VersionPtr>& version);
  void SetVersion(Query& q, VersionPtr version);
  // Answers `status`, counted as a failure of the query's model version.
  void Fail(const std::shared_ptr<Query>& q, Status status);
  void RouteDefault(std::shared_ptr<Query> q);
  void RouteExplicit(std::shared_ptr<Query> q, InferenceRequest& request, const Requirements& req);
  void RouteSelected(std::shared_ptr<Query> q, std::vector<VersionPtr> versions,
                     const std::string& target, const Requirements& req);
  void LoadThenDispatch(std::shared_ptr<Query> q, const std::string& variant,
                        const HardwareConfig& hw, int replicas, const std::string& reason);
  void Dispatch(std::shared_ptr<Query> q, bool retry_on_missing);
  // After a remote worker failed `q` with `why`: tries another worker or a
  // load elsewhere. False when the query should fail with `why` instead.
  bool Retry(const std::shared_ptr<Query>& q, const Status& why);
  // The groups of `versions`' models as fresh as this router can see them:
  // the one local worker's own report, else the cluster-state view.
  std::vector<cluster::GroupState> Groups(const std::vector<VersionPtr>& versions);
  // Sets q.worker (and q.instance_id when `instance` >= 0 is on it) to a
  // worker that holds q's group and is not excluded, preferring this
  // router's zone, and notes the zone and why; false when none holds it.
  bool PickWorker(Query& q, const std::vector<cluster::GroupState>& groups,
                  int64_t instance = -1);
  // Predicted wait behind `g`'s queued work per replica, from q's profiled
  // latency curve; negative when q's variant has no profile on its hardware.
  double QueueDelayMs(const Query& q, const cluster::GroupState& g) const;
  // "same zone", "no holder in zone a; cross-zone +1 ms", ...
  std::string ZoneReason(const Query& q) const;
  void Finish(const std::shared_ptr<Query>& q, StatusOr<ExecuteResult> result);
  // Before q first goes to a worker or waits for a load: answers it from
  // the response cache when its model keeps one and holds this answer
  // (true), or notes the key under which Finish keeps the answer.
  bool AnsweredFromCache(const std::shared_ptr<Query>& q);
  Status Prepare(Query& q, InferenceRequest& request);
  void RecordDemand(VersionStats& stats, const Requirements& req);
  // Its number in the decision log (DecisionLog::Complete).
  uint64_t LogDecision(DecisionRecord record);

  const RouterOptions options_;
  const RouterZone where_;  // options_' zone and round trip, for the selector
  const Clock& clock_;
  const std::shared_ptr<const RoutingPolicy> routing_;
  ModelCatalog& catalog_;
  Registrar* const registrar_;  // null: registers nothing
  cluster::ClusterStateStore& store_;
  WorkerDirectory& workers_;
  ControlClient& controller_;
  ServingMetrics& metrics_;
  DecisionLog& log_;
  // Measured / profiled batch time per option, for the cost prediction.
  CostCalibration cost_calibration_;
  // Answers of models whose model.yaml enables it (response_cache), each
  // model within its own bound; this router's own (a cluster's routers each
  // keep one).
  ResponseCache response_cache_;
  GroupsByModel groups_by_model_;  // the store's latest snapshot, by model
  VersionOptions version_options_;  // the selector's options, per version
  std::atomic<bool> shutting_down_{false};
  // Shared with each query's answer, which may come after the router went.
  std::shared_ptr<std::atomic<int64_t>> inflight_ = std::make_shared<std::atomic<int64_t>>(0);
  mutable SharedMutex stats_mu_;
  // model -> version -> row; rows are never removed, so a Query may keep a
  // pointer to one.
  std::map<std::string, std::map<int64_t, std::unique_ptr<VersionStats>>> stats_
      SOMM_GUARDED_BY(stats_mu_);
  // stats_'s rows by model, hashed, for the lookup every query makes (the
  // ordered map is what PublishDemand lists, in its order).
  absl::flat_hash_map<std::string, std::map<int64_t, std::unique_ptr<VersionStats>>*> stats_by_model_
      SOMM_GUARDED_BY(stats_mu_);
};

}  // namespace somm
