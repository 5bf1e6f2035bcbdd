// The autoscaler's tick (autoscaler.h, Decide): the class that makes one
// decision and the values it works with. Internal to controller/: shared by
// autoscaler.cc (views, forecasts, idle unloading, choosing and applying a
// target) and autoscaler_scale.cc (assessing a model and scaling it up or
// down).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <absl/container/flat_hash_map.h>
#include <absl/container/flat_hash_set.h>
#include <absl/container/node_hash_map.h>

#include "controller/autoscaler.h"

namespace somm::control::autoscaler_tick {

constexpr double kCostEpsilon = 1e-12;  // USD/s; prices are ~1e-5
// Scale up once the wait tail is this many times the target it was sized
// for: the tail falls about e-fold per replica added, so the band is about
// one replica wide and a model on its tail bound does not step every tick.
constexpr double kWaitTailSlack = 4;

inline double Seconds(TimePoint::duration d) { return std::chrono::duration<double>(d).count(); }

// The threads (CPU cores, or GPU slots) a group's replicas take.
inline int GroupThreads(const GroupState& g) { return g.replicas * std::max(g.hardware.threads, 1); }

inline std::string Key(const std::string& model, int64_t version) {
  return model + ":" + std::to_string(version);
}

inline bool SameOption(const GroupState& g, const VariantOption& o) {
  return g.model == o.model && g.version == o.version && g.variant == o.variant &&
         g.hardware == o.hardware && g.device == o.device;
}

inline std::string Fmt(const char* format, double a) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, a);
  return buf;
}
inline std::string Qps(double q) { return Fmt("%.1f q/s", q); }
inline std::string Pct(double x) { return std::isfinite(x) ? Fmt("%.0f%%", 100 * x) : "inf"; }
inline std::string PerHour(double usd_per_s) { return Fmt("$%.3f/h", usd_per_s * 3600); }

// An option that may serve the model now, with its capacity per replica.
struct Eligible {
  size_t option = 0;
  ReplicaCapacity capacity;
};

// One (option, replicas) the model could move to.
struct Target {
  size_t option = 0;
  int replicas = 0;
  ReplicaCapacity capacity;
  double demand = 0;  // the rate it was sized for
  double cost = 0;    // USD/s
  double latency_slo_ms = 0;  // the SLO it was sized for (0 = none)
  bool short_of_demand = false;
  std::string limits;  // what capped the replicas, when short
};

// The cluster as this tick's actions leave it, so that later models see the
// cores and memory that earlier ones took. Groups change only through Add,
// Remove and SetReplicas, which keep the per-model index and drop the cached
// per-device totals: with thousands of models, summing every group for each
// candidate of each model (EvictableOn, OtherThreads) made a tick
// quadratic in the groups.
struct Projection {
  std::vector<DeviceState> devices;
  std::vector<GroupState> groups;  // read freely; change through the calls below
  std::vector<bool> removed;       // unloaded or replaced this tick

  void Init(const std::vector<GroupState>& initial) {
    groups.reserve(initial.size());
    for (const GroupState& g : initial) Add(WithoutInstances(g));
  }
  void Add(GroupState g) {
    keys_.push_back(Key(g.model, g.version));
    by_key_[keys_.back()].push_back(groups.size());
    groups.push_back(std::move(g));
    removed.push_back(false);
    totals_.clear();
  }
  void Remove(size_t i) {
    removed[i] = true;
    totals_.clear();
  }
  void SetReplicas(size_t i, int replicas) {
    groups[i].replicas = replicas;
    totals_.clear();
  }
  // Models with arrivals this tick: not evicted for others.
  void MarkBusy(const std::string& key) {
    busy_keys_.insert(key);
    totals_.clear();
  }

  DeviceState* Device(const std::string& name) {
    for (DeviceState& d : devices) {
      if (d.name == name) return &d;
    }
    return nullptr;
  }
  bool IsBusyKey(const std::string& key) const { return busy_keys_.count(key) > 0; }
  // The indices of `key`'s groups (removed ones included).
  const std::vector<size_t>& KeyGroups(const std::string& key) const {
    static const std::vector<size_t> kNone;
    auto it = by_key_.find(key);
    return it == by_key_.end() ? kNone : it->second;
  }
  // Groups on `device` another model may evict: evictable, of a model without
  // arrivals, not `key`'s own.
  bool EvictableFor(size_t i, const std::string& device, const std::string& key) const {
    const GroupState& g = groups[i];
    return !removed[i] && g.device == device && keys_[i] != key && !IsBusyKey(keys_[i]) &&
           Evictable(g);
  }
  // What evicting every other model's evictable groups on `device` would
  // hand to `key`: their memory and their threads (cores).
  struct Freeable {
    int64_t bytes = 0;
    int threads = 0;
  };
  Freeable EvictableOn(const std::string& device, const std::string& key) const {
    return EvictableOn(device, KeyGroups(key), IsBusyKey(key));
  }
  // The same, with `key`'s groups and whether it is busy looked up already
  // (Choose asks for every option of one model).
  Freeable EvictableOn(const std::string& device, const std::vector<size_t>& key_groups,
                       bool key_busy) const {
    const Totals& t = TotalsOn(device);
    Freeable f{t.evictable_bytes, t.evictable_threads};
    if (!key_busy) {
      for (size_t i : key_groups) {
        const GroupState& g = groups[i];
        if (!removed[i] && g.device == device && Evictable(g)) {
          f.bytes -= g.replicas * g.memory_bytes;
          f.threads -= GroupThreads(g);
        }
      }
    }
    return f;
  }
  // Threads on `device` of every group except `key`'s unpinned ones (those
  // are what the model's new configuration replaces).
  int OtherThreads(const std::string& device, const std::string& key) const {
    return OtherThreads(device, KeyGroups(key));
  }
  int OtherThreads(const std::string& device, const std::vector<size_t>& key_groups) const {
    int threads = TotalsOn(device).threads;
    for (size_t i : key_groups) {
      const GroupState& g = groups[i];
      if (!removed[i] && g.device == device && !g.pinned) threads -= GroupThreads(g);
    }
    return threads;
  }

 private:
  struct Totals {
    int64_t evictable_bytes = 0;  // groups not removed, Evictable, of models without arrivals
    int threads = 0;              // groups not removed
    int evictable_threads = 0;    // of the groups counted in evictable_bytes
  };
  const Totals& TotalsOn(const std::string& device) const {
    auto it = totals_.find(device);
    if (it != totals_.end()) return it->second;
    Totals t;
    for (size_t i = 0; i < groups.size(); ++i) {
      const GroupState& g = groups[i];
      if (removed[i] || g.device != device) continue;
      t.threads += GroupThreads(g);
      if (!IsBusyKey(keys_[i]) && Evictable(g)) {
        t.evictable_bytes += g.replicas * g.memory_bytes;
        t.evictable_threads += GroupThreads(g);
      }
    }
    return totals_.emplace(device, t).first->second;
  }

  std::vector<std::string> keys_;  // Key() of each group
  // A node map: KeyGroups hands out references that later Adds must not move.
  absl::node_hash_map<std::string, std::vector<size_t>> by_key_;
  absl::flat_hash_set<std::string> busy_keys_;
  mutable std::map<std::string, Totals> totals_;  // per device; cleared by every change
};

inline Action MakeAction(Action::Kind kind, const GroupState& g, std::string reason,
                  Action::Cause cause = Action::Cause::kDemand) {
  Action a;
  a.kind = kind;
  a.cause = cause;
  a.model = g.model;
  a.version = g.version;
  a.variant = g.variant;
  a.hardware = g.hardware;
  a.device = g.device;
  a.replicas = kind == Action::kUnload || kind == Action::kEvict ? 0 : g.replicas;
  a.reason = std::move(reason);
  return a;
}

// The replicas of g's option that idle unloading keeps (floor_replicas).
inline int FloorOf(const ClusterState& state, const GroupState& g) {
  for (const VariantOption& o : state.options) {
    if (o.model == g.model && o.version == g.version && o.variant == g.variant) {
      return o.floor_replicas;
    }
  }
  return 0;
}

// One tick's work. Decide() below builds it and runs it; each method fits on
// a screen.
class Tick {
 public:
  Tick(const ClusterState& state, AutoscalerMemory memory, TimePoint now,
       const AutoscalerConfig& config)
      : state_(state), now_(now), config_(config) {
    out_.memory = std::move(memory);
    proj_.devices = state.devices;
    proj_.Init(state.groups);
    // A version's options come one after another (AppendOptions): its key
    // is looked up once, not once per option (tens of thousands per tick).
    std::vector<size_t>* mine = nullptr;
    const VariantOption* previous = nullptr;
    for (size_t i = 0; i < state.options.size(); ++i) {
      const VariantOption& o = state.options[i];
      if (previous == nullptr || o.model != previous->model || o.version != previous->version) {
        mine = &options_by_key_[Key(o.model, o.version)];
      }
      mine->push_back(i);
      previous = &o;
    }
  }

  AutoscalerDecision Run();

 private:
  struct View {
    std::string key;
    ModelDemand demand;
    std::vector<size_t> managed;  // proj_ group indices, unpinned
    std::vector<size_t> pinned;
  };

  std::vector<View> Views() const;
  void UpdateForecasts(std::vector<View>& views, double dt);
  void UnloadIdle(View& view);
  bool EvictForCores(View& view, const VariantOption& o, int replicas, const std::string& reason);
  // The model's current groups against its demand.
  struct Assessment {
    double managed_qps = 0;  // capacity of the unpinned groups
    double pinned_qps = 0;
    double cost = 0;        // USD/s of the unpinned groups
    double accuracy = 2.0;  // the least accurate unpinned group's (-1 unknown)
    double observed = 0;
    double demand = 0;     // rule 3
    double peak = 0;       // max(demand, the window's highest observed rate)
    double hold_s = 0;     // caps each of the scale-down holds (rule 5)
    double forecast = 0;   // Forecast() over horizon_s
    double horizon_s = 0;
    // P(a query waits past its slack) on the managed groups at `demand`
    // (WaitTail); 0 without an SLO.
    double wait_tail = 0;
    std::string slo_note;  // set when serving best effort
    double Capacity() const { return managed_qps + pinned_qps; }
    double Utilisation(double qps) const {
      if (Capacity() > 0) return qps / Capacity();
      return qps > 0 ? std::numeric_limits<double>::infinity() : 0;
    }
  };

  void Scale(View& view);
  Assessment Assess(const View& view, const std::vector<Eligible>& eligible) const;
  // "demand ... is 85% of capacity ... (ts-fp32@cpu1 x1)": worded only when
  // a note or an action carries it (most models change nothing in a tick,
  // and wording thousands of them per tick cost more than deciding).
  std::string Summary(const View& view, const Assessment& a) const;
  void ScaleUp(View& view, const std::vector<Eligible>& eligible, const Assessment& now);
  void ScaleDown(View& view, const std::vector<Eligible>& eligible, const Assessment& now);
  std::vector<Eligible> EligibleOptions(const View& view, bool* best_effort) const;
  const Eligible* FindEligible(const std::vector<Eligible>& eligible, const GroupState& g) const;
  std::optional<Target> Choose(const View& view, const std::vector<Eligible>& eligible,
                               double demand, double pinned_qps) const;
  void Apply(View& view, const Target& target, const std::string& tag, const std::string& why);
  std::string Describe(const View& view) const;
  std::string DescribeTarget(const Target& t) const;
  double Price(const HardwareConfig& hw) const { return config_.prices.PerSecond(hw); }
  // The threads all groups on `dev` may run: its cores x max_oversubscription.
  int Slots(const DeviceState& dev) const {
    return static_cast<int>(std::floor(dev.cores * config_.max_oversubscription + 1e-9));
  }

  const ClusterState& state_;
  TimePoint now_;
  const AutoscalerConfig& config_;
  Projection proj_;
  // state_.options' indices per model key, in order.
  absl::flat_hash_map<std::string, std::vector<size_t>> options_by_key_;
  AutoscalerDecision out_;
};

}  // namespace somm::control::autoscaler_tick
