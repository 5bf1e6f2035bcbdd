// Controller: the control loop, and the one place that decides what is loaded
// where. Every tick it reads the cluster state (workers' reports and the
// routers' demand, through the cluster-state store, plus the catalog's
// profiles), runs the autoscaler (autoscaler.h) and sends the actions it
// returns to the workers, make before break. On demand, it places a load a
// query needs (placement.h: which device, which groups to evict) and sends it.
//
// Placement reserves memory under placement_mu_ and sends the load after
// releasing it, so a query's cold start never waits behind another load's
// placement, and two loads never count the same free memory: a reservation
// lasts until its load has finished and the worker reports the group.
// EnsureLoaded() never blocks its caller on a load; LoadModel() and
// UnloadModel() do (they serve the repository API, on handler threads).
//
// A group may have a share of its replicas on several workers: the
// autoscaler sizes the group as a whole, over the workers' pooled devices
// (control::PoolWorkers), and the loop spreads the count it asks for over
// the workers (control::SpreadReplicas), growing every share before any
// shrinks. Unloads, evictions and reloads go to every share.
//
// Every action is logged with its reason: spdlog, the decision log and the
// metrics (somm_control_actions_total).
//
// Rollouts (rollout/rollout.h): ChangeRollout() starts a model's canary
// (loading the canary version beside the stable one), sets its share,
// promotes or rolls it back; each tick runs the rollout policy
// (rollout_policy.h) on what each version did in the current step (the
// routers' outcome counters in the demand rows) and carries out its
// decision. The record is saved in <repo>/.somm/rollouts and set on the
// catalog, so routers split by it (a cluster's through the leader's
// catalog entry); every step is a control action with its reason, and is
// counted on /metrics (somm_canary_*). controller_rollouts.cc.
//
// Thread-safety: every method may be called concurrently. Locks, in the order
// they may be taken: lifecycle_mu_ (LoadModel/UnloadModel, ChangeRollout),
// then rollout_mu_, then placement_mu_; neither lifecycle_mu_ nor
// placement_mu_ is held while a worker carries out an action.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <thread>

#include <absl/container/flat_hash_map.h>

#include "cluster/cluster_state_store.h"
#include "common/clock.h"
#include "common/mutex.h"
#include "controller/autoscaler.h"
#include "controller/control_client.h"
#include "metrics/serving_metrics.h"
#include "registry/model_catalog.h"
#include "registry/registrar.h"
#include "registry/version_options.h"
#include "api/decision_log.h"
#include "worker/worker_directory.h"

namespace somm {

struct ControllerOptions {
  // Off: static provisioning. The configured instances are all there is,
  // pinned; the loop still keeps the accounting (instance-seconds, memory,
  // rates) and changes nothing.
  bool managed = true;
  int control_tick_ms = 1000;
  // Seconds without a query after which a model's instances are unloaded
  // (0 = the autoscaler's default).
  double idle_unload_s = 0;
  PriceList prices;
  // The device the configured instances go on.
  Device device;
  // Called at the start of every tick (the embedded server publishes the
  // router's demand counters with it).
  std::function<void()> before_tick;
  // Put a fresh report of every worker into the store before reading it
  // (embedded: one direct call). A cluster's controller reads the reports
  // the workers' heartbeats put there instead.
  bool fresh_reports = true;
  // A victim that served a query this recently is in use: placing a group
  // by evicting it counts as a shortfall (PlacementShortfalls()). The worker
  // scaler's in_use_window_s, so that what it drains never counts.
  double in_use_window_s = 10;
  // The autoscaler's rules (autoscaler.h; its defaults). Its tick_s and
  // prices are taken from control_tick_ms and prices above, and its
  // idle_unload_s from idle_unload_s when that is set. The simulator passes
  // the same config to the controllers it drives.
  control::AutoscalerConfig autoscaler;
  // Called after every change of a model's rollout (the tick's steps and
  // ChangeRollout): a cluster's leader publishes its catalog at once, so
  // routers split by the new record now, not at the next lease tick.
  std::function<void(const std::string& model)> on_rollout_change;
  // The clock the policies read (null = Clock::Real()); tests and the
  // simulator step their own. It must outlive the controller.
  const Clock* clock = nullptr;
};

class Controller : public ControlClient {
 public:
  // Everything passed by reference must outlive the controller, and so must
  // `registrar` (null: no variant job is ever started, as in the simulator,
  // whose versions come profiled).
  Controller(ControllerOptions options, ModelCatalog& catalog, Registrar* registrar,
             cluster::ClusterStateStore& store,
             WorkerDirectory& workers, ServingMetrics& metrics, DecisionLog& log);
  ~Controller() override;  // Stop()

  void Start();  // the control thread
  void Stop();

  // Has `replicas` of `variant`@`hw` of `version` loaded, placing them first
  // (evicting idle groups when managed). `done` runs once it is up or failed.
  // `urgent`: the worker's urgent lane, at normal priority (a query waits,
  // or nothing serves yet). `query_waits`: a query waits on it, which counts
  // as a cold start (somm_cold_starts_total).
  void EnsureLoaded(VersionPtr version, const std::string& variant, const HardwareConfig& hw,
                    int replicas, const std::string& reason, bool urgent, LoadDone done,
                    bool query_waits = true) override;
  // (Re)loads a repository model's configured instances, new versions before
  // old ones go; a broken reload leaves the serving versions alone.
  Status LoadModel(const std::string& name, bool startup = false) override;
  Status UnloadModel(const std::string& name) override;
  // One step of the control loop, at the clock's Now() (tests call it).
  void Tick();
  // Where the configured instances of `version` run.
  HardwareConfig BaseHardware(const VersionRecord& version) const override;
  // Placements across workers that did not fit: refused, or made room by
  // evicting a group in use. The worker scaler (worker_scaler.h) reads it
  // as "the plan needs more memory than the workers have". Monotonic.
  struct Shortfalls {
    int64_t total = 0;
    std::string last;  // the latest one, in words
  };
  Shortfalls PlacementShortfalls() const;
  // The registrar's variant job (ControlClient's contract).
  Status StartVariantJob(const std::string& name, int64_t version) override;
  StatusOr<RegistrationStatus> GetRegistrationStatus(const std::string& name) override;
  std::vector<DecisionRecord> RecentActions(size_t limit) override {
    return log_.RecentActions(limit);
  }
  std::map<std::string, int64_t> ActionTotals() override { return log_.ActionTotals(); }
  // Rollouts (above; ControlClient's contract).
  StatusOr<RolloutView> ChangeRollout(const RolloutChange& change) override;
  StatusOr<RolloutView> GetRollout(const std::string& model) override;

 private:
  cluster::TimePoint Now() const { return clock_.Now(); }
  // How long a worker that failed an action stays out of placement (a dead
  // one leaves the store sooner, when its lease lapses).
  static constexpr auto kUnreachableFor = std::chrono::seconds(10);
  // How long a load done stays reserved while the store does not show its
  // group yet (a worker reports a change at once; its lease is a few seconds).
  static constexpr auto kReportWithin = std::chrono::seconds(3);

  // The store's snapshot; with `fresh` (and options.fresh_reports) after
  // putting a fresh report of every worker into the store first.
  std::shared_ptr<const cluster::ClusterState> ReadStore(bool fresh);
  // Sets tick_state_ to the store's snapshot (fresh) plus every registered
  // version's options, by assignment over what the last tick left there.
  void ReadTickState() SOMM_REQUIRES(tick_mu_);
  // The store's view for placement: unreachable workers left out, loads
  // under way counted as loading groups that hold their memory. Only what
  // placement reads: devices and groups (without their instances).
  // Cached: rebuilt only when the store's snapshot, the bookkeeping below
  // (placement_epoch_) or the clock (an entry lapsing) changes it; a
  // reservation is added to it in place (SetTakenInView). The reference is
  // valid until placement_mu_ is released.
  const cluster::ClusterState& PlacementView() SOMM_REQUIRES(placement_mu_);
  // Whether the cached view is built and mirrors the bookkeeping (else the
  // next PlacementView() rebuilds it and edits to it are pointless).
  bool ViewCurrent() const SOMM_REQUIRES(placement_mu_) {
    return view_.source != nullptr && view_.epoch == placement_epoch_;
  }
  // Sets the bytes that the cached view shows taken for (worker, label) by
  // loads under way or unreported, to what a rebuild would show.
  void SetTakenInView(const std::string& worker, const std::string& label, int64_t bytes)
      SOMM_REQUIRES(placement_mu_);
  int64_t TakenInView(const std::string& worker, const std::string& label) const
      SOMM_REQUIRES(placement_mu_);
  // Any change to reserved_, unreported_, evicted_, busy_ or unreachable_
  // that SetTakenInView() does not mirror.
  void ChangedPlacement() SOMM_REQUIRES(placement_mu_) { ++placement_epoch_; }
  // EnsureLoaded on `worker` ("" = the largest holder's, else where
  // placement says); `replicas` is what that worker's share becomes.
  void LoadOn(std::string worker, VersionPtr version, const std::string& variant,
              const HardwareConfig& hw, int replicas, const std::string& reason, bool urgent,
              LoadDone done, bool query_waits);
  // The same, for the control loop: waits, and returns how it went.
  Status LoadAndWait(const std::string& worker, const cluster::Action& a,
                     const VersionPtr& version, int replicas);
  // Carries out the autoscaler's kLoad or kSetReplicas (a replica count for
  // the whole group): spreads it over the workers (control::SpreadReplicas),
  // grows every share before any shrinks, and returns how the growth went
  // (what a replacement's unloads wait for).
  Status Scale(const cluster::Action& a, const VersionPtr& version);
  // Resizes one worker's share from share.have to share.want replicas.
  // `spread`: the spread's reason when the group has several shares.
  Status ResizeOn(const control::ReplicaShare& share, const cluster::Action& a,
                  const VersionPtr& version, const std::string& spread);
  // Places `extra_bytes` for `label` on `*worker` (chosen across workers
  // when empty, and set); reserves them and returns the evictions to send
  // first. Takes placement_mu_.
  StatusOr<std::vector<cluster::Action>> Reserve(const std::string& label, int64_t extra_bytes,
                                                 std::string* worker);
  // Ends a reservation. `loaded_new`: a new group is up; its memory stays
  // taken until the store shows the group (unreported_). `measure`: the
  // group's size was a guess (unprofiled), so what the worker measured is
  // kept (measured_); reading it needs the store's current state.
  void Release(const std::string& worker, const std::string& label, bool loaded_new,
               bool measure);
  void MarkUnreachable(const std::string& worker);
  void NoteShortfall(const std::string& what) SOMM_REQUIRES(placement_mu_);
  // Removes the devices and groups of unreachable workers from `state`, and
  // the groups evicted that it still shows.
  void DropUnreachable(cluster::ClusterState* state) SOMM_REQUIRES(placement_mu_);
  // The same rule group by group, for a reader that only scans the groups
  // (no copy of the whole state): PruneDropped() forgets the lapsed
  // entries, then Dropped(g) says whether DropUnreachable() would remove g.
  void PruneDropped() SOMM_REQUIRES(placement_mu_);
  bool Dropped(const cluster::GroupState& g) const SOMM_REQUIRES(placement_mu_);
  // After a load whose size was a guess: evicts (by the placement policy)
  // until `worker`'s device is within its budget again, never `protect`.
  void FitBudget(const std::string& worker, const std::string& protect);
  // Sends the evictions placement chose, each logged with its reason and
  // `why` once carried out.
  // `then`, when given, runs once all have answered: OK, or the first refusal.
  void SendEvictions(std::vector<cluster::Action> evictions, const std::string& why, bool urgent,
                     std::function<void(Status)> then = nullptr);
  // Unloads (and waits for) every group of `model` that `which` selects.
  void UnloadGroups(const std::string& model,
                    const std::function<bool(const cluster::GroupState&)>& which,
                    const std::string& reason);
  // Bytes per replica: profiled, else measured, else a guess (*guessed).
  int64_t EstimateBytes(const VersionRecord& v, const std::string& variant,
                        const HardwareConfig& hw, bool* guessed = nullptr) const;
  void Send(WorkerAction action, std::function<void(Status)> done);
  Status SendAndWait(WorkerAction action);
  void RecordControl(const std::string& kind, const std::string& model, const std::string& label,
                     const std::string& hardware, const std::string& reason);
  void Loop();

  const ControllerOptions options_;
  const Clock& clock_;  // options_.clock, else Clock::Real()
  ModelCatalog& catalog_;
  Registrar* const registrar_;  // null: makes no variants
  cluster::ClusterStateStore& store_;
  WorkerDirectory& workers_;
  ServingMetrics& metrics_;
  DecisionLog& log_;
  std::atomic<bool> stopping_{false};

  Mutex lifecycle_mu_ SOMM_ACQUIRED_BEFORE(placement_mu_);
  mutable Mutex placement_mu_;
  // (worker, label) -> bytes of loads under way.
  std::map<std::pair<std::string, std::string>, int64_t> reserved_ SOMM_GUARDED_BY(placement_mu_);
  // (worker, label) -> (bytes, until when) of loads done that the store
  // does not show yet.
  std::map<std::pair<std::string, std::string>, std::pair<int64_t, cluster::TimePoint>> unreported_
      SOMM_GUARDED_BY(placement_mu_);
  // (worker, label) -> until when: groups evicted that the store may still
  // show; DropUnreachable() leaves them out.
  std::map<std::pair<std::string, std::string>, cluster::TimePoint> evicted_
      SOMM_GUARDED_BY(placement_mu_);
  // (worker, label) -> until when: groups that refused an eviction (busy);
  // PlacementView() shows them busy, so they are no victims.
  std::map<std::pair<std::string, std::string>, cluster::TimePoint> busy_
      SOMM_GUARDED_BY(placement_mu_);
  // What workers measured for unprofiled groups (label -> bytes per replica),
  // kept after the group goes so its next load is placed at its real size.
  std::map<std::string, int64_t> measured_ SOMM_GUARDED_BY(placement_mu_);
  // Workers that answered an action UNAVAILABLE (dead, or draining), left
  // out of placement until then: the store keeps a dead one until its lease
  // lapses.
  std::map<std::string, cluster::TimePoint> unreachable_ SOMM_GUARDED_BY(placement_mu_);
  Shortfalls shortfalls_ SOMM_GUARDED_BY(placement_mu_);
  // PlacementView()'s cache. Why: every load placed (each of thousands at a
  // 1,000-worker start, dozens a tick after) copied every group of the
  // cluster; now a tick's loads share one copy.
  struct CachedView {
    std::shared_ptr<const cluster::ClusterState> source;  // the store's snapshot; null = none yet
    uint64_t epoch = 0;                                   // placement_epoch_ then
    cluster::TimePoint valid_until{};                     // the first entry to lapse
    cluster::ClusterState state;
    // (worker, label) -> index in state.groups of its reserved bytes' group.
    std::map<std::pair<std::string, std::string>, size_t> taken_at;
  };
  CachedView view_ SOMM_GUARDED_BY(placement_mu_);
  uint64_t placement_epoch_ SOMM_GUARDED_BY(placement_mu_) = 0;

  // The loop's own memory between ticks (only the control thread, or a test
  // calling Tick(), touches it).
  Mutex tick_mu_;
  control::AutoscalerMemory memory_ SOMM_GUARDED_BY(tick_mu_);
  // Hashed: looked up for every model and every group on every tick, and
  // never listed. Keys are built into one reused buffer and looked up as
  // they are (FindOrPut copies one only to insert it).
  absl::flat_hash_map<std::string, int64_t> last_arrivals_ SOMM_GUARDED_BY(tick_mu_);
  absl::flat_hash_map<std::string, int64_t> last_uses_ SOMM_GUARDED_BY(tick_mu_);
  std::optional<cluster::TimePoint> last_tick_ SOMM_GUARDED_BY(tick_mu_);
  // Every version's options for ReadTickState(), built once per version record.
  VersionOptions version_options_;
  // Tick()'s copy of the cluster, kept between ticks. Why: each tick copied
  // every group of the cluster and every version's options (10,000 rows at
  // scale) into fresh memory and freed it again; assigned over the last
  // tick's, the copy reuses its strings and vectors.
  cluster::ClusterState tick_state_ SOMM_GUARDED_BY(tick_mu_);
  // Every registered version's options as the catalog has them (before
  // the tick's calibration), and the versions they were built from:
  // rebuilt only when catalog_.All() changes.
  std::vector<VersionPtr> catalog_versions_ SOMM_GUARDED_BY(tick_mu_);
  std::vector<cluster::VariantOption> catalog_options_ SOMM_GUARDED_BY(tick_mu_);
  // tick_state_.options are catalog_options_'s rows, in order, with only
  // their latencies changed since: scaled by tick_options_scaled_by_ (the
  // last tick's slowdown; 1 for rows just copied).
  bool tick_options_are_catalog_ SOMM_GUARDED_BY(tick_mu_) = false;
  double tick_options_scaled_by_ SOMM_GUARDED_BY(tick_mu_) = 1.0;
  // catalog_.VersionsChanged() when catalog_versions_ was listed.
  bool catalog_listed_ SOMM_GUARDED_BY(tick_mu_) = false;
  uint64_t catalog_changes_ SOMM_GUARDED_BY(tick_mu_) = 0;

  // Rollouts: the policy's step, its windows and where each version's
  // counters stood when the step began.
  struct RolloutMemory {
    int64_t stable_version = 0;
    int64_t canary_version = 0;
    std::string step;  // the record's step_started_unix_ms and percent: a new one resets
    bool based = false;
    cluster::ModelDemand stable_base;
    cluster::ModelDemand canary_base;
    cluster::TimePoint step_start{};
    VersionWindow stable;
    VersionWindow canary;
    // Versions whose variant job this step started (the registrar runs one
    // job per model at a time, and skips a second: tried again once free).
    std::set<int64_t> jobs_started;
  };
  void TickRollouts(const std::vector<cluster::ModelDemand>& demand, cluster::TimePoint now);
  // Saves `rollout`, sets it on the catalog, logs and counts `event`.
  Status CommitRollout(Rollout rollout, const std::string& event) SOMM_REQUIRES(rollout_mu_);
  // Loads the versions `name`'s rollout serves that are not loaded yet and
  // publishes them beside those that are.
  Status ServeRolloutVersions(const std::string& name) SOMM_REQUIRES(lifecycle_mu_);
  RolloutView ViewOf(const Rollout& rollout) SOMM_REQUIRES(rollout_mu_);
  Mutex rollout_mu_ SOMM_ACQUIRED_BEFORE(placement_mu_);
  std::map<std::string, RolloutMemory> rollout_memory_ SOMM_GUARDED_BY(rollout_mu_);

  Mutex loop_mu_;
  std::condition_variable_any loop_cv_;
  bool loop_stop_ SOMM_GUARDED_BY(loop_mu_) = false;
  std::thread loop_thread_;
};

}  // namespace somm
