#include "controller/worker_scaler.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <vector>

namespace somm::control {
namespace {

// One memory pool of one worker, and what its groups in use take of it.
struct Bin {
  std::string worker;
  std::string device;
  int64_t budget = 0;
  int cores = 1;
  int64_t in_use_bytes = 0;
  int64_t in_use_threads = 0;
};

struct WorkerSummary {
  int groups = 0;
  int in_use_groups = 0;
  int64_t in_use_bytes = 0;
};

bool InUse(const GroupState& g, TimePoint now, const WorkerScalerOptions& o) {
  // A group never used has only its load time as last_used: configured
  // instances nobody asked for are not demand.
  return g.uses_total > 0 &&
         std::chrono::duration<double>(now - g.last_used).count() <= o.in_use_window_s;
}

int64_t Threads(const GroupState& g) {
  return static_cast<int64_t>(std::max(g.hardware.threads, 1)) * std::max(g.replicas, 1);
}

std::string Pct(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f%%", 100 * x);
  return buf;
}

// Would the groups in use on `leaving` fit the other workers' bins (same
// device name), first fit largest first, each bin at most `fill` of its
// budget and cores?
bool FitsWithout(const std::string& leaving, const std::vector<Bin>& bins,
                 const std::vector<const GroupState*>& in_use, double fill) {
  std::vector<Bin> rest;
  for (const Bin& b : bins) {
    if (b.worker != leaving) rest.push_back(b);
  }
  for (const Bin& b : rest) {
    if (b.in_use_bytes > fill * b.budget || b.in_use_threads > fill * b.cores) return false;
  }
  std::vector<const GroupState*> moving;
  for (const GroupState* g : in_use) {
    if (g->worker == leaving) moving.push_back(g);
  }
  std::sort(moving.begin(), moving.end(), [](const GroupState* a, const GroupState* b) {
    return a->memory_bytes * a->replicas > b->memory_bytes * b->replicas;
  });
  for (const GroupState* g : moving) {
    const int64_t bytes = g->memory_bytes * std::max(g->replicas, 1);
    bool placed = false;
    for (Bin& b : rest) {
      if (b.device != g->device) continue;
      if (b.in_use_bytes + bytes > fill * b.budget) continue;
      if (b.in_use_threads + Threads(*g) > fill * b.cores) continue;
      b.in_use_bytes += bytes;
      b.in_use_threads += Threads(*g);
      placed = true;
      break;
    }
    if (!placed) return false;
  }
  return true;
}

}  // namespace

const char* WorkerScaleKindName(WorkerScaleDecision::Kind kind) {
  switch (kind) {
    case WorkerScaleDecision::Kind::kHold:
      return "hold";
    case WorkerScaleDecision::Kind::kScaleOut:
      return "out";
    case WorkerScaleDecision::Kind::kScaleIn:
      return "in";
  }
  return "?";
}

WorkerScaleDecision DecideWorkers(const ClusterState& state, const WorkerScalerInput& input,
                                  const WorkerScalerMemory& memory, TimePoint now,
                                  const WorkerScalerOptions& o) {
  WorkerScaleDecision d;
  d.memory = memory;
  const int64_t shortfalls_seen = memory.shortfalls_seen.value_or(input.shortfalls_total);
  d.memory.shortfalls_seen = input.shortfalls_total;
  const int64_t new_shortfalls = std::max<int64_t>(input.shortfalls_total - shortfalls_seen, 0);

  std::vector<Bin> bins;
  std::map<std::string, WorkerSummary> workers;
  for (const DeviceState& dev : state.devices) {
    bins.push_back(Bin{dev.worker, dev.name, dev.budget_bytes, std::max(dev.cores, 1), 0, 0});
    workers[dev.worker];
  }
  std::vector<const GroupState*> in_use;
  for (const GroupState& g : state.groups) {
    WorkerSummary& w = workers[g.worker];
    ++w.groups;
    if (!InUse(g, now, o)) continue;
    in_use.push_back(&g);
    ++w.in_use_groups;
    w.in_use_bytes += g.memory_bytes * std::max(g.replicas, 1);
    for (Bin& b : bins) {
      if (b.worker == g.worker && b.device == g.device) {
        b.in_use_bytes += g.memory_bytes * std::max(g.replicas, 1);
        b.in_use_threads += Threads(g);
      }
    }
  }
  int64_t budget = 0, in_use_bytes = 0, cores = 0, threads = 0;
  for (const Bin& b : bins) {
    budget += b.budget;
    in_use_bytes += b.in_use_bytes;
    cores += b.cores;
    threads += b.in_use_threads;
  }
  const int registered = static_cast<int>(workers.size());
  d.workers = registered + std::max(input.pending, 0);
  d.desired = d.workers;
  const std::string usage = "groups in use take " + FormatBytes(in_use_bytes) + " of " +
                            FormatBytes(budget) + " and " + std::to_string(threads) + " of " +
                            std::to_string(cores) + " cores on " + std::to_string(registered) +
                            " worker(s)";
  auto out = [&](const std::string& cause, const std::string& why) {
    d.kind = WorkerScaleDecision::Kind::kScaleOut;
    d.desired = d.workers + 1;
    d.cause = cause;
    d.reason = why;
    d.memory.last_step = now;
    d.memory.short_ticks = 0;
    d.memory.spare_since.reset();
    return d;
  };
  // The least useful removable worker among `candidates`.
  auto least_useful = [&](const std::vector<std::string>& candidates) {
    return *std::min_element(candidates.begin(), candidates.end(),
                             [&](const std::string& a, const std::string& b) {
                               const WorkerSummary& x = workers[a];
                               const WorkerSummary& y = workers[b];
                               return std::tie(x.in_use_groups, x.in_use_bytes, x.groups, a) <
                                      std::tie(y.in_use_groups, y.in_use_bytes, y.groups, b);
                             });
  };
  auto in = [&](const std::string& victim, const std::string& cause, const std::string& why) {
    d.kind = WorkerScaleDecision::Kind::kScaleIn;
    d.desired = d.workers - 1;
    d.drain = victim;
    d.cause = cause;
    const WorkerSummary& w = workers[victim];
    d.reason = why + "; drain " + victim + " (" + std::to_string(w.in_use_groups) + " of " +
               std::to_string(w.groups) + " group(s) in use, " + FormatBytes(w.in_use_bytes) + ")";
    d.memory.last_step = now;
    d.memory.short_ticks = 0;
    d.memory.spare_since.reset();
    return d;
  };
  std::vector<std::string> removable;
  for (const auto& [id, _] : workers) {
    if (input.removable.count(id)) removable.push_back(id);
  }

  // 1. Bounds.
  if (d.workers < o.min_workers) {
    return out("min_workers", std::to_string(d.workers) + " worker(s), fewer than --min-workers " +
                                  std::to_string(o.min_workers));
  }
  if (d.workers > o.max_workers && !removable.empty() && input.pending == 0) {
    return in(least_useful(removable), "max_workers",
              std::to_string(d.workers) + " worker(s), more than --max-workers " +
                  std::to_string(o.max_workers));
  }
  // 2. Being started.
  if (input.pending > 0) {
    d.reason = "waiting for " + std::to_string(input.pending) + " worker(s) being started";
    d.memory.short_ticks = 0;
    d.memory.spare_since.reset();
    return d;
  }
  // 3. Short.
  const bool memory_short = budget > 0 && in_use_bytes > o.memory_high * budget;
  const bool compute_short = cores > 0 && threads > o.compute_high * cores;
  d.memory.short_ticks = memory_short || compute_short ? memory.short_ticks + 1 : 0;
  const bool at_max = d.workers >= o.max_workers;
  if (new_shortfalls > 0) {
    const std::string why = std::to_string(new_shortfalls) +
                            " placement(s) did not fit (last: " + input.last_shortfall + "); " +
                            usage;
    if (!at_max) return out("placement", why);
    d.reason = why + "; at --max-workers " + std::to_string(o.max_workers);
  } else if (memory_short || compute_short) {
    const std::string why =
        std::string(memory_short ? "memory in use above " + Pct(o.memory_high) : "") +
        (memory_short && compute_short ? " and " : "") +
        (compute_short ? "threads in use above " + Pct(o.compute_high) + " of the cores" : "") +
        " for " + std::to_string(d.memory.short_ticks) + " tick(s): " + usage;
    if (d.memory.short_ticks >= o.scale_out_ticks && !at_max) {
      return out(memory_short ? "memory" : "compute", why);
    }
    d.reason = why + (at_max ? "; at --max-workers " + std::to_string(o.max_workers) : "");
  }
  if (new_shortfalls > 0 || memory_short || compute_short) {
    d.memory.spare_since.reset();
    return d;
  }
  // 4. Spare.
  std::vector<std::string> spare;
  if (d.workers > o.min_workers) {
    for (const std::string& id : removable) {
      if (FitsWithout(id, bins, in_use, o.scale_in_fill)) spare.push_back(id);
    }
  }
  if (spare.empty()) {
    d.memory.spare_since.reset();
    d.reason = usage;
    return d;
  }
  if (!d.memory.spare_since) d.memory.spare_since = now;
  const double spare_s = std::chrono::duration<double>(now - *d.memory.spare_since).count();
  const double since_step_s =
      memory.last_step ? std::chrono::duration<double>(now - *memory.last_step).count() : 1e18;
  if (spare_s >= o.scale_in_after_s && since_step_s >= o.cooldown_s) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.0f s", spare_s);
    return in(least_useful(spare), "spare",
              "the groups in use would fit the other workers at " + Pct(o.scale_in_fill) +
                  " or less for " + buf + ": " + usage);
  }
  d.reason = std::to_string(spare.size()) + " worker(s) spare; " + usage;
  return d;
}

}  // namespace somm::control
