#include "controller/placement.h"

#include <functional>
#include <optional>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>

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

}  // namespace somm::control
