// How the router sends a query on (router.h): a worker and a replica by
// the power of two choices within the preferred zone, the dispatch, retries
// elsewhere when a remote worker fails, and the answer with its
// explanation, metrics and cost.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>

#include "common/format_number.h"
#include "router/router_query.h"

namespace somm {
namespace {

bool SameGroup(const cluster::GroupState& g, const VersionRecord& v, const std::string& variant,
               const HardwareConfig& hw) {
  return g.version == v.version && g.variant == variant && g.hardware == hw &&
         g.model == v.config.name;
}

// Why a query admitted under max_cost measured above it: its batch against
// the batch time its charge was predicted from (the query alone). Rare, so
// built only then.
std::string CostOverReason(double measured_usd, double max_cost_usd, double batch_ms,
                           int64_t batch_size, double predicted_usd, double usd_per_s) {
  std::string s = "measured cost " + FormatG(measured_usd, 3) + " USD over max_cost " +
                  FormatG(max_cost_usd, 3) + " USD: its batch (" + std::to_string(batch_size) +
                  (batch_size == 1 ? " sample" : " samples") + ") took " + FormatG(batch_ms, 3) +
                  " ms";
  if (usd_per_s > 0 && predicted_usd > 0) {
    s += " where " + FormatG(predicted_usd / usd_per_s * 1000.0, 3) +
         " ms was predicted (profile plus learned overhead)";
  }
  return s + "; reported at max_cost, the server absorbs the rest";
}
}  // namespace

bool Router::PickWorker(Query& q, const std::vector<cluster::GroupState>& groups,
                        int64_t instance) {
  thread_local std::minstd_rand thread_rng{std::random_device{}()};
  std::minstd_rand seeded;
  if (options_.seed != 0) {
    seeded.seed(static_cast<uint32_t>(options_.seed ^ std::hash<std::string>()(q.id) ^
                                      (static_cast<uint32_t>(q.attempts) * 0x9E3779B9u)));
  }
  std::minstd_rand& rng = options_.seed != 0 ? seeded : thread_rng;
  // One choice among the holders in this router's zone, one among the
  // others (RoutingPolicy); the lists are this thread's, reused.
  thread_local RoutingPolicy::Holders near, far;
  near.clear();
  far.clear();
  const bool zoned = !options_.zone.empty();
  for (const auto& g : groups) {
    if (g.loading || !SameGroup(g, *q.version, q.variant, q.hardware)) continue;
    if (std::find(q.failed_workers.begin(), q.failed_workers.end(), g.worker) !=
        q.failed_workers.end()) {
      continue;
    }
    (!zoned || g.zone == options_.zone ? near : far).push_back(&g);
  }
  const RoutingPolicy::PredictedWaitMs wait = [this, &q](const cluster::GroupState& g) {
    return QueueDelayMs(q, g);
  };
  const cluster::GroupState* in = near.empty() ? nullptr : routing_->Choose(near, rng, wait);
  const cluster::GroupState* out = far.empty() ? nullptr : routing_->Choose(far, rng, wait);
  if (in == nullptr && out == nullptr) return false;
  const cluster::GroupState* pick = in;
  q.zone_choice = zoned ? Query::ZoneChoice::kSameZone : Query::ZoneChoice::kNone;
  if (in == nullptr) {
    pick = out;
    q.zone_choice = Query::ZoneChoice::kNoHolderInZone;
  } else if (out != nullptr && RoutingPolicy::Load(*in) > RoutingPolicy::Load(*out)) {
    // Only a busier zone can lose to the other across the round trip; the
    // profile lookup happens only then.
    const double in_ms = QueueDelayMs(q, *in);
    const double out_ms = QueueDelayMs(q, *out);
    if (in_ms >= 0 && out_ms >= 0 && in_ms > out_ms + options_.cross_zone_rtt_ms) {
      pick = out;
      q.zone_choice = Query::ZoneChoice::kZoneBusier;
      q.zone_queue_ms = in_ms;
      q.other_queue_ms = out_ms;
    }
  }
  q.worker = pick->worker;
  q.zone = pick->zone;
  q.instance_id = -1;
  for (const auto& i : pick->instances) {
    if (instance >= 0 && i.instance_id == instance) q.instance_id = instance;
  }
  return true;
}

double Router::QueueDelayMs(const Query& q, const cluster::GroupState& g) const {
  const HardwareProfile* profile = nullptr;
  for (const VariantProfile& p : q.version->profiles) {
    if (p.variant == q.variant) profile = p.For(q.hardware);
    if (profile != nullptr) break;
  }
  if (profile == nullptr) return -1;
  // What waits ahead of a query on the group's least loaded replica (a
  // replica left idle by the others' work waits for nothing), run in
  // batches of up to max batch.
  const double work = std::floor(RoutingPolicy::Load(g));
  if (work <= 0) return 0;
  const double max_batch = std::max<int64_t>(q.version->config.max_batch_size, 1);
  const double batches = std::ceil(work / max_batch);
  return batches * profile->latency.Predict(static_cast<int64_t>(std::min(work, max_batch)));
}

std::string Router::ZoneReason(const Query& q) const {
  char buf[160];
  const double rtt = options_.cross_zone_rtt_ms;
  switch (q.zone_choice) {
    case Query::ZoneChoice::kNone:
      return "";
    case Query::ZoneChoice::kSameZone:
      return "same zone";
    case Query::ZoneChoice::kNoHolderInZone:
      std::snprintf(buf, sizeof buf, "no holder in zone %s; cross-zone +%.1f ms",
                    options_.zone.c_str(), rtt);
      return buf;
    case Query::ZoneChoice::kZoneBusier:
      std::snprintf(buf, sizeof buf,
                    "zone %s busier: predicted queue %.2f ms there, %.2f ms in zone %s; "
                    "cross-zone +%.1f ms",
                    options_.zone.c_str(), q.zone_queue_ms, q.other_queue_ms, q.zone.c_str(), rtt);
      return buf;
    case Query::ZoneChoice::kLoaded:
      if (q.zone.empty() || q.zone == options_.zone) return "loaded for this query";
      std::snprintf(buf, sizeof buf, "loaded for this query in zone %s; cross-zone +%.1f ms",
                    q.zone.c_str(), rtt);
      return buf;
  }
  return "";
}

void Router::Dispatch(std::shared_ptr<Query> q, bool retry_on_missing) {
  if (AnsweredFromCache(q)) return;
  std::shared_ptr<WorkerStub> stub = workers_.Find(q->worker);
  if (!stub) {
    // No worker chosen yet (after a load in a cluster), or it left: one that
    // holds the group now.
    const auto snapshot = store_.Read();
    if (PickWorker(*q, snapshot->groups)) stub = workers_.Find(q->worker);
  }
  std::string group = cluster::GroupLabel(q->version->config.name, q->version->version,
                                          q->variant, q->hardware);
  if (!stub) {
    if (!retry_on_missing) return Fail(q, Unavailable("no worker holds " + group + " now"));
    q->worker.clear();
    return LoadThenDispatch(q, q->variant, q->hardware, 1, "no worker held it");
  }
  ExecuteRequest r;
  r.group = std::move(group);
  r.instance_id = q->instance_id;
  // A remote worker's stub sends the inputs from where they lie, and may
  // hold them after a failure: the query shares them, for a retry
  // elsewhere, and never changes them again.
  q->remote = !stub->local();
  if (q->remote) {
    if (!q->sent_inputs) {
      q->sent_inputs = std::make_shared<const std::vector<Tensor>>(std::move(q->inputs));
    }
    r.shared_inputs = q->sent_inputs;
  } else if (q->sent_inputs) {
    r.inputs = *q->sent_inputs;  // a retry onto this process's own worker
  } else {
    r.inputs = std::move(q->inputs);
  }
  if (q->latency_slo_ms) {
    // The SLO runs from arrival: the batcher admits, batches and drops by it.
    r.deadline = q->start + std::chrono::duration_cast<SteadyClock::duration>(
                                std::chrono::duration<double, std::milli>(*q->latency_slo_ms));
  }
  r.best_effort = q->best_effort;
  const bool remote = q->remote;
  Status s = stub->Execute(r, [this, q, remote](StatusOr<ExecuteResult> result) {
    if (remote && !result.ok() && Retry(q, result.status())) return;
    Finish(q, std::move(result));
  });
  if (s.ok()) return;
  if (s.code() == StatusCode::kNotFound && retry_on_missing) {
    // Unloaded between routing and dispatch (an eviction, a replacement):
    // load it again for this query.
    if (!remote) q->inputs = std::move(r.inputs);
    q->instance_id = -1;
    q->worker.clear();
    return LoadThenDispatch(q, q->variant, q->hardware, 1,
                            "unloaded while a query was routed to it");
  }
  Fail(q, Unavailable(s.message()));
}

bool Router::Retry(const std::shared_ptr<Query>& q, const Status& why) {
  // A worker's refusal to queue (RESOURCE_EXHAUSTED: its queue is full, or
  // it would answer after the deadline) speaks for its own queue only: the
  // query may go to another holder of the group, though nothing is loaded
  // for it (that is the autoscaler's call, on the demand).
  const bool refused = why.code() == StatusCode::kResourceExhausted;
  if (why.code() != StatusCode::kUnavailable && why.code() != StatusCode::kNotFound && !refused) {
    return false;
  }
  if (q->attempts + 1 >= kMaxAttempts) return false;
  if (q->latency_slo_ms &&
      clock_.Now() - q->start >= std::chrono::duration<double, std::milli>(*q->latency_slo_ms)) {
    return false;  // no time left in its SLO
  }
  ++q->attempts;
  // A refusal is routine under load: not worth a line each at info.
  spdlog::log(refused ? spdlog::level::debug : spdlog::level::info,
              "query {}: worker {} answered {}; trying elsewhere (attempt {} of {})", q->id,
              q->worker, why.ToString(), q->attempts + 1, kMaxAttempts);
  // Neither a dead worker, nor one without the group, nor one that refused
  // it is tried again.
  const std::string tried = q->worker;
  q->failed_workers.push_back(tried);
  q->worker.clear();
  q->instance_id = -1;
  const auto snapshot = store_.Read();
  if (PickWorker(*q, snapshot->groups)) {
    Dispatch(q, false);
    return true;
  }
  if (refused) {  // no other holder: the refusal is the answer
    q->worker = tried;
    return false;
  }
  LoadThenDispatch(q, q->variant, q->hardware, 1,
                   "the worker that held it failed a query: " + why.message());
  return true;
}

void Router::Finish(const std::shared_ptr<Query>& q, StatusOr<ExecuteResult> result) {
  if (!result.ok()) return Fail(q, result.status());
  ExecuteResult& r = *result;
  InferenceResponse response;
  response.model_name = q->version->config.name;
  response.model_version = q->version->version_str;
  response.id = q->id;
  for (size_t i = 0; i < r.outputs.size(); ++i) {
    if (i < q->keep.size() && q->keep[i]) response.outputs.push_back(std::move(r.outputs[i]));
  }
  const BatchStats& stats = r.stats;
  const SteadyClock::time_point answered = clock_.Now();
  const int64_t total_us = MicrosBetween(q->start, answered);
  auto& p = response.parameters;
  const DecisionRecord& decision = q->decision;
  // The charge rule (QueryChargeUsd) on the measured batch. A query the
  // selector admitted under a cost ceiling is never reported above it: the
  // ceiling is what the client agreed to, and a batch slower than predicted
  // (noise, neighbours) is the server's misprediction, so the server absorbs
  // the rest and says so: somm_cost_capped, the measured charge and why it
  // ran over, in the answer and in the decision log.
  const double batch_ms = static_cast<double>(stats.compute_ns) / 1e6;
  const double measured = QueryChargeUsd(q->price_per_s, batch_ms, q->samples, stats.batch_size);
  const bool capped = q->max_cost_usd && measured > *q->max_cost_usd;
  const double charge = capped ? *q->max_cost_usd : measured;
  const std::string over =
      capped ? CostOverReason(measured, *q->max_cost_usd, batch_ms, stats.batch_size,
                              q->predicted_charge_usd, q->price_per_s)
             : "";
  const bool selected = !q->calibration_device.empty();
  if (selected && stats.first_in_batch && q->cold_batch) {
    cost_calibration_.ObserveCold(q->calibration_device, decision.variant, batch_ms,
                                  q->profiled.Predict(stats.batch_size), clock_.Now());
  } else if (selected && stats.first_in_batch) {
    cost_calibration_.Observe(q->calibration_device, decision.variant, batch_ms,
                              q->profiled.Predict(stats.batch_size), clock_.Now());
  }
  if (q->compact) {
    // The same facts, one parameter: "key=value ... reason=<the rest>".
    std::string s;
    s.reserve(192 + decision.reason.size());
    auto add = [&s](std::string_view key, std::string_view value) {
      s.append(key).append("=").append(value).append(" ");
    };
    auto number = [&add](std::string_view key, auto value) {
      char buf[32];
      const auto end = std::to_chars(buf, buf + sizeof buf, value).ptr;
      add(key, std::string_view(buf, static_cast<size_t>(end - buf)));
    };
    add("decision", decision.outcome);
    add("variant", decision.variant);
    add("hardware", decision.hardware);
    add("device", r.device);
    number("instance", r.instance_id);
    if (q->remote) add("worker", q->worker);
    if (!q->zone.empty()) add("zone", q->zone);
    number("batch", stats.batch_size);
    number("queue_us", stats.queue_ns / 1000);
    number("compute_us", stats.compute_ns / 1000);
    number("server_us", total_us);
    number("predicted_ms", decision.predicted_latency_ms);
    number("cost_usd", charge);
    if (capped) add("cost_capped", "true");
    if (capped) number("measured_cost_usd", measured);
    if (selected) number("predicted_cost_usd", q->predicted_charge_usd);
    if (!q->rollout_note.empty()) add("rollout", q->rollout_note);
    s.append("reason=").append(decision.reason);
    if (capped) s.append("; ").append(over);
    if (!options_.zone.empty()) s.append("; ").append(ZoneReason(*q));
    p["somm"] = std::move(s);
  } else {
    p["somm_queue_us"] = stats.queue_ns / 1000;
    p["somm_compute_us"] = stats.compute_ns / 1000;
    p["somm_server_us"] = total_us;
    p["somm_batch_size"] = stats.batch_size;
    p["somm_instance"] = r.instance_id;
    p["somm_variant"] = decision.variant;
    p["somm_hardware"] = decision.hardware;
    p["somm_device"] = r.device;
    p["somm_decision"] = decision.outcome;
    p["somm_predicted_latency_ms"] = decision.predicted_latency_ms;
    p["somm_latency_ms"] = static_cast<double>(total_us) / 1000.0;
    if (capped) {
      p["somm_cost_capped"] = true;
      p["somm_measured_cost_usd"] = measured;
      p["somm_cost_over_reason"] = over;
    }
    p["somm_cost_usd"] = charge;
    if (selected) p["somm_predicted_cost_usd"] = q->predicted_charge_usd;
    p["somm_reason"] = decision.reason;
    if (q->remote) p["somm_worker"] = q->worker;
    if (!q->zone.empty()) p["somm_zone"] = q->zone;
    if (!options_.zone.empty()) p["somm_zone_reason"] = ZoneReason(*q);
    if (!q->rollout_note.empty()) p["somm_rollout"] = q->rollout_note;
  }
  q->stats->metrics->RecordSuccess(stats.queue_ns / 1e3, stats.compute_ns / 1e3,
                                   static_cast<double>(total_us));
  q->stats->answered.fetch_add(1, std::memory_order_relaxed);
  q->stats->latency_us_total.fetch_add(total_us, std::memory_order_relaxed);
  q->stats->inference->RecordSuccess(q->samples, NanosBetween(q->start, answered), stats,
                                     NowUnixMs());
  if (q->latency_slo_ms) {
    q->stats->metrics->RecordSlo(static_cast<double>(total_us) <= *q->latency_slo_ms * 1000.0);
  }
  if (capped) q->stats->metrics->RecordCostOverCeiling();
  // A worker of this process records its batches itself; one of another
  // process marks one query per batch, and this router counts the batch by
  // it, so the routers' histograms add up to the workers'.
  if (q->remote && stats.first_in_batch) q->stats->metrics->RecordBatch(stats.batch_size);
  if (q->log_number != 0) {
    log_.Complete(q->log_number, static_cast<double>(total_us) / 1000.0,
                  capped ? "OK; " + over : "OK");
  }
  if (!q->cache_key.empty()) {
    const std::string& model = q->version->config.name;
    const int64_t evicted_before = response_cache_.StatsFor(model).evictions;
    const auto insert_start = SteadyClock::now();
    response_cache_.Insert(model, q->cache_key, response, q->version->config.response_cache.max_bytes);
    q->stats->inference->RecordCacheMiss(NanosBetween(insert_start, SteadyClock::now()));
    const ResponseCacheStats now = response_cache_.StatsFor(model);
    metrics_.SetResponseCache(model, now.bytes, now.entries, now.evictions - evicted_before);
  }
  q->done(std::move(response));
}

}  // namespace somm
