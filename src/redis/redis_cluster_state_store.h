// RedisClusterStateStore: the cluster-state store of a cluster
// (cluster/cluster_state_store.h), shared by every router, worker and
// controller through one Redis.
//
// Redis holds soft state only. Each worker's latest report lives in a hash
// whose TTL is the worker's lease: the worker's heartbeat writes the report
// again before the lease lapses, and a worker that stops (killed, frozen, cut
// off) drops out of every view within one lease. After a Redis restart the
// store is empty until the workers' next heartbeats, and nothing else is
// lost. Each router's demand counters live in a key with a longer TTL.
//
// Writes that touch several keys are one Lua script each (atomic): the
// report, its lease, the membership set, the generation counter and the
// change notice (PUBLISH) together. A report is refused when it comes from
// an older incarnation of the worker than the one registered (a stale
// process must not overwrite its successor; incarnations order by start
// time, see NewIncarnation) or carries an older sequence number of the same
// incarnation.
//
// After a Redis restart (its generation counter goes back) the view keeps
// the workers it had for one lease, while they announce themselves again: a
// restart of Redis is not the death of every worker.
//
// Reads never touch Redis: Read() returns a snapshot that a watch thread
// keeps fresh. Each change notice (pub/sub) names what changed ("17 worker
// w1"), and the watcher reads only that: one key per notice, so a cluster's
// watchers cost Redis in proportion to its size, not to its square. A
// heartbeat's notice carries the report itself ("17 report 3000
// 1795000000123456 w1\n{...}": its lease in ms, Redis's clock at the write in
// microseconds, the worker, the report), so it costs a watcher no read at all;
// so does a router's demand ("18 router-demand r1\n[...]"). Every
// `repoll` the watcher checks two keys (the generation counter and the
// leader), reads again the workers whose key should have expired by now (it
// reads each key's TTL with the report: a lapsed lease sends no notice, and
// whoever sees one prunes it), and reads everything again when a notice was
// lost (the generations skip one, or the counter is ahead of the notices
// seen), Redis restarted (it went back), or `full_repoll` has passed since
// the last full read.
//
// Two more pieces of soft state live here, read into the same view:
//   * the catalog: the models the cluster serves, each with a generation
//     that changes whenever the model is (re)published; the leader
//     controller writes it (and writes it again after a Redis restart),
//     routers and workers follow it and read the models themselves from the
//     shared repository;
//   * the leader lease of the controllers (SET NX PX, renewed by the holder
//     through a script that only renews its own lease).
//
// Keys, under `prefix` (default "somm:"): worker:<id> (hash: incarnation,
// sequence, report JSON), workers (set), demand:<router> (JSON), routers
// (set), catalog (hash: model -> generation), leader (holder), generation
// (counter); channel "<prefix>changes".
//
// Thread-safety: every method may be called concurrently. Locks:
// write_mu_ (the write connection), refresh_mu_ (the read connection) then
// view_mu_ (the snapshot); no lock is held while waiting for a change notice.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "cluster/catalog_store.h"
#include "cluster/lease_store.h"
#include "cluster/cluster_state_store.h"
#include "common/mutex.h"
#include "redis/redis_connection.h"

namespace somm::redis {

struct RedisStoreOptions {
  RedisEndpoint endpoint;
  std::string prefix = "somm:";
  // A worker report's TTL; heartbeats must come faster (about a third).
  std::chrono::milliseconds lease{3000};
  // A router's demand counters' TTL.
  std::chrono::milliseconds demand_ttl{10000};
  // The generation counter is checked at least this often, and the whole
  // view re-read at least every `full_repoll`.
  std::chrono::milliseconds repoll{500};
  std::chrono::milliseconds full_repoll{10000};
  // Keep a view (the watch thread). A process that only writes turns it off.
  bool watch = true;
};

class RedisClusterStateStore : public cluster::ClusterStateStore,
                               public cluster::CatalogStore,
                               public cluster::LeaseStore {
 public:
  // Connects and reads the view once. UNAVAILABLE when Redis cannot be
  // reached: the message names the address.
  static StatusOr<std::unique_ptr<RedisClusterStateStore>> Open(RedisStoreOptions options);
  ~RedisClusterStateStore() override;

  // Failed writes are logged and show in last_write_status(); the next
  // heartbeat writes again.
  void PutWorker(cluster::WorkerReport report) override;
  void RemoveWorker(const std::string& worker) override;
  void PutDemand(const std::string& router, std::vector<cluster::ModelDemand> demand) override;
  std::shared_ptr<const cluster::ClusterState> Read() const override;
  uint64_t generation() const override;

  // The same write, with its outcome: OK; FAILED_PRECONDITION when Redis
  // refused the report as stale; UNAVAILABLE when Redis is unreachable.
  Status WriteWorker(const cluster::WorkerReport& report);
  Status last_write_status() const;
  // Re-reads the whole view from Redis now (the watch thread calls it;
  // tests may).
  Status Refresh();
  // How many times the view was read whole and in part (for one notice or a
  // burst of them): what the watcher costs Redis.
  struct ReadCounts {
    int64_t full = 0;
    int64_t partial = 0;
  };
  ReadCounts read_counts() const;
  // How stale the view gets: `on_lag(seconds)` runs, on the watch thread,
  // for each report that came with its notice, from its write in Redis
  // (Redis's clock, carried by the notice) to this view holding it (this
  // host's clock, so clock skew between hosts adds to it). A process records
  // it in somm_cluster_view_lag_seconds (PrometheusMetrics::ViewLagRecorder).
  void SetOnViewLag(std::function<void(double seconds)> on_lag);
  // The latest report of each worker in the view (address, zone, ...).
  std::map<std::string, cluster::WorkerReport> Workers() const;
  // Stops the watch thread and waits for it: after this returns, on_change
  // runs no more and the view stays as it is. A process calls it before
  // whatever its on_change reaches goes away (the destructor also does).
  void StopWatching();

  // The catalog (cluster/catalog_store.h). Its complete mark is the field
  // ".complete" of the catalog's hash (no model's name starts with a dot):
  // a Redis that restarted empty lost it with the catalog.
  cluster::Catalog ReadCatalog() const override;
  Status PublishModel(const std::string& model, const std::string& generation,
                      const std::string& entry) override;
  Status RemoveModel(const std::string& model) override;
  Status MarkCatalogComplete(const std::string& publisher) override;
  StatusOr<std::string> PublishedModel(const std::string& model) override;
  // Runs on the watch thread after a refresh that changed the catalog.
  void SetOnCatalogChange(std::function<void()> on_change) override;

  // The leader lease (cluster/lease_store.h): a key with a TTL on Redis's
  // clock; LeaseHolder() is the view's (a change sends a notice).
  StatusOr<bool> HoldLease(const std::string& holder, std::chrono::milliseconds ttl) override;
  void ReleaseLease(const std::string& holder) override;
  std::string LeaseHolder() const override;

 private:
  explicit RedisClusterStateStore(RedisStoreOptions options);
  StatusOr<RedisReply> Write(const std::vector<std::string>& command);
  // What a burst of change notices names.
  struct Changes {
    void Add(const std::string& notice);
    bool empty() const;
    int64_t first_generation = 0, generation = 0;  // the first and the last
    bool gap = false;  // the burst skipped a generation
    std::set<std::string> workers, routers;  // to read
    // Workers whose notice carried the report (no read needed).
    struct SentReport {
      int64_t lease_ms = 0;
      int64_t written_us = 0;  // Redis's clock at the write, since the epoch
      std::string report;
    };
    std::map<std::string, SentReport> reports;
    // Routers whose notice carried their demand (JSON; no read needed).
    std::map<std::string, std::string> demands;
    bool catalog = false, leader = false, everything = false;
  };
  void Watch();
  // Reads what `changes` names into the view (or everything, when they
  // cannot be trusted to name it all).
  Status Apply(const Changes& changes);
  Status ApplyLocked(const Changes& changes) SOMM_REQUIRES(refresh_mu_);
  // The re-poll: reads everything when needed, and the workers whose lease
  // should have lapsed.
  Status Poll();
  // Tells on_view_lag_ the lag of a report written at `written_us` (Redis's
  // clock).
  void NoteLag(int64_t written_us) SOMM_REQUIRES(refresh_mu_);
  void NoteExpiry(const std::string& worker, const RedisReply& pttl,
                  std::chrono::steady_clock::time_point read_at) SOMM_REQUIRES(refresh_mu_);
  // Makes the view from reports_ and demand_, plus what else was read.
  void Publish(bool changed, std::optional<cluster::Catalog> catalog,
               std::optional<std::string> leader) SOMM_REQUIRES(refresh_mu_);
  std::string Key(const std::string& suffix) const { return options_.prefix + suffix; }

  const RedisStoreOptions options_;
  mutable Mutex write_mu_;
  RedisConnection write_conn_ SOMM_GUARDED_BY(write_mu_);
  Status last_write_ SOMM_GUARDED_BY(write_mu_);

  mutable Mutex refresh_mu_ SOMM_ACQUIRED_BEFORE(view_mu_);
  RedisConnection read_conn_ SOMM_GUARDED_BY(refresh_mu_);
  int64_t last_redis_generation_ SOMM_GUARDED_BY(refresh_mu_) = -1;
  // After Redis restarted empty: keep the last view's workers until then.
  std::chrono::steady_clock::time_point restart_grace_until_ SOMM_GUARDED_BY(refresh_mu_){};
  // The watcher's own copy of the view, changed in place by each notice.
  std::map<std::string, cluster::WorkerReport> reports_ SOMM_GUARDED_BY(refresh_mu_);
  std::map<std::string, std::vector<cluster::ModelDemand>> demand_ SOMM_GUARDED_BY(refresh_mu_);
  std::string leader_seen_ SOMM_GUARDED_BY(refresh_mu_);
  // When each worker's key expires, as its TTL said when last read: a
  // heartbeat renews it and sends a notice, so past this time it has lapsed.
  std::map<std::string, std::chrono::steady_clock::time_point> expires_ SOMM_GUARDED_BY(refresh_mu_);
  std::chrono::steady_clock::time_point next_full_ SOMM_GUARDED_BY(refresh_mu_){};
  int64_t full_reads_ SOMM_GUARDED_BY(refresh_mu_) = 0;
  int64_t partial_reads_ SOMM_GUARDED_BY(refresh_mu_) = 0;
  std::function<void(double seconds)> on_view_lag_ SOMM_GUARDED_BY(refresh_mu_);

  mutable Mutex view_mu_;
  std::map<std::string, cluster::WorkerReport> workers_ SOMM_GUARDED_BY(view_mu_);
  std::shared_ptr<const cluster::ClusterState> snapshot_ SOMM_GUARDED_BY(view_mu_);
  cluster::Catalog catalog_ SOMM_GUARDED_BY(view_mu_);
  std::string leader_ SOMM_GUARDED_BY(view_mu_);
  uint64_t generation_ SOMM_GUARDED_BY(view_mu_) = 0;
  std::function<void()> on_catalog_change_ SOMM_GUARDED_BY(view_mu_);

  std::atomic<bool> stopping_{false};
  std::thread watch_thread_;
};

// A new incarnation id for a process starting now: the start time in
// milliseconds, zero-padded so that ids order as strings, then random hex.
std::string NewIncarnation();

}  // namespace somm::redis
