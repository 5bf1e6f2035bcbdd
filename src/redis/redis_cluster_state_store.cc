#include "redis/redis_cluster_state_store.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <optional>
#include <random>
#include <set>

#include "cluster/cluster_state_json.h"

namespace somm::redis {
namespace {

using cluster::ClusterState;
using cluster::ModelDemand;
using cluster::WorkerReport;

// KEYS: worker hash, workers set, generation. ARGV: incarnation, sequence,
// report, lease ms, worker id, channel. Returns the new generation, 0 for
// an older sequence of the same incarnation, -1 for an older incarnation.
// The notice carries the report, its lease and Redis's clock in microseconds
// ("17 report 3000 1795000000123456 w1\n{...}"), so that a watcher need not
// read them back (a heartbeat costs each watcher no command), and knows how
// old the report is when it has it. An older watcher, which knows no
// "report" notice, reads everything instead.
constexpr char kPutWorkerScript[] = R"lua(
local inc = redis.call('HGET', KEYS[1], 'incarnation')
if inc and ARGV[1] < inc then return -1 end
if inc == ARGV[1] then
  local seq = tonumber(redis.call('HGET', KEYS[1], 'sequence'))
  if seq and seq > tonumber(ARGV[2]) then return 0 end
end
redis.call('HSET', KEYS[1], 'incarnation', ARGV[1], 'sequence', ARGV[2], 'report', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
redis.call('SADD', KEYS[2], ARGV[5])
local g = redis.call('INCR', KEYS[3])
local t = redis.call('TIME')
local written_us = t[1] .. string.format('%06d', tonumber(t[2]))
redis.call('PUBLISH', ARGV[6],
           g .. ' report ' .. ARGV[4] .. ' ' .. written_us .. ' ' .. ARGV[5] .. '\n' .. ARGV[3])
return g
)lua";

// KEYS: worker hash, workers set, generation. ARGV: worker id, channel,
// "lapsed" (only if the hash is gone) or "remove".
constexpr char kRemoveWorkerScript[] = R"lua(
if ARGV[3] == 'lapsed' and (redis.call('EXISTS', KEYS[1]) == 1 or
                            redis.call('SISMEMBER', KEYS[2], ARGV[1]) == 0) then
  return 0
end
redis.call('DEL', KEYS[1])
redis.call('SREM', KEYS[2], ARGV[1])
local g = redis.call('INCR', KEYS[3])
redis.call('PUBLISH', ARGV[2], g .. ' worker ' .. ARGV[1])
return g
)lua";

// KEYS: demand key, routers set, generation. ARGV: demand JSON, ttl ms,
// router id, channel. The notice carries the demand ("18 router-demand r1\n
// [...]"), as a heartbeat's carries its report: every router writes its
// demand each second, and each watcher would otherwise read every one back.
// An older watcher, which knows no "router-demand" notice, reads everything.
constexpr char kPutDemandScript[] = R"lua(
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('SADD', KEYS[2], ARGV[3])
local g = redis.call('INCR', KEYS[3])
redis.call('PUBLISH', ARGV[4], g .. ' router-demand ' .. ARGV[3] .. '\n' .. ARGV[1])
return g
)lua";

// The catalog field that marks it complete (cluster/catalog_store.h).
constexpr char kCatalogCompleteField[] = ".complete";

// KEYS: catalog, generation, model:<name>. ARGV: model, generation or ""
// (remove), channel, the model's published entry ("" keeps the one there).
// The entry and the catalog's generation change together: a router that
// sees the new generation reads the entry written with it.
constexpr char kCatalogScript[] = R"lua(
if ARGV[2] == '' then
  redis.call('HDEL', KEYS[1], ARGV[1])
  redis.call('DEL', KEYS[3])
else
  if ARGV[4] ~= '' then redis.call('SET', KEYS[3], ARGV[4]) end
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
end
local g = redis.call('INCR', KEYS[2])
redis.call('PUBLISH', ARGV[3], g .. ' catalog')
return g
)lua";

// KEYS: leader, generation. ARGV: holder, ttl ms, channel. 1 while held.
constexpr char kLeaseScript[] = R"lua(
local cur = redis.call('GET', KEYS[1])
if cur == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
if cur then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
local g = redis.call('INCR', KEYS[2])
redis.call('PUBLISH', ARGV[3], g .. ' leader')
return 1
)lua";

// KEYS: leader, generation. ARGV: holder, channel.
constexpr char kReleaseScript[] = R"lua(
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
local g = redis.call('INCR', KEYS[2])
redis.call('PUBLISH', ARGV[2], g .. ' leader')
return 1
)lua";

}  // namespace

std::string NewIncarnation() {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count();
  std::random_device rd;
  char buf[48];
  std::snprintf(buf, sizeof buf, "%016" PRId64 "-%08x", static_cast<int64_t>(ms), rd());
  return buf;
}

namespace {

// The endpoint of one of the store's connections: its client name, if any,
// gets the connection's role ("router-0.read"), so that Redis tells them apart.
RedisEndpoint Named(RedisEndpoint endpoint, const std::string& role) {
  if (!endpoint.client_name.empty()) endpoint.client_name += "." + role;
  return endpoint;
}

}  // namespace

RedisClusterStateStore::RedisClusterStateStore(RedisStoreOptions options)
    : options_(std::move(options)),
      write_conn_(Named(options_.endpoint, "write")),
      read_conn_(Named(options_.endpoint, "read")),
      snapshot_(std::make_shared<const ClusterState>()) {}

StatusOr<std::unique_ptr<RedisClusterStateStore>> RedisClusterStateStore::Open(
    RedisStoreOptions options) {
  std::unique_ptr<RedisClusterStateStore> store(new RedisClusterStateStore(std::move(options)));
  SOMM_RETURN_IF_ERROR(store->Refresh());
  // spdlog's registry is created on first use; create it here, before the
  // watch thread exists, not from two threads at once.
  spdlog::default_logger_raw();
  if (store->options_.watch) store->watch_thread_ = std::thread([s = store.get()] { s->Watch(); });
  return store;
}

RedisClusterStateStore::~RedisClusterStateStore() { StopWatching(); }

void RedisClusterStateStore::StopWatching() {
  stopping_ = true;
  if (watch_thread_.joinable()) watch_thread_.join();
}

StatusOr<RedisReply> RedisClusterStateStore::Write(const std::vector<std::string>& command) {
  MutexLock lock(&write_mu_);
  StatusOr<RedisReply> reply = write_conn_.Command(command);
  if (!reply.ok()) {
    last_write_ = reply.status();
  } else if (reply->is_error()) {
    last_write_ = Internal("redis at " + options_.endpoint.ToString() + ": " + reply->str);
    return last_write_;
  } else {
    last_write_ = Status::Ok();
  }
  return reply;
}

Status RedisClusterStateStore::WriteWorker(const WorkerReport& report) {
  const std::string json = cluster::WorkerReportToJson(report, Clock::Real().Now());
  SOMM_ASSIGN_OR_RETURN(
      RedisReply reply,
      Write({"EVAL", kPutWorkerScript, "3", Key("worker:" + report.worker), Key("workers"),
             Key("generation"), report.incarnation, std::to_string(report.sequence), json,
             std::to_string(options_.lease.count()), report.worker, Key("changes")}));
  if (reply.integer < 0) {
    return FailedPrecondition("worker '" + report.worker + "' incarnation " + report.incarnation +
                              " is older than the one registered: a stale process");
  }
  if (reply.integer == 0) {
    return FailedPrecondition("worker '" + report.worker + "' report " +
                              std::to_string(report.sequence) + " is older than the one held");
  }
  return Status::Ok();
}

void RedisClusterStateStore::PutWorker(WorkerReport report) {
  const Status s = WriteWorker(report);
  if (!s.ok()) spdlog::warn("cluster state: report of worker {} not written: {}", report.worker, s.ToString());
}

void RedisClusterStateStore::RemoveWorker(const std::string& worker) {
  const auto reply = Write({"EVAL", kRemoveWorkerScript, "3", Key("worker:" + worker),
                            Key("workers"), Key("generation"), worker, Key("changes"), "remove"});
  if (!reply.ok()) spdlog::warn("cluster state: worker {} not removed: {}", worker, reply.status().ToString());
}

void RedisClusterStateStore::PutDemand(const std::string& router, std::vector<ModelDemand> demand) {
  const auto reply = Write({"EVAL", kPutDemandScript, "3", Key("demand:" + router), Key("routers"),
                            Key("generation"), cluster::DemandToJson(demand),
                            std::to_string(options_.demand_ttl.count()), router, Key("changes")});
  if (!reply.ok()) spdlog::warn("cluster state: demand of {} not written: {}", router, reply.status().ToString());
}

Status RedisClusterStateStore::last_write_status() const {
  MutexLock lock(&write_mu_);
  return last_write_;
}

std::shared_ptr<const ClusterState> RedisClusterStateStore::Read() const {
  MutexLock lock(&view_mu_);
  return snapshot_;
}

uint64_t RedisClusterStateStore::generation() const {
  MutexLock lock(&view_mu_);
  return generation_;
}

std::map<std::string, WorkerReport> RedisClusterStateStore::Workers() const {
  MutexLock lock(&view_mu_);
  return workers_;
}

void RedisClusterStateStore::SetOnCatalogChange(std::function<void()> on_change) {
  MutexLock lock(&view_mu_);
  on_catalog_change_ = std::move(on_change);
}

cluster::Catalog RedisClusterStateStore::ReadCatalog() const {
  MutexLock lock(&view_mu_);
  return catalog_;
}

std::string RedisClusterStateStore::LeaseHolder() const {
  MutexLock lock(&view_mu_);
  return leader_;
}

Status RedisClusterStateStore::PublishModel(const std::string& model,
                                            const std::string& generation,
                                            const std::string& entry) {
  return Write({"EVAL", kCatalogScript, "3", Key("catalog"), Key("generation"),
                Key("model:" + model), model, generation, Key("changes"), entry})
      .status();
}

Status RedisClusterStateStore::RemoveModel(const std::string& model) {
  return Write({"EVAL", kCatalogScript, "3", Key("catalog"), Key("generation"),
                Key("model:" + model), model, "", Key("changes"), ""})
      .status();
}

Status RedisClusterStateStore::MarkCatalogComplete(const std::string& publisher) {
  // The mark is a catalog field with no entry: the script writes no model key.
  return Write({"EVAL", kCatalogScript, "3", Key("catalog"), Key("generation"),
                Key("model:" + std::string(kCatalogCompleteField)), kCatalogCompleteField,
                publisher, Key("changes"), ""})
      .status();
}

StatusOr<std::string> RedisClusterStateStore::PublishedModel(const std::string& model) {
  SOMM_ASSIGN_OR_RETURN(RedisReply reply, Write({"GET", Key("model:" + model)}));
  if (reply.type != RedisReply::Type::kString) {
    return NotFound("redis holds no published entry for model '" + model + "'");
  }
  return reply.str;
}

StatusOr<bool> RedisClusterStateStore::HoldLease(const std::string& holder,
                                                 std::chrono::milliseconds ttl) {
  SOMM_ASSIGN_OR_RETURN(RedisReply reply,
                        Write({"EVAL", kLeaseScript, "2", Key("leader"), Key("generation"), holder,
                               std::to_string(ttl.count()), Key("changes")}));
  return reply.integer == 1;
}

void RedisClusterStateStore::ReleaseLease(const std::string& holder) {
  (void)Write({"EVAL", kReleaseScript, "2", Key("leader"), Key("generation"), holder,
               Key("changes")});
}

namespace {

// A change notice's text: "<generation> <kind> [<id>]", e.g. "17 worker w1".
struct Notice {
  int64_t generation = 0;
  std::string kind;
  std::string id;
  // "report" notices: the lease in ms, Redis's clock at the write (us since
  // the epoch) and the report as written; "router-demand": the demand.
  int64_t lease_ms = -1;
  int64_t written_us = 0;
  std::string body;
};

Notice ParseNotice(const std::string& text) {
  Notice n;
  const size_t a = text.find(' ');
  n.generation = std::strtoll(text.substr(0, a).c_str(), nullptr, 10);
  if (a == std::string::npos) return n;
  const size_t b = text.find(' ', a + 1);
  n.kind = text.substr(a + 1, b == std::string::npos ? std::string::npos : b - a - 1);
  if (b == std::string::npos) return n;
  if (n.kind == "router-demand") {
    // "<router id>\n<demand>": the id never holds a newline.
    const size_t d = text.find('\n', b + 1);
    if (d == std::string::npos) {
      n.kind = "malformed demand";  // read everything
      return n;
    }
    n.id = text.substr(b + 1, d - b - 1);
    n.body = text.substr(d + 1);
    return n;
  }
  if (n.kind != "report") {
    n.id = text.substr(b + 1);
    return n;
  }
  // "<lease ms> <written us> <id>\n<report>": the id may hold spaces, never
  // a newline.
  const size_t c = text.find(' ', b + 1);
  const size_t c2 = c == std::string::npos ? c : text.find(' ', c + 1);
  const size_t d = text.find('\n', b + 1);
  if (c2 == std::string::npos || d == std::string::npos || c2 > d) {
    n.kind = "malformed report";  // read everything
    return n;
  }
  n.lease_ms = std::strtoll(text.substr(b + 1, c - b - 1).c_str(), nullptr, 10);
  n.written_us = std::strtoll(text.substr(c + 1, c2 - c - 1).c_str(), nullptr, 10);
  n.id = text.substr(c2 + 1, d - c2 - 1);
  n.body = text.substr(d + 1);
  return n;
}

// A GET's value, or "" for a key that does not exist.
std::string StringOf(const RedisReply& r) {
  return r.type == RedisReply::Type::kString ? r.str : "";
}

// The generation counter's value (0 when Redis has none: empty, restarted).
int64_t GenerationOf(const RedisReply& r) {
  return r.type == RedisReply::Type::kString ? std::strtoll(r.str.c_str(), nullptr, 10) : 0;
}

// HGETALL of the catalog: model -> generation, and the complete mark.
cluster::Catalog CatalogOf(const RedisReply& r) {
  cluster::Catalog catalog;
  for (size_t i = 0; i + 1 < r.elements.size(); i += 2) {
    if (r.elements[i].str == kCatalogCompleteField) {
      catalog.complete = true;
    } else {
      catalog.models[r.elements[i].str] = r.elements[i + 1].str;
    }
  }
  return catalog;
}

// A worker's report as written (`text`), or nothing (with a warning) when it
// does not parse: the view keeps what it had of that worker.
std::optional<WorkerReport> ReportOf(const std::string& worker, const std::string& text,
                                     cluster::TimePoint now) {
  StatusOr<WorkerReport> report = cluster::WorkerReportFromJson(text, now);
  if (!report.ok()) {
    spdlog::warn("cluster state: worker {}: {}", worker, report.status().ToString());
    return std::nullopt;
  }
  return std::move(report).value();
}

// A router's demand as written, or nothing (with a warning) when it does not
// parse: the view keeps what it had of that router.
std::optional<std::vector<ModelDemand>> DemandOf(const std::string& router,
                                                 const std::string& text) {
  StatusOr<std::vector<ModelDemand>> rows = cluster::DemandFromJson(text);
  if (!rows.ok()) {
    spdlog::warn("cluster state: demand of router {}: {}", router, rows.status().ToString());
    return std::nullopt;
  }
  return std::move(rows).value();
}

}  // namespace

void RedisClusterStateStore::Changes::Add(const std::string& notice) {
  Notice n = ParseNotice(notice);
  // Every write bumps the counter by one and publishes in that order: a
  // burst that skips a number lost a notice.
  if (first_generation == 0) {
    first_generation = n.generation;
  } else if (n.generation != generation + 1) {
    gap = true;
  }
  generation = n.generation;
  // A worker named twice in a burst: its last notice says what to do.
  if (n.kind == "worker" && !n.id.empty()) {
    workers.insert(n.id);
    reports.erase(n.id);
  } else if (n.kind == "report" && !n.id.empty() && n.lease_ms >= 0) {
    reports[n.id] = {n.lease_ms, n.written_us, std::move(n.body)};
    workers.erase(n.id);
  } else if (n.kind == "demand" && !n.id.empty()) {
    routers.insert(n.id);
    demands.erase(n.id);
  } else if (n.kind == "router-demand" && !n.id.empty()) {
    demands[n.id] = std::move(n.body);
    routers.erase(n.id);
  } else if (n.kind == "catalog") {
    catalog = true;
  } else if (n.kind == "leader") {
    leader = true;
  } else {
    everything = true;  // a notice this version does not know: read it all
  }
}

bool RedisClusterStateStore::Changes::empty() const {
  return workers.empty() && reports.empty() && routers.empty() && demands.empty() && !catalog &&
         !leader && !everything;
}

Status RedisClusterStateStore::Refresh() {
  MutexLock refresh(&refresh_mu_);
  SOMM_ASSIGN_OR_RETURN(std::vector<RedisReply> heads,
                        read_conn_.Pipeline({{"SMEMBERS", Key("workers")},
                                             {"SMEMBERS", Key("routers")},
                                             {"GET", Key("generation")},
                                             {"HGETALL", Key("catalog")},
                                             {"GET", Key("leader")}}));
  cluster::Catalog catalog = CatalogOf(heads[3]);
  std::string leader = StringOf(heads[4]);
  std::vector<std::string> worker_ids, router_ids;
  for (const RedisReply& r : heads[0].elements) worker_ids.push_back(r.str);
  for (const RedisReply& r : heads[1].elements) router_ids.push_back(r.str);
  const int64_t redis_generation = GenerationOf(heads[2]);

  std::vector<std::vector<std::string>> reads;
  for (const std::string& id : worker_ids) {
    reads.push_back({"HGET", Key("worker:" + id), "report"});
    reads.push_back({"PTTL", Key("worker:" + id)});
  }
  for (const std::string& id : router_ids) reads.push_back({"GET", Key("demand:" + id)});
  std::vector<RedisReply> values;
  if (!reads.empty()) {
    SOMM_ASSIGN_OR_RETURN(values, read_conn_.Pipeline(reads));
  }

  const cluster::TimePoint now = Clock::Real().Now();
  const auto read_at = std::chrono::steady_clock::now();
  std::map<std::string, WorkerReport> workers;
  std::vector<std::string> lapsed;
  expires_.clear();
  for (size_t i = 0; i < worker_ids.size(); ++i) {
    const RedisReply& v = values[2 * i];
    if (v.type != RedisReply::Type::kString) {
      lapsed.push_back(worker_ids[i]);
      continue;
    }
    std::optional<WorkerReport> report = ReportOf(worker_ids[i], v.str, now);
    if (!report) continue;
    workers.emplace(worker_ids[i], std::move(*report));
    NoteExpiry(worker_ids[i], values[2 * i + 1], read_at);
  }
  std::map<std::string, std::vector<ModelDemand>> demand;
  std::vector<std::string> gone_routers;
  for (size_t i = 0; i < router_ids.size(); ++i) {
    const RedisReply& v = values[2 * worker_ids.size() + i];
    if (v.type != RedisReply::Type::kString) {
      gone_routers.push_back(router_ids[i]);
      continue;
    }
    std::optional<std::vector<ModelDemand>> rows = DemandOf(router_ids[i], v.str);
    if (rows) demand.emplace(router_ids[i], std::move(*rows));
  }
  // Anyone who notices a lapsed lease prunes it (idempotent, and only if the
  // worker has not come back meanwhile).
  for (const std::string& id : lapsed) {
    spdlog::warn("cluster state: worker {} lease lapsed ({} ms without a heartbeat): dropped", id,
                 options_.lease.count());
    (void)read_conn_.Command({"EVAL", kRemoveWorkerScript, "3", Key("worker:" + id),
                              Key("workers"), Key("generation"), id, Key("changes"), "lapsed"});
  }
  for (const std::string& id : gone_routers) (void)read_conn_.Command({"SREM", Key("routers"), id});

  const bool changed = redis_generation != last_redis_generation_ || !lapsed.empty();
  if (redis_generation < last_redis_generation_) {
    // The counter went back: Redis restarted empty. Its workers are not
    // dead; they announce themselves at their next heartbeat. Until then
    // (one lease at most) the view keeps what it had.
    restart_grace_until_ = std::chrono::steady_clock::now() + options_.lease;
    spdlog::warn("cluster state: redis at {} restarted empty; keeping the last view for up to {} ms "
                 "while workers announce themselves again",
                 options_.endpoint.ToString(), options_.lease.count());
  }
  last_redis_generation_ = redis_generation;
  if (std::chrono::steady_clock::now() < restart_grace_until_) {
    for (const auto& [id, report] : reports_) {
      if (workers.emplace(id, report).second) expires_[id] = restart_grace_until_;  // new ones win
    }
    if (leader.empty()) leader = leader_seen_;
  }
  reports_ = std::move(workers);
  demand_ = std::move(demand);
  leader_seen_ = leader;
  next_full_ = read_at + options_.full_repoll;
  ++full_reads_;
  Publish(changed, std::move(catalog), std::move(leader));
  return Status::Ok();
}

void RedisClusterStateStore::Publish(bool changed, std::optional<cluster::Catalog> catalog,
                                     std::optional<std::string> leader) {
  auto snapshot = std::make_shared<const ClusterState>(cluster::MergeClusterState(reports_, demand_));
  std::function<void()> notify;
  {
    MutexLock lock(&view_mu_);
    workers_ = reports_;
    snapshot_ = std::move(snapshot);
    if (catalog && (catalog->models != catalog_.models || catalog->complete != catalog_.complete)) {
      catalog_ = std::move(*catalog);
      notify = on_catalog_change_;
    }
    if (leader) leader_ = std::move(*leader);
    if (changed) ++generation_;
  }
  if (notify) notify();
}

Status RedisClusterStateStore::Apply(const Changes& changes) {
  {
    MutexLock refresh(&refresh_mu_);
    // Notices that do not follow the last one seen (one was lost, or Redis
    // restarted and its counter went back), or one that says nothing this
    // version knows: read everything.
    if (!changes.everything && !changes.gap &&
        changes.first_generation == last_redis_generation_ + 1) {
      return ApplyLocked(changes);
    }
  }
  return Refresh();
}

Status RedisClusterStateStore::ApplyLocked(const Changes& changes) {
  std::vector<std::vector<std::string>> reads;
  for (const std::string& id : changes.workers) {
    reads.push_back({"HGET", Key("worker:" + id), "report"});
    reads.push_back({"PTTL", Key("worker:" + id)});
  }
  for (const std::string& id : changes.routers) reads.push_back({"GET", Key("demand:" + id)});
  if (changes.catalog) reads.push_back({"HGETALL", Key("catalog")});
  if (changes.leader) reads.push_back({"GET", Key("leader")});
  std::vector<RedisReply> values;
  if (!reads.empty()) {
    SOMM_ASSIGN_OR_RETURN(values, read_conn_.Pipeline(reads));
    ++partial_reads_;
  }
  const cluster::TimePoint now = Clock::Real().Now();
  const auto read_at = std::chrono::steady_clock::now();
  // Reports that came with their notices: as read, their lease starting now
  // (the notice left Redis a moment after the lease was set, so the view
  // keeps the worker that moment longer at most).
  for (const auto& [id, sent] : changes.reports) {
    std::optional<WorkerReport> report = ReportOf(id, sent.report, now);
    if (!report) continue;
    reports_[id] = std::move(*report);
    expires_[id] = read_at + std::chrono::milliseconds(sent.lease_ms);
    NoteLag(sent.written_us);
  }
  size_t i = 0;
  for (const std::string& id : changes.workers) {
    const RedisReply& v = values[i];
    const RedisReply& ttl = values[i + 1];
    i += 2;
    if (v.type != RedisReply::Type::kString) {
      // Removed, or its lease lapsed: no report, no worker. A lapse sends no
      // notice, so whoever sees it first prunes it (which sends one).
      if (reports_.erase(id) > 0 && changes.generation == 0) {
        spdlog::warn("cluster state: worker {} lease lapsed (no heartbeat within its lease): dropped",
                     id);
        (void)read_conn_.Command({"EVAL", kRemoveWorkerScript, "3", Key("worker:" + id),
                                  Key("workers"), Key("generation"), id, Key("changes"), "lapsed"});
      }
      expires_.erase(id);
      continue;
    }
    std::optional<WorkerReport> report = ReportOf(id, v.str, now);
    if (!report) continue;
    reports_[id] = std::move(*report);
    NoteExpiry(id, ttl, read_at);
  }
  for (const auto& [id, sent] : changes.demands) {
    std::optional<std::vector<ModelDemand>> rows = DemandOf(id, sent);
    if (rows) demand_[id] = std::move(*rows);
  }
  for (const std::string& id : changes.routers) {
    const RedisReply& v = values[i++];
    if (v.type != RedisReply::Type::kString) {
      demand_.erase(id);
      continue;
    }
    std::optional<std::vector<ModelDemand>> rows = DemandOf(id, v.str);
    if (rows) demand_[id] = std::move(*rows);
  }
  std::optional<cluster::Catalog> catalog;
  if (changes.catalog) catalog = CatalogOf(values[i++]);
  std::optional<std::string> leader;
  if (changes.leader) {
    leader = StringOf(values[i++]);
    leader_seen_ = *leader;
  }
  if (changes.generation > 0) last_redis_generation_ = changes.generation;
  Publish(/*changed=*/true, std::move(catalog), std::move(leader));
  return Status::Ok();
}

void RedisClusterStateStore::NoteLag(int64_t written_us) {
  if (!on_view_lag_) return;
  const int64_t now_us = std::chrono::duration_cast<std::chrono::microseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  on_view_lag_(static_cast<double>(std::max<int64_t>(0, now_us - written_us)) / 1e6);
}

void RedisClusterStateStore::SetOnViewLag(std::function<void(double seconds)> on_lag) {
  MutexLock refresh(&refresh_mu_);
  on_view_lag_ = std::move(on_lag);
}

void RedisClusterStateStore::NoteExpiry(const std::string& worker, const RedisReply& pttl,
                                        std::chrono::steady_clock::time_point read_at) {
  // PTTL: milliseconds left, -1 for a key without a TTL (never lapses).
  if (pttl.type == RedisReply::Type::kInteger && pttl.integer >= 0) {
    expires_[worker] = read_at + std::chrono::milliseconds(pttl.integer);
  } else {
    expires_.erase(worker);
  }
}

Status RedisClusterStateStore::Poll() {
  bool full = false;
  Changes lapsing;
  {
    MutexLock refresh(&refresh_mu_);
    const auto now = std::chrono::steady_clock::now();
    SOMM_ASSIGN_OR_RETURN(std::vector<RedisReply> heads,
                          read_conn_.Pipeline({{"GET", Key("generation")}, {"GET", Key("leader")}}));
    const int64_t redis_generation = GenerationOf(heads[0]);
    // A notice lost (or still on its way), or Redis restarted, or time for
    // the periodic full read: read it all.
    full = now >= next_full_ || redis_generation != last_redis_generation_;
    if (!full) {
      // The leader's lease lapses without a notice.
      const std::string leader = StringOf(heads[1]);
      if (leader != leader_seen_) {
        leader_seen_ = leader;
        MutexLock lock(&view_mu_);
        leader_ = leader;
      }
      // So does a worker's: read again those whose key should be gone by
      // now (a heartbeat would have renewed it, and sent a notice).
      for (const auto& [id, at] : expires_) {
        if (now >= at) lapsing.workers.insert(id);
      }
      if (!lapsing.workers.empty()) return ApplyLocked(lapsing);
      return Status::Ok();
    }
  }
  return Refresh();
}

RedisClusterStateStore::ReadCounts RedisClusterStateStore::read_counts() const {
  MutexLock refresh(&refresh_mu_);
  return {full_reads_, partial_reads_};
}

void RedisClusterStateStore::Watch() {
  RedisConnection notices(Named(options_.endpoint, "watch"));
  (void)notices.Subscribe({Key("changes")});
  auto next_poll = std::chrono::steady_clock::now() + options_.repoll;
  const auto slice = std::min(options_.repoll, std::chrono::milliseconds(100));
  bool ok = true;
  bool missed = false;  // the notices' connection broke: some may be lost
  while (!stopping_.load()) {
    StatusOr<std::optional<std::string>> notice = notices.WaitMessage(slice);
    if (!notice.ok()) {
      if (ok) spdlog::warn("cluster state: {}; retrying", notice.status().ToString());
      ok = false;
      missed = true;
      std::this_thread::sleep_for(slice);  // Redis is down: retry at the slice's pace
    }
    // Coalesce a burst of notices into one read of what they name.
    Changes changes;
    while (notice.ok() && notice->has_value()) {
      changes.Add(**notice);
      notice = notices.WaitMessage(std::chrono::milliseconds(0));
    }
    const bool due = std::chrono::steady_clock::now() >= next_poll;
    if (changes.empty() && !due && !missed) continue;
    Status s = Status::Ok();
    if (missed) {
      if (!due) continue;  // at the re-poll's pace while Redis is away
      s = Refresh();
    } else {
      if (!changes.empty()) s = Apply(changes);
      if (s.ok() && due) s = Poll();
    }
    if (s.ok() && !ok) spdlog::info("cluster state: redis at {} is back", options_.endpoint.ToString());
    ok = s.ok();
    missed = !s.ok();
    if (due || !s.ok()) next_poll = std::chrono::steady_clock::now() + options_.repoll;
  }
}

}  // namespace somm::redis
