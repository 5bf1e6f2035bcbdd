#include "controller/placement.h"

#include <functional>
#include <optional>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <tuple>

namespace somm::control {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

double IdleSeconds(const GroupState& g, TimePoint now) {
  return std::max(0.0, std::chrono::duration<double>(now - g.last_used).count());
}

int64_t GroupBytes(const GroupState& g) {
  return static_cast<int64_t>(g.replicas) * g.memory_bytes;
}

std::string VictimReason(const GroupState& g, double value, TimePoint now,
                         const PlacementOptions& options) {
  const double h = options.reuse_horizon_s;
  const double idle = IdleSeconds(g, now);
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "evict: %s: value %.3g = (rate %.3g q/s x %.0f s + recency %.2f [idle %.0f s]) x "
                "reload %.0f ms / %s",
                GroupLabel(g).c_str(), value, g.recent_rate_qps, h, h / (h + idle), idle, g.load_ms,
                FormatBytes(GroupBytes(g)).c_str());
  return buf;
}

// One device's way to make room: its cheapest victims, or why it has none.
struct DevicePlan {
  size_t device = 0;
  bool feasible = false;
  int64_t free_after = 0;
  double lost_reload_ms = 0;  // sum of value * MiB: expected reload time the victims cost
  std::vector<EvictionVictim> victims;
  std::string summary;  // budget, use, evictable bytes: for the refusal message
};

DevicePlan PlanDevice(const ClusterState& state, size_t d, int64_t bytes_needed, TimePoint now,
                      const PlacementOptions& options) {
  const DeviceState& dev = state.devices[d];
  DevicePlan plan;
  plan.device = d;
  const int64_t free_now = dev.budget_bytes - dev.used_bytes;
  int64_t evictable = 0;
  int busy = 0, pinned = 0, loading = 0;
  std::vector<EvictionVictim> pool;
  for (size_t i = 0; i < state.groups.size(); ++i) {
    const GroupState& g = state.groups[i];
    if (g.device != dev.name || g.worker != dev.worker) continue;
    if (g.pinned) {
      ++pinned;
    } else if (g.loading) {
      ++loading;
    } else if (g.queued > 0 || g.executing > 0) {
      ++busy;
    } else if (GroupBytes(g) > 0) {
      const double value = EvictionValue(g, now, options);
      pool.push_back({i, GroupBytes(g), value, VictimReason(g, value, now, options)});
      evictable += GroupBytes(g);
    }
  }
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "%s: budget %s, used %s, free %s, evictable %s in %zu groups (not evictable: %d "
                "busy, %d pinned, %d loading)",
                dev.name.c_str(), FormatBytes(dev.budget_bytes).c_str(),
                FormatBytes(dev.used_bytes).c_str(), FormatBytes(free_now).c_str(),
                FormatBytes(evictable).c_str(), pool.size(), busy, pinned, loading);
  plan.summary = buf;
  if (free_now >= bytes_needed) {
    plan.feasible = true;
    plan.free_after = free_now - bytes_needed;
    return plan;
  }
  const int64_t shortfall = bytes_needed - free_now;
  if (evictable < shortfall) return plan;

  std::stable_sort(pool.begin(), pool.end(), [](const EvictionVictim& a, const EvictionVictim& b) {
    return a.value < b.value;
  });
  int64_t freed = 0;
  for (const EvictionVictim& v : pool) {
    if (freed >= shortfall) break;
    plan.victims.push_back(v);
    freed += v.bytes;
  }
  // The greedy pass may have taken a small cheap group that a later, larger
  // one made unnecessary: give back the most valuable victims not needed.
  for (size_t i = plan.victims.size(); i-- > 0;) {
    if (freed - plan.victims[i].bytes >= shortfall) {
      freed -= plan.victims[i].bytes;
      plan.victims.erase(plan.victims.begin() + static_cast<std::ptrdiff_t>(i));
    }
  }
  for (const EvictionVictim& v : plan.victims) {
    plan.lost_reload_ms += v.value * static_cast<double>(v.bytes) / kMiB;
  }
  plan.feasible = true;
  plan.free_after = free_now + freed - bytes_needed;
  return plan;
}

// Fewer expected reload milliseconds lost first, then best fit.
bool BetterPlan(const DevicePlan& a, const DevicePlan& b) {
  if (a.lost_reload_ms != b.lost_reload_ms) return a.lost_reload_ms < b.lost_reload_ms;
  return a.free_after < b.free_after;
}

}  // namespace

int64_t DefaultMemoryBudget(int64_t free_bytes, double fraction) {
  if (free_bytes <= 0) return 0;
  fraction = std::clamp(fraction, 0.0, 1.0);
  return static_cast<int64_t>(std::floor(static_cast<double>(free_bytes) * fraction));
}

bool DeviceMatches(const std::string& device, const std::string& wanted) {
  if (wanted.empty() || device == wanted) return true;
  if (wanted.find(':') != std::string::npos) return false;
  return device.size() > wanted.size() && device.compare(0, wanted.size(), wanted) == 0 &&
         device[wanted.size()] == ':';
}

bool Evictable(const GroupState& g) {
  return !g.pinned && !g.loading && g.queued == 0 && g.executing == 0;
}

double EvictionValue(const GroupState& g, TimePoint now, const PlacementOptions& options) {
  const double h = options.reuse_horizon_s;
  const double reuses = g.recent_rate_qps * h + h / (h + IdleSeconds(g, now));
  const double mib = std::max(static_cast<double>(GroupBytes(g)), 1.0) / kMiB;
  return reuses * std::max(g.load_ms, 0.0) / mib;
}

StatusOr<PlacementDecision> Place(const ClusterState& state, int64_t bytes_needed,
                                  const std::string& wanted, TimePoint now,
                                  const PlacementOptions& options) {
  std::vector<DevicePlan> plans;
  for (size_t d = 0; d < state.devices.size(); ++d) {
    if (DeviceMatches(state.devices[d].name, wanted)) {
      plans.push_back(PlanDevice(state, d, bytes_needed, now, options));
    }
  }
  if (plans.empty()) {
    return NotFound("no device matches '" + wanted + "'");
  }
  const DevicePlan* best = nullptr;
  for (const DevicePlan& p : plans) {
    if (p.feasible && (best == nullptr || BetterPlan(p, *best))) best = &p;
  }
  if (best == nullptr) {
    std::string msg = "cannot place " + FormatBytes(bytes_needed) + " on '" + wanted + "'";
    for (const DevicePlan& p : plans) msg += "; " + p.summary;
    return ResourceExhausted(msg);
  }
  PlacementDecision out;
  out.worker = state.devices[best->device].worker;
  out.device = state.devices[best->device].name;
  out.free_after = best->free_after;
  out.victims = best->victims;
  out.reason = (out.victims.empty()
                    ? "best fit: "
                    : "after evicting " + std::to_string(out.victims.size()) + " group(s): ") +
               FormatBytes(bytes_needed) + " on " + out.device + ", " +
               FormatBytes(out.free_after) + " of the budget left (" + best->summary + ")";
  return out;
}

ClusterState WorkerShare(const ClusterState& state, const std::string& worker) {
  ClusterState share;
  share.options = state.options;
  share.demand = state.demand;
  for (const DeviceState& d : state.devices) {
    if (d.worker == worker) share.devices.push_back(d);
  }
  for (const GroupState& g : state.groups) {
    if (g.worker == worker) share.groups.push_back(g);
  }
  return share;
}

StatusOr<PlacementDecision> PlaceAcrossWorkers(const ClusterState& state, int64_t bytes_needed,
                                               const std::string& wanted, const std::string& key,
                                               TimePoint now, const PlacementOptions& options) {
  std::vector<std::string> workers;
  for (const DeviceState& d : state.devices) {
    if (std::find(workers.begin(), workers.end(), d.worker) == workers.end()) {
      workers.push_back(d.worker);
    }
  }
  if (workers.size() <= 1) return Place(state, bytes_needed, wanted, now, options);
  struct Option {
    PlacementDecision decision;
    double lost_reload_ms = 0;
    uint64_t hash = 0;
    std::vector<size_t> group_index;  // the share's group i is state.groups[group_index[i]]
  };
  std::optional<Option> best;
  std::string refusals;
  for (const std::string& w : workers) {
    ClusterState share = WorkerShare(state, w);
    auto placed = Place(share, bytes_needed, wanted, now, options);
    if (!placed.ok()) {
      refusals += (refusals.empty() ? "" : "; ") + ("worker " + w + ": " + placed.status().message());
      continue;
    }
    Option o;
    o.decision = std::move(placed).value();
    for (const EvictionVictim& v : o.decision.victims) {
      o.lost_reload_ms += v.value * static_cast<double>(v.bytes) / kMiB;
    }
    o.hash = std::hash<std::string>{}(key + "@" + w);
    for (size_t i = 0; i < state.groups.size(); ++i) {
      if (state.groups[i].worker == w) o.group_index.push_back(i);
    }
    auto better = [](const Option& a, const Option& b) {
      if (a.decision.victims.empty() != b.decision.victims.empty()) return a.decision.victims.empty();
      if (a.lost_reload_ms != b.lost_reload_ms) return a.lost_reload_ms < b.lost_reload_ms;
      if (a.decision.free_after != b.decision.free_after) {
        return a.decision.free_after > b.decision.free_after;
      }
      return a.hash > b.hash;
    };
    if (!best || better(o, *best)) best = std::move(o);
  }
  if (!best) {
    return ResourceExhausted("cannot place " + FormatBytes(bytes_needed) + " on any of " +
                             std::to_string(workers.size()) + " workers: " + refusals);
  }
  for (EvictionVictim& v : best->decision.victims) v.group = best->group_index[v.group];
  best->decision.reason = "worker " + best->decision.worker + " (of " +
                          std::to_string(workers.size()) + "): " + best->decision.reason;
  return std::move(best->decision);
}

std::vector<Action> EvictionActions(const ClusterState& state, const PlacementDecision& decision) {
  std::vector<Action> actions;
  for (const EvictionVictim& v : decision.victims) {
    const GroupState& g = state.groups[v.group];
    Action a;
    a.kind = Action::kEvict;
    a.worker = g.worker;
    a.model = g.model;
    a.version = g.version;
    a.variant = g.variant;
    a.hardware = g.hardware;
    a.device = g.device;
    a.replicas = 0;
    a.reason = v.reason;
    actions.push_back(std::move(a));
  }
  return actions;
}

ClusterState PoolWorkers(const ClusterState& state) {
  ClusterState pooled;
  pooled.options = state.options;
  pooled.demand = state.demand;
  for (const DeviceState& d : state.devices) {
    auto it = std::find_if(pooled.devices.begin(), pooled.devices.end(),
                           [&](const DeviceState& p) { return p.name == d.name; });
    if (it == pooled.devices.end()) {
      pooled.devices.push_back(d);
      continue;
    }
    it->budget_bytes += d.budget_bytes;
    it->used_bytes += d.used_bytes;
    it->cores += d.cores;
    if (it->worker != d.worker) it->worker.clear();
  }
  std::vector<std::string> labels;  // of pooled.groups, in order
  for (const GroupState& g : state.groups) {
    const std::string label = GroupLabel(g);
    const auto at = std::find(labels.begin(), labels.end(), label);
    if (at == labels.end()) {
      labels.push_back(label);
      pooled.groups.push_back(g);
      continue;
    }
    GroupState& p = pooled.groups[static_cast<size_t>(at - labels.begin())];
    p.replicas += g.replicas;
    p.queued += g.queued;
    p.executing += g.executing;
    p.uses_total += g.uses_total;
    p.recent_rate_qps += g.recent_rate_qps;
    p.memory_bytes = std::max(p.memory_bytes, g.memory_bytes);
    p.last_used = std::max(p.last_used, g.last_used);
    p.loading = p.loading || g.loading;
    p.pinned = p.pinned || g.pinned;
    p.observed_slowdown = std::max(p.observed_slowdown, g.observed_slowdown);
    p.load_ms = std::max(p.load_ms, g.load_ms);
    p.instances.insert(p.instances.end(), g.instances.begin(), g.instances.end());
  }
  return pooled;
}

SpreadDecision SpreadReplicas(const ClusterState& state, const std::string& label, int target,
                              int64_t bytes_per_replica, const std::string& wanted) {
  struct Worker {
    ReplicaShare share;
    bool holder = false;
    int64_t free = std::numeric_limits<int64_t>::min();  // on its roomiest matching device
    uint64_t hash = 0;
  };
  std::vector<Worker> workers;
  auto find = [&workers](const std::string& id) -> Worker& {
    for (Worker& w : workers) {
      if (w.share.worker == id) return w;
    }
    workers.push_back({});
    workers.back().share.worker = id;
    return workers.back();
  };
  for (const GroupState& g : state.groups) {
    if (GroupLabel(g) != label) continue;
    Worker& w = find(g.worker);
    w.holder = true;
    w.share.have += g.replicas;
  }
  for (const DeviceState& d : state.devices) {
    if (!DeviceMatches(d.name, wanted)) continue;
    Worker& w = find(d.worker);
    w.free = std::max(w.free, d.budget_bytes - d.used_bytes);
  }
  int total = 0;
  for (Worker& w : workers) {
    w.share.want = w.share.have;
    w.hash = std::hash<std::string>{}(label + "@" + w.share.worker);
    total += w.share.have;
  }
  const int before = total;
  SpreadDecision out;
  target = std::max(target, 0);
  while (total < target) {
    Worker* best = nullptr;
    // Fewest of the group, a holder, most free memory, the hash.
    auto key = [](const Worker& x) {
      return std::make_tuple(x.share.want, !x.holder, -x.free, ~x.hash);
    };
    for (Worker& w : workers) {
      if (w.free == std::numeric_limits<int64_t>::min() || w.free < bytes_per_replica) continue;
      if (best == nullptr || key(w) < key(*best)) best = &w;
    }
    if (best == nullptr) {
      out.unplaced = target - total;
      break;
    }
    ++best->share.want;
    best->free -= bytes_per_replica;
    ++total;
  }
  while (total > target) {
    Worker* best = nullptr;
    for (Worker& w : workers) {
      if (w.share.want == 0) continue;
      if (best == nullptr || w.share.want > best->share.want ||
          (w.share.want == best->share.want && w.free < best->free)) {
        best = &w;
      }
    }
    --best->share.want;
    --total;
  }
  std::string changes;
  for (Worker& w : workers) {
    if (w.share.have == 0 && w.share.want == 0) continue;
    if (w.share.want != w.share.have) {
      char buf[96];
      std::snprintf(buf, sizeof buf, "%s%+d on %s%s", changes.empty() ? "" : ", ",
                    w.share.want - w.share.have, w.share.worker.c_str(),
                    w.share.have == 0 ? " (new there)" : w.share.want == 0 ? " (leaves it)" : "");
      changes += buf;
    }
    out.shares.push_back(w.share);
  }
  out.reason = "x" + std::to_string(before) + " -> x" + std::to_string(target) + " over " +
               std::to_string(out.shares.size()) + " worker(s)" +
               (changes.empty() ? "" : ": " + changes);
  if (out.unplaced > 0) {
    out.reason += "; " + std::to_string(out.unplaced) + " fit no worker's free memory (" +
                  FormatBytes(bytes_per_replica) + " each)";
  }
  return out;
}

}  // namespace somm::control
