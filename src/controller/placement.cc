#include "controller/placement.h"

#include <bit>
#include <functional>
#include <optional>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <span>
#include <string_view>
#include <tuple>
#include <unordered_map>

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
// The figures of the refusal summary are kept and formatted only when a
// message needs them (a cluster of 1,000 workers plans 1,000 devices per
// placement, and formatting each summary cost more than the plan).
struct DevicePlan {
  size_t device = 0;
  bool feasible = false;
  int64_t free_after = 0;
  double lost_reload_ms = 0;  // sum of value * MiB: expected reload time the victims cost
  std::vector<EvictionVictim> victims;  // reasons filled in by the caller that keeps them
  int64_t free_now = 0;
  int64_t evictable = 0;
  size_t evictable_groups = 0;
  int busy = 0, pinned = 0, loading = 0;
};

// Budget, use, evictable bytes: for the refusal message and the reason.
std::string PlanSummary(const ClusterState& state, const DevicePlan& plan) {
  const DeviceState& dev = state.devices[plan.device];
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "%s: budget %s, used %s, free %s, evictable %s in %zu groups (not evictable: %d "
                "busy, %d pinned, %d loading)",
                dev.name.c_str(), FormatBytes(dev.budget_bytes).c_str(),
                FormatBytes(dev.used_bytes).c_str(), FormatBytes(plan.free_now).c_str(),
                FormatBytes(plan.evictable).c_str(), plan.evictable_groups, plan.busy,
                plan.pinned, plan.loading);
  return buf;
}

// `groups` holds the indices into state.groups that may sit on the device
// (all of them, or those of its worker): the others are never looked at.
DevicePlan PlanDevice(const ClusterState& state, size_t d, std::span<const size_t> groups,
                      int64_t bytes_needed, TimePoint now, const PlacementOptions& options) {
  const DeviceState& dev = state.devices[d];
  DevicePlan plan;
  plan.device = d;
  plan.free_now = dev.budget_bytes - dev.used_bytes;
  // Victims are valued only on a device short of room (most devices of a
  // large cluster are not); the counts are kept either way.
  const bool short_of_room = plan.free_now < bytes_needed;
  std::vector<EvictionVictim> pool;
  for (size_t i : groups) {
    const GroupState& g = state.groups[i];
    if (g.device != dev.name || g.worker != dev.worker) continue;
    if (g.pinned) {
      ++plan.pinned;
    } else if (g.loading) {
      ++plan.loading;
    } else if (g.queued > 0 || g.executing > 0) {
      ++plan.busy;
    } else if (GroupBytes(g) > 0) {
      if (short_of_room) pool.push_back({i, GroupBytes(g), EvictionValue(g, now, options), ""});
      plan.evictable += GroupBytes(g);
      ++plan.evictable_groups;
    }
  }
  if (!short_of_room) {
    plan.feasible = true;
    plan.free_after = plan.free_now - bytes_needed;
    return plan;
  }
  const int64_t shortfall = bytes_needed - plan.free_now;
  if (plan.evictable < shortfall) return plan;

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
  plan.free_after = plan.free_now + freed - bytes_needed;
  return plan;
}

// Fewer expected reload milliseconds lost first, then best fit.
bool BetterPlan(const DevicePlan& a, const DevicePlan& b) {
  if (a.lost_reload_ms != b.lost_reload_ms) return a.lost_reload_ms < b.lost_reload_ms;
  return a.free_after < b.free_after;
}

}  // namespace

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

namespace {

// Place() over the devices `devices` and the groups `groups` of `state`
// (indices): Place() passes all of them, PlaceAcrossWorkers() one worker's.
// Victims index state.groups.
// The plans of the matching devices and the best feasible one (`best` null
// when none is), without a word of text: PlaceAcrossWorkers() compares
// every worker's and words only the winner's.
struct Plans {
  std::vector<DevicePlan> plans;
  const DevicePlan* best = nullptr;  // into plans
};

void PlanOn(const ClusterState& state, std::span<const size_t> devices,
            std::span<const size_t> groups, int64_t bytes_needed, const std::string& wanted,
            TimePoint now, const PlacementOptions& options, Plans* out) {
  out->plans.clear();  // a reused Plans keeps its capacity
  out->best = nullptr;
  for (size_t d : devices) {
    if (DeviceMatches(state.devices[d].name, wanted)) {
      out->plans.push_back(PlanDevice(state, d, groups, bytes_needed, now, options));
    }
  }
  for (const DevicePlan& p : out->plans) {
    if (p.feasible && (out->best == nullptr || BetterPlan(p, *out->best))) out->best = &p;
  }
}

StatusOr<PlacementDecision> PlaceOn(const ClusterState& state, std::span<const size_t> devices,
                                    std::span<const size_t> groups, int64_t bytes_needed,
                                    const std::string& wanted, TimePoint now,
                                    const PlacementOptions& options) {
  Plans all;
  PlanOn(state, devices, groups, bytes_needed, wanted, now, options, &all);
  const std::vector<DevicePlan>& plans = all.plans;
  if (plans.empty()) {
    return NotFound("no device matches '" + wanted + "'");
  }
  const DevicePlan* best = all.best;
  if (best == nullptr) {
    std::string msg = "cannot place " + FormatBytes(bytes_needed) + " on '" + wanted + "'";
    for (const DevicePlan& p : plans) msg += "; " + PlanSummary(state, p);
    return ResourceExhausted(msg);
  }
  PlacementDecision out;
  out.worker = state.devices[best->device].worker;
  out.device = state.devices[best->device].name;
  out.free_after = best->free_after;
  out.victims = best->victims;
  for (EvictionVictim& v : out.victims) {
    v.reason = VictimReason(state.groups[v.group], v.value, now, options);
  }
  out.reason = (out.victims.empty()
                    ? "best fit: "
                    : "after evicting " + std::to_string(out.victims.size()) + " group(s): ") +
               FormatBytes(bytes_needed) + " on " + out.device + ", " +
               FormatBytes(out.free_after) + " of the budget left (" +
               PlanSummary(state, *best) + ")";
  return out;
}

std::vector<size_t> AllIndices(size_t n) {
  std::vector<size_t> all(n);
  for (size_t i = 0; i < n; ++i) all[i] = i;
  return all;
}

}  // namespace

StatusOr<PlacementDecision> Place(const ClusterState& state, int64_t bytes_needed,
                                  const std::string& wanted, TimePoint now,
                                  const PlacementOptions& options) {
  return PlaceOn(state, AllIndices(state.devices.size()), AllIndices(state.groups.size()),
                 bytes_needed, wanted, now, options);
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

// Each worker is planned alone on its own devices and groups, as
// Place(WorkerShare(state, w)) would plan it, but over indices into `state`
// built in one pass: copying every worker's share was O(workers x groups)
// per placement, the controller's hot spot at 1,000 workers.
// placement_test.cc checks it against the per-share form.
StatusOr<PlacementDecision> PlaceAcrossWorkers(const ClusterState& state, int64_t bytes_needed,
                                               const std::string& wanted, const std::string& key,
                                               TimePoint now, const PlacementOptions& options) {
  // Workers numbered in the order their first device appears, through an
  // open-addressing table of one allocation: a hash map allocated a node
  // per worker, and a vector of devices and one of groups per worker, on
  // every placement (most of its cost at 1,000 workers).
  std::vector<const std::string*> ids;
  std::vector<uint32_t> slots(std::bit_ceil(std::max<size_t>(2 * state.devices.size(), 8)),
                              UINT32_MAX);
  const size_t mask = slots.size() - 1;
  // The slot that holds `id`, or the empty one where it would go.
  auto slot_of = [&](std::string_view id) -> uint32_t& {
    for (size_t at = std::hash<std::string_view>{}(id) & mask;; at = (at + 1) & mask) {
      if (slots[at] == UINT32_MAX || *ids[slots[at]] == id) return slots[at];
    }
  };
  constexpr uint32_t kNone = UINT32_MAX;
  std::vector<uint32_t> device_worker(state.devices.size());
  for (size_t d = 0; d < state.devices.size(); ++d) {
    const std::string& w = state.devices[d].worker;
    uint32_t& slot = slot_of(w);
    if (slot == kNone) {
      slot = static_cast<uint32_t>(ids.size());
      ids.push_back(&w);
    }
    device_worker[d] = slot;
  }
  if (ids.size() <= 1) return Place(state, bytes_needed, wanted, now, options);
  // A worker's groups are usually next to each other: the previous group's
  // worker is tried before the table.
  std::vector<uint32_t> group_worker(state.groups.size(), kNone);
  uint32_t last = kNone;
  for (size_t i = 0; i < state.groups.size(); ++i) {
    const std::string& w = state.groups[i].worker;
    if (last == kNone || *ids[last] != w) last = slot_of(w);
    group_worker[i] = last;
  }
  // Each worker's devices and groups, in index order, as ranges of one
  // array each (counted, then filled).
  struct Ranges {
    std::vector<size_t> start;  // worker k's items are items[start[k], start[k + 1])
    std::vector<size_t> items;
    void Fill(const std::vector<uint32_t>& owner, size_t workers) {
      start.assign(workers + 1, 0);
      for (uint32_t k : owner) {
        if (k != kNone) ++start[k + 1];
      }
      for (size_t k = 0; k < workers; ++k) start[k + 1] += start[k];
      items.resize(start[workers]);
      std::vector<size_t> next(start.begin(), start.end() - 1);
      for (size_t i = 0; i < owner.size(); ++i) {
        if (owner[i] != kNone) items[next[owner[i]]++] = i;
      }
    }
    std::span<const size_t> Of(size_t k) const {
      return std::span<const size_t>(items).subspan(start[k], start[k + 1] - start[k]);
    }
  };
  Ranges devices, groups;
  devices.Fill(device_worker, ids.size());
  groups.Fill(group_worker, ids.size());
  struct Worker {
    const std::string* id = nullptr;
    std::span<const size_t> devices;
    std::span<const size_t> groups;
  };
  std::vector<Worker> workers(ids.size());
  for (size_t k = 0; k < ids.size(); ++k) workers[k] = {ids[k], devices.Of(k), groups.Of(k)};
  // Every worker's best plan, compared without words; the winner's decision
  // (and the refusals, when none can take it) are worded afterwards.
  struct Option {
    size_t worker = 0;
    bool no_victims = true;
    double lost_reload_ms = 0;
    int64_t free_after = 0;
  };
  // The rendezvous hash of (key, worker) breaks ties only: computed when
  // one needs it, once per worker (a string per worker per placement, else).
  std::vector<std::optional<uint64_t>> hashes(workers.size());
  auto hash = [&](size_t k) {
    if (!hashes[k]) hashes[k] = std::hash<std::string>{}(key + "@" + *workers[k].id);
    return *hashes[k];
  };
  auto better = [&hash](const Option& a, const Option& b) {
    if (a.no_victims != b.no_victims) return a.no_victims;
    if (a.lost_reload_ms != b.lost_reload_ms) return a.lost_reload_ms < b.lost_reload_ms;
    if (a.free_after != b.free_after) return a.free_after > b.free_after;
    return hash(a.worker) > hash(b.worker);
  };
  std::optional<Option> best;
  Plans plans;
  for (size_t k = 0; k < workers.size(); ++k) {
    const Worker& w = workers[k];
    PlanOn(state, w.devices, w.groups, bytes_needed, wanted, now, options, &plans);
    if (plans.best == nullptr) continue;
    Option o;
    o.worker = k;
    o.no_victims = plans.best->victims.empty();
    for (const EvictionVictim& v : plans.best->victims) {
      o.lost_reload_ms += v.value * static_cast<double>(v.bytes) / kMiB;
    }
    o.free_after = plans.best->free_after;
    if (!best || better(o, *best)) best = o;
  }
  if (!best) {
    std::string refusals;
    for (const Worker& w : workers) {
      auto placed = PlaceOn(state, w.devices, w.groups, bytes_needed, wanted, now, options);
      refusals += (refusals.empty() ? "" : "; ") +
                  ("worker " + *w.id + ": " + placed.status().message());
    }
    return ResourceExhausted("cannot place " + FormatBytes(bytes_needed) + " on any of " +
                             std::to_string(workers.size()) + " workers: " + refusals);
  }
  const Worker& w = workers[best->worker];
  SOMM_ASSIGN_OR_RETURN(PlacementDecision decision,
                        PlaceOn(state, w.devices, w.groups, bytes_needed, wanted, now, options));
  decision.reason = "worker " + decision.worker + " (of " + std::to_string(workers.size()) +
                    "): " + decision.reason;
  return decision;
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

bool HasLabel(const GroupState& g, const std::string& label) {
  // A label starts with "<model>:" (GroupLabel): other models fail here.
  const size_t n = g.model.size();
  if (label.size() <= n || label[n] != ':' || label.compare(0, n, g.model) != 0) return false;
  return GroupLabel(g) == label;
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
  // One pooled group per label (model, version, variant, hardware), found
  // through an open-addressed table of pooled indices by the hash of those
  // fields: a label string and a map node per group per tick cost more than
  // the pooling at thousands of groups.
  size_t slots = 16;
  while (slots < 2 * state.groups.size()) slots <<= 1;
  constexpr size_t kEmpty = SIZE_MAX;
  std::vector<size_t> table(slots, kEmpty);
  // The hardware as its name (HardwareConfig::Name) tells it: a CUDA
  // device's index, a CPU's threads.
  auto hardware_key = [](const HardwareConfig& hw) -> int64_t {
    return hw.device == DeviceKind::kCuda ? (int64_t{1} << 32) | hw.device_index : hw.threads;
  };
  auto same_label = [&hardware_key](const GroupState& a, const GroupState& b) {
    return a.version == b.version && hardware_key(a.hardware) == hardware_key(b.hardware) &&
           a.model == b.model && a.variant == b.variant;
  };
  pooled.groups.reserve(state.groups.size());
  for (const GroupState& g : state.groups) {
    size_t h = std::hash<std::string_view>{}(g.model);
    h = h * 31 + std::hash<std::string_view>{}(g.variant);
    h = h * 31 + static_cast<size_t>(g.version);
    h = h * 31 + static_cast<size_t>(hardware_key(g.hardware));
    size_t slot = h & (slots - 1);
    while (table[slot] != kEmpty && !same_label(pooled.groups[table[slot]], g)) {
      slot = (slot + 1) & (slots - 1);
    }
    if (table[slot] == kEmpty) {
      table[slot] = pooled.groups.size();
      pooled.groups.push_back(g);
      continue;
    }
    GroupState& p = pooled.groups[table[slot]];
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
  // In order of first sight; found through an index (a scan of `workers`
  // per device was quadratic in the workers).
  std::unordered_map<std::string_view, size_t> at;
  at.reserve(state.devices.size());
  auto find = [&workers, &at](const std::string& id) -> Worker& {
    auto [it, fresh] = at.try_emplace(id, workers.size());
    if (fresh) {
      workers.push_back({});
      workers.back().share.worker = id;
    }
    return workers[it->second];
  };
  for (const GroupState& g : state.groups) {
    if (!HasLabel(g, label)) continue;
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
