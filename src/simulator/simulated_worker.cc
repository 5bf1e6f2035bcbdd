#include "simulator/simulated_worker.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <utility>

namespace somm::sim {

namespace {

using std::chrono::duration_cast;
using Nanos = std::chrono::nanoseconds;


const HardwareProfile* ProfileOf(const VersionRecord& v, const std::string& variant,
                                 const HardwareConfig& hw) {
  for (const VariantProfile& p : v.profiles) {
    if (p.variant == variant) return p.For(hw);
  }
  return nullptr;
}

// As the live batcher caps a batch (batcher.cc: the largest preferred size
// below max_batch_size, else max_batch_size; 1 when the model does not batch).
int64_t BatchCeiling(const ModelConfig& c) {
  if (c.max_batch_size <= 0) return 1;
  if (!c.dynamic_batching || c.dynamic_batching->preferred_batch_sizes.empty()) {
    return c.max_batch_size;
  }
  return std::clamp<int64_t>(c.dynamic_batching->preferred_batch_sizes.back(), 1, c.max_batch_size);
}

}  // namespace

SimulatedWorker::SimulatedWorker(EventLoop& loop, cluster::ClusterStateStore& store,
                                 SimulatedWorkerOptions options)
    : loop_(loop),
      store_(store),
      options_(std::move(options)),
      rng_(options_.seed),
      replicas_since_(loop.Now()) {}

double SimulatedWorker::ProfileMs(const Group& g, int64_t batch) const {
  return g.profile->latency.Measured(batch);
}

SimulatedWorker::TimePoint SimulatedWorker::FreeAt(const Replica& r) const {
  TimePoint t = std::max(loop_.Now(), r.ready_at);
  if (r.busy) t = std::max(t, r.busy_until);
  return t;
}

void SimulatedWorker::NoteReplicas(int64_t delta, const HardwareConfig& hardware) {
  const TimePoint now = loop_.Now();
  const double since = std::chrono::duration<double>(now - replicas_since_).count();
  replica_seconds_ += static_cast<double>(replicas_now_) * since;
  usd_ += usd_per_s_now_ * since;
  replicas_since_ = now;
  replicas_now_ += delta;
  usd_per_s_now_ += static_cast<double>(delta) * options_.prices.PerSecond(hardware);
}

double SimulatedWorker::Usd() const {
  return usd_ +
         usd_per_s_now_ * std::chrono::duration<double>(loop_.Now() - replicas_since_).count();
}

double SimulatedWorker::ReplicaSeconds() const {
  return replica_seconds_ +
         static_cast<double>(replicas_now_) *
             std::chrono::duration<double>(loop_.Now() - replicas_since_).count();
}

int64_t SimulatedWorker::used_bytes() const {
  int64_t used = 0;
  for (const auto& [label, g] : groups_) {
    used += g->memory_bytes * static_cast<int64_t>(g->replicas.size());
  }
  return used;
}

Status SimulatedWorker::Execute(ExecuteRequest& request, ExecuteCallback done) {
  if (dead_) {
    done(Unavailable("worker " + options_.id + " is dead"));
    return Status::Ok();
  }
  auto it = groups_.find(request.group);
  if (it == groups_.end()) {
    return NotFound("instance group " + request.group + " is not loaded on worker " + options_.id);
  }
  std::shared_ptr<Group> g = it->second;
  const TimePoint now = loop_.Now();
  Query q;
  const std::vector<Tensor>& inputs = request.Inputs();
  q.samples = g->max_batch > 0 && !inputs.empty() && !inputs[0].shape.empty()
                  ? std::max<int64_t>(inputs[0].shape[0], 1)
                  : 1;
  q.enqueued = now;
  q.deadline = request.deadline;
  q.best_effort = request.best_effort;
  q.done = std::move(done);
  request.inputs.clear();  // taken
  ++g->uses_total;
  g->last_used = now;
  if (g->queue.size() >= g->max_queue) {
    q.done(ResourceExhausted("queue of " + g->label + " is full (" + std::to_string(g->max_queue) +
                             " queries)"));
    return Status::Ok();
  }
  if (q.deadline != TimePoint::max() && !q.best_effort) {
    if (q.deadline <= now) {
      q.done(DeadlineExceeded("deadline passed before " + g->label + " queued the query"));
      return Status::Ok();
    }
    // The batcher's admission: the queued samples (and this one) cut at the
    // cap, spread over the replicas, after the earliest replica is free.
    TimePoint first_free = TimePoint::max();
    for (const auto& r : g->replicas) first_free = std::min(first_free, FreeAt(*r));
    const auto queue_us =
        PredictQueueUs(*g->predictor, g->queued_samples + q.samples, g->cap->cap());
    if (queue_us && first_free != TimePoint::max()) {
      const double per_replica_us = *queue_us / static_cast<double>(g->replicas.size());
      if (first_free + FromMs(per_replica_us / 1000.0) > q.deadline) {
        q.done(
            ResourceExhausted("SLO admission: " + g->label + " would answer after the deadline"));
        return Status::Ok();
      }
    }
  }
  bool any_ready = false;
  for (const auto& r : g->replicas) any_ready = any_ready || r->ready_at <= now;
  if (!any_ready) ++waited_for_load_;
  g->queued_samples += q.samples;
  g->queue.push_back(std::move(q));
  TryStart(g);
  return Status::Ok();
}

void SimulatedWorker::TryStart(const std::shared_ptr<Group>& g) {
  const TimePoint now = loop_.Now();
  for (size_t i = 0; i < g->replicas.size() && !g->queue.empty(); ++i) {
    std::shared_ptr<Replica> r = g->replicas[i];
    if (!r->busy && !r->removed && r->ready_at <= now) StartBatch(g, r);
  }
}

void SimulatedWorker::StartBatch(const std::shared_ptr<Group>& g,
                                 const std::shared_ptr<Replica>& r) {
  const TimePoint now = loop_.Now();
  // Dropped unexecuted, as the live batcher does: the deadline has passed,
  // or even a batch of its own would end after it.
  std::vector<Query> expired;
  while (!g->queue.empty()) {
    Query& head = g->queue.front();
    if (head.deadline == TimePoint::max() || head.best_effort) break;
    const auto own_us = g->predictor->PredictUs(head.samples);
    const bool late =
        head.deadline <= now || (own_us && now + FromMs(*own_us / 1000.0) > head.deadline);
    if (!late) break;
    g->queued_samples -= head.samples;
    expired.push_back(std::move(head));
    g->queue.pop_front();
  }
  // The live batcher's rule (batching/slo_policy.h).
  const NextBatch next = NextBatchOf(
      *g->predictor, g->cap->cap(), g->queue.begin(), g->queue.end(),
      [now](const Query& q) -> std::optional<QueuedTaskView> {
        QueuedTaskView v{q.samples};
        if (q.deadline != TimePoint::max() && !q.best_effort) {
          v.slack_us = std::chrono::duration<double, std::micro>(q.deadline - now).count();
        }
        return v;
      });
  const int64_t samples = next.samples;
  std::vector<Query> batch;
  batch.reserve(next.tasks);
  for (size_t i = 0; i < next.tasks; ++i) {
    g->queued_samples -= g->queue.front().samples;
    batch.push_back(std::move(g->queue.front()));
    g->queue.pop_front();
  }
  if (!batch.empty()) {
    double ms = ProfileMs(*g, samples);
    if (options_.latency_noise_sigma > 0) {
      // Median 1: the profile's figures are medians.
      ms *= std::exp(std::normal_distribution<double>(0.0, options_.latency_noise_sigma)(rng_));
    }
    const Nanos compute = FromMs(ms);
    r->busy = true;
    r->busy_until = now + compute;
    g->executing += static_cast<int64_t>(batch.size());
    ++batches_;
    loop_.At(r->busy_until,
             [this, g, r, samples, compute, start = now, batch = std::move(batch)]() mutable {
               const TimePoint end = loop_.Now();
               if (dead_) {
                 for (Query& q : batch) q.done(Unavailable("worker " + options_.id + " died"));
                 return;
               }
               r->busy = false;
               g->executing -= static_cast<int64_t>(batch.size());
               g->last_used = end;
               g->predictor->Observe(samples, static_cast<double>(compute.count()) / 1000.0);
               bool had_deadline = false;
               bool met = true;
               for (const Query& q : batch) {
                 if (q.deadline == TimePoint::max() || q.best_effort) continue;
                 had_deadline = true;
                 met = met && end <= q.deadline;
               }
               if (had_deadline) g->cap->OnBatch(met);
               bool first = true;
               for (Query& q : batch) {
                 ExecuteResult result;
                 result.stats.queue_ns = duration_cast<Nanos>(start - q.enqueued).count();
                 result.stats.compute_ns = compute.count();
                 result.stats.batch_size = samples;
                 result.stats.first_in_batch = first;
                 first = false;
                 result.instance_id = r->id;
                 result.device = Device{g->hardware.device, g->hardware.device_index}.ToString();
                 q.done(std::move(result));
               }
               if (!r->removed) TryStart(g);
             });
  }
  for (Query& q : expired) {
    q.done(DeadlineExceeded(
        "dropped by " + g->label + ": its deadline " +
        (q.deadline <= now ? "passed in the queue" : "cannot be met by a batch of its own")));
  }
}

StatusOr<std::shared_ptr<SimulatedWorker::Group>> SimulatedWorker::NewGroup(
    const WorkerAction& action) {
  const cluster::Action& a = action.action;
  const std::string label = cluster::GroupLabel(a);
  if (!action.version) return InvalidArgument("load of " + label + " names no model version");
  const HardwareProfile* profile = ProfileOf(*action.version, a.variant, a.hardware);
  if (profile == nullptr) {
    return Unimplemented("the simulator has no profile of " + label +
                         " (it runs only profiled variants)");
  }
  auto g = std::make_shared<Group>();
  g->label = label;
  g->version = action.version;
  g->variant = a.variant;
  g->hardware = a.hardware;
  g->device = Device{a.hardware.device, a.hardware.device_index}.ToString();
  g->profile = profile;
  const ModelConfig& c = action.version->config;
  g->max_batch = std::max<int64_t>(c.max_batch_size, 0);
  g->slowdown_probe = g->max_batch >= 8 ? 8 : 1;
  g->probe_profiled_us = profile->latency.Measured(g->slowdown_probe) * 1000.0;
  g->max_queue = static_cast<size_t>(
      std::max<int64_t>(c.dynamic_batching ? c.dynamic_batching->max_queue_size
                                           : DynamicBatchingOptions().max_queue_size,
                        1));
  g->memory_bytes = static_cast<int64_t>(profile->peak_memory_mb * 1024 * 1024);
  g->pinned = action.pinned;
  g->last_used = loop_.Now();
  const int64_t ceiling = BatchCeiling(c);
  const HardwareProfile* p = profile;
  g->predictor = std::make_unique<ComputePredictor>(
      ceiling, [p](int64_t b) { return p->latency.Measured(b) * 1000.0; });
  g->cap = std::make_unique<BatchCapAimd>(ceiling);
  return g;
}

Status SimulatedWorker::AddReplicas(Group& g, int n) {
  const int64_t need = g.memory_bytes * n;
  const int64_t used = used_bytes();
  if (used + need > options_.budget_bytes) {
    return ResourceExhausted("worker " + options_.id + ": " + std::to_string(n) +
                             " replica(s) of " + g.label + " need " + cluster::FormatBytes(need) +
                             ", " + cluster::FormatBytes(options_.budget_bytes - used) + " of " +
                             cluster::FormatBytes(options_.budget_bytes) + " free");
  }
  const TimePoint ready = loop_.Now() + FromMs(g.profile->load_time_ms);
  for (int i = 0; i < n; ++i) {
    auto r = std::make_shared<Replica>();
    r->id = next_instance_id_++;
    r->ready_at = ready;
    g.replicas.push_back(r);
  }
  NoteReplicas(n, g.hardware);
  return Status::Ok();
}

void SimulatedWorker::RemoveReplicas(Group& g, int n) {
  // Idle and still-loading replicas go first: a busy one finishes its batch.
  std::stable_sort(g.replicas.begin(), g.replicas.end(),
                   [](const auto& a, const auto& b) { return a->busy < b->busy; });
  for (int i = 0; i < n && !g.replicas.empty(); ++i) {
    g.replicas.back()->removed = true;
    g.replicas.pop_back();
  }
  NoteReplicas(-n, g.hardware);
}

void SimulatedWorker::Remove(const std::string& label) {
  auto it = groups_.find(label);
  if (it == groups_.end()) return;
  std::shared_ptr<Group> g = it->second;
  groups_.erase(it);
  // Its queue drains on the replicas it had (the live batcher executes what
  // it holds when it stops); they no longer count as loaded.
  NoteReplicas(-static_cast<int64_t>(g->replicas.size()), g->hardware);
  Publish();
}

void SimulatedWorker::Kill() {
  if (dead_) return;
  dead_ = true;
  std::map<std::string, std::shared_ptr<Group>> groups;
  groups.swap(groups_);
  for (auto& [label, g] : groups) {
    NoteReplicas(-static_cast<int64_t>(g->replicas.size()), g->hardware);
    for (auto& r : g->replicas) r->removed = true;
    std::deque<Query> queue;
    queue.swap(g->queue);
    g->queued_samples = 0;
    for (Query& q : queue) q.done(Unavailable("worker " + options_.id + " died"));
  }
}

void SimulatedWorker::Apply(WorkerAction action, std::function<void(Status)> done) {
  if (dead_) {
    ++actions_refused_;
    return done(Unavailable("worker " + options_.id + " is dead"));
  }
  const cluster::Action& a = action.action;
  const std::string label = cluster::GroupLabel(a);
  auto it = groups_.find(label);
  Status s;
  bool changed = false;
  switch (a.kind) {
    case cluster::Action::kLoad:
    case cluster::Action::kSetReplicas: {
      const int want = std::max(a.replicas, 1);
      if (it == groups_.end()) {
        if (a.kind == cluster::Action::kSetReplicas) {
          s = NotFound(label + " is not loaded on worker " + options_.id);
          break;
        }
        auto g = NewGroup(action);
        if (!g.ok()) {
          s = g.status();
          break;
        }
        s = AddReplicas(**g, want);
        if (!s.ok()) break;
        groups_[label] = *g;
        for (const auto& r : (*g)->replicas) {
          loop_.At(r->ready_at, [this, g = *g] { TryStart(g); });
        }
        changed = true;
        break;
      }
      Group& g = *it->second;
      const int have = static_cast<int>(g.replicas.size());
      if (want > have) {
        s = AddReplicas(g, want - have);
        if (s.ok()) {
          loop_.At(g.replicas.back()->ready_at, [this, gp = it->second] { TryStart(gp); });
          changed = true;
        }
      } else if (want < have && a.kind == cluster::Action::kSetReplicas) {
        RemoveReplicas(g, have - want);
        changed = true;
      }
      break;
    }
    case cluster::Action::kUnload:
    case cluster::Action::kEvict: {
      if (it == groups_.end()) break;
      Group& g = *it->second;
      if (g.pinned && !action.pinned) {
        s = FailedPrecondition(label + " is pinned (static provisioning)");
        break;
      }
      if (action.only_if_idle && (!g.queue.empty() || g.executing > 0)) {
        s = FailedPrecondition(label + " has queries in flight");
        break;
      }
      changed = true;
      TimePoint after = loop_.Now();
      if (a.cause == cluster::Action::Cause::kReplaced) {
        // Make before break: the replacement (another group of the model
        // here) must be ready first.
        for (const auto& [other, og] : groups_) {
          if (other == label || og->version->config.name != a.model) continue;
          for (const auto& r : og->replicas) after = std::max(after, r->ready_at);
        }
      }
      if (after > loop_.Now()) {
        loop_.At(after, [this, label] { Remove(label); });
      } else {
        Remove(label);
      }
      break;
    }
  }
  if (s.ok()) {
    if (changed) ++actions_done_;
  } else {
    ++actions_refused_;
  }
  if (changed) Publish();
  done(std::move(s));
}

cluster::WorkerReport SimulatedWorker::Report() {
  cluster::WorkerReport r;
  r.worker = options_.id;
  r.incarnation = "sim";
  r.zone = options_.zone;
  r.sequence = ++sequence_;
  cluster::DeviceState cpu;
  cpu.name = "cpu";
  cpu.worker = options_.id;
  cpu.budget_bytes = options_.budget_bytes;
  cpu.cores = options_.cores;
  cpu.used_bytes = used_bytes();
  r.groups.reserve(groups_.size());
  for (const auto& [label, g] : groups_) {
    cluster::GroupState& s = r.groups.emplace_back();
    s.worker = options_.id;
    s.zone = options_.zone;
    s.model = g->version->config.name;
    s.version = g->version->version;
    s.variant = g->variant;
    s.hardware = g->hardware;
    s.device = g->device;
    s.replicas = static_cast<int>(g->replicas.size());
    s.memory_bytes = g->memory_bytes;
    s.queued = static_cast<int64_t>(g->queue.size());
    s.executing = g->executing;
    s.last_used = g->last_used;
    s.load_ms = g->profile->load_time_ms;
    s.pinned = g->pinned;
    s.uses_total = g->uses_total;
    // As the live worker reports it (worker.cc): the batcher's learnt time
    // for a batch of 8 (1 when the model batches less) over the profile's.
    const auto learnt_us = g->predictor->PredictUs(g->slowdown_probe);
    if (learnt_us && g->probe_profiled_us > 0) {
      s.observed_slowdown = *learnt_us / g->probe_profiled_us;
    }
    // Not "loading": the load was acknowledged and queries may queue here;
    // a replica still loading shows as busy until it is ready, which is
    // what the router's and the selector's predictions should count.
    const int64_t per_replica =
        g->replicas.empty() ? 0 : g->queued_samples / static_cast<int64_t>(g->replicas.size());
    s.instances.reserve(g->replicas.size());
    for (const auto& rep : g->replicas) {
      s.instances.push_back({rep->id, per_replica, FreeAt(*rep)});
    }
  }
  r.devices.push_back(cpu);
  return r;
}

void SimulatedWorker::Publish() {
  if (!dead_) store_.PutWorker(Report());
}

}  // namespace somm::sim
