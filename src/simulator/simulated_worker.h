// SimulatedWorker: a WorkerStub with no model behind it, for the simulator.
// It answers the router and the controller as a worker process would, on the
// virtual time of an EventLoop:
//
//   * Execute queues the query on its group; a free, loaded replica cuts a
//     batch from the head of the queue and holds it for the latency the
//     variant's profile gives at that batch size (the measured points,
//     linearly interpolated; the fitted line beyond them), times a noise
//     factor. Profiles hold medians only, so the noise is log-normal with
//     median 1 and `latency_noise_sigma`; 0 makes execution exact.
//   * Batches and admission use the live batcher's policy code
//     (batching/slo_policy.h): a ComputePredictor seeded by the profile and
//     learning from every simulated batch, a BatchCapAimd cap, and
//     PredictQueueUs for admission. A query whose predicted finish is past
//     its deadline is refused (RESOURCE_EXHAUSTED), one whose deadline has
//     passed or cannot be met by a batch of its own is dropped
//     (DEADLINE_EXCEEDED), a full queue (max_queue_size) refuses. One queue
//     per group, which any replica serves (the live worker keeps one per
//     instance and sends a query to the least loaded one).
//   * Apply carries an action out at once and calls `done` at once; a load's
//     replicas serve from now + the profiled load time, so a query that
//     arrives meanwhile waits in the queue for them (a cold start on its
//     critical path). Make before break: an unload that replaces a group
//     waits until every other group of the same model here is ready. Memory
//     is enforced: a load or a resize that would take the device past its
//     budget fails with RESOURCE_EXHAUSTED, and nothing changes.
//   * Reports carry observed_slowdown as a live worker's do (the learnt
//     batch time over the profiled one), so the controller's calibration
//     runs on the simulated batches too.
//   * Every change is published to the cluster-state store at once, as
//     LocalWorkerStub::Publish does for a Worker.
//
// Counters for the simulator's report: replica-seconds (loaded or loading
// replicas integrated over virtual time) and the actions carried out.
//
// Thread-safety: none. The simulation runs on one thread (EventLoop), and
// everything that calls a SimulatedWorker is driven from it; `done`
// callbacks may re-enter the worker (a router dispatches from a load's
// callback), so no state is held across them.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "batching/slo_policy.h"
#include "cluster/cluster_state_store.h"
#include "profiles/price_list.h"
#include "simulator/event_loop.h"
#include "worker/worker_api.h"

namespace somm::sim {

struct SimulatedWorkerOptions {
  std::string id = "sim-0";
  std::string zone;
  // The CPU's memory budget. 16 GiB: half of a 32-GiB machine, as
  // DefaultMemoryBudget() would give a fresh one (cluster/memory_budget.h).
  int64_t budget_bytes = int64_t{16} << 30;
  // Cores instances may use (the autoscaler keeps threads within them).
  int cores = 2;
  // Sigma of the log-normal factor on every batch's profiled latency.
  // 0.1: a batch's time varies by about +-10% around the median, as
  // repeated runs of one batch do on an idle CPU; 0 = exact profiles.
  double latency_noise_sigma = 0.1;
  uint64_t seed = 1;
  // What each replica costs per second, for Usd().
  PriceList prices;
  // Answer as a worker in another process does (local() false): the router
  // then keeps a query's inputs and retries it elsewhere when the worker
  // fails it with UNAVAILABLE (a dead worker), as it does in a cluster.
  bool remote = false;
};

class SimulatedWorker : public WorkerStub {
 public:
  // `loop` and `store` must outlive the worker.
  SimulatedWorker(EventLoop& loop, cluster::ClusterStateStore& store,
                  SimulatedWorkerOptions options);

  const std::string& id() const override { return options_.id; }
  bool local() const override { return !options_.remote; }
  Status Execute(ExecuteRequest& request, ExecuteCallback done) override;
  void Apply(WorkerAction action, std::function<void(Status)> done) override;
  cluster::WorkerReport Report() override;

  // Puts the report into the store (not once dead).
  void Publish();

  // The worker dies: every query it holds, queued or executing, fails with
  // UNAVAILABLE, as an RPC to a dead process does, and so does everything
  // sent to it afterwards; its replicas stop counting (and costing) now,
  // and it publishes nothing more. Its last report stays in the store until
  // whoever holds the lease removes it (simulation.cc).
  void Kill();
  bool dead() const { return dead_; }

  // Replica-seconds so far, loading replicas included (what the live
  // controller's somm_instance_seconds_total counts).
  double ReplicaSeconds() const;
  // Dollars so far: every replica, loading ones included, at its
  // hardware's price (options.prices).
  double Usd() const;
  int64_t replicas() const { return replicas_now_; }
  int64_t used_bytes() const;
  // Actions carried out (loads and resizes that changed something, unloads
  // and evictions that removed a group), and refused ones.
  int64_t actions_carried_out() const { return actions_done_; }
  int64_t actions_refused() const { return actions_refused_; }
  // Batches executed, and queries that waited for a replica still loading.
  int64_t batches() const { return batches_; }
  int64_t queries_waited_for_load() const { return waited_for_load_; }

 private:
  using TimePoint = EventLoop::TimePoint;
  struct Query {
    int64_t samples = 1;
    TimePoint enqueued;
    TimePoint deadline = TimePoint::max();
    bool best_effort = false;
    ExecuteCallback done;
  };
  struct Replica {
    int64_t id = 0;
    TimePoint ready_at;
    bool busy = false;
    TimePoint busy_until;
    bool removed = false;
  };
  struct Group {
    std::string label;
    VersionPtr version;
    std::string variant;
    HardwareConfig hardware;
    std::string device;  // Device{hardware}.ToString(): "cpu", "cuda:0"
    const HardwareProfile* profile = nullptr;  // in *version
    int64_t max_batch = 1;
    // What Report() compares the learnt time with: the profile's time for
    // the probe batch (8, or 1 when the model batches less), in µs; fixed
    // for the group's life, so worked out once, not per report.
    int64_t slowdown_probe = 1;
    double probe_profiled_us = 0;
    size_t max_queue = 0;
    int64_t memory_bytes = 0;  // per replica
    bool pinned = false;
    std::vector<std::shared_ptr<Replica>> replicas;
    std::deque<Query> queue;
    int64_t queued_samples = 0;
    int64_t executing = 0;
    int64_t uses_total = 0;
    TimePoint last_used;
    std::unique_ptr<ComputePredictor> predictor;
    std::unique_ptr<BatchCapAimd> cap;
  };

  StatusOr<std::shared_ptr<Group>> NewGroup(const WorkerAction& action);
  Status AddReplicas(Group& g, int n);
  void RemoveReplicas(Group& g, int n);
  void Remove(const std::string& label);
  void TryStart(const std::shared_ptr<Group>& g);
  void StartBatch(const std::shared_ptr<Group>& g, const std::shared_ptr<Replica>& r);
  double ProfileMs(const Group& g, int64_t batch) const;
  // When `r` can take its next batch.
  TimePoint FreeAt(const Replica& r) const;
  void NoteReplicas(int64_t delta, const HardwareConfig& hardware);

  EventLoop& loop_;
  cluster::ClusterStateStore& store_;
  const SimulatedWorkerOptions options_;
  std::mt19937_64 rng_;
  std::map<std::string, std::shared_ptr<Group>> groups_;  // by GroupLabel
  int64_t next_instance_id_ = 0;
  int64_t sequence_ = 0;
  int64_t replicas_now_ = 0;
  double replica_seconds_ = 0;
  double usd_ = 0;
  double usd_per_s_now_ = 0;
  TimePoint replicas_since_;
  int64_t actions_done_ = 0;
  int64_t actions_refused_ = 0;
  int64_t batches_ = 0;
  int64_t waited_for_load_ = 0;
  bool dead_ = false;
};

}  // namespace somm::sim
