#include "controller/autoscaler.h"
#include "controller/autoscaler_tick.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <string_view>

#include <absl/container/flat_hash_map.h>
#include <absl/container/flat_hash_set.h>
#include <absl/container/node_hash_map.h>

namespace somm::control {
namespace autoscaler_tick {

std::vector<Tick::View> Tick::Views() const {
  std::vector<View> views;
  absl::flat_hash_map<std::string, size_t> index;
  index.reserve(state_.demand.size() + proj_.groups.size());
  auto find = [&views, &index](const std::string& key) -> View& {
    auto [it, added] = index.emplace(key, views.size());
    if (added) views.push_back(View{key, {}, {}, {}});
    return views[it->second];
  };
  for (const ModelDemand& d : state_.demand) {
    View& v = find(Key(d.model, d.version));
    if (v.demand.model.empty()) {
      v.demand = d;
    } else {  // two entries for one model: the tighter requirements, summed rate
      v.demand.rate_qps += d.rate_qps;
      if (d.latency_slo_ms > 0 &&
          (v.demand.latency_slo_ms <= 0 || d.latency_slo_ms < v.demand.latency_slo_ms)) {
        v.demand.latency_slo_ms = d.latency_slo_ms;
      }
      if (d.min_accuracy && (!v.demand.min_accuracy || *d.min_accuracy > *v.demand.min_accuracy)) {
        v.demand.min_accuracy = d.min_accuracy;
      }
    }
  }
  for (size_t i = 0; i < proj_.groups.size(); ++i) {
    const GroupState& g = proj_.groups[i];
    View& v = find(Key(g.model, g.version));
    if (v.demand.model.empty()) {
      v.demand.model = g.model;
      v.demand.version = g.version;
    }
    (g.pinned ? v.pinned : v.managed).push_back(i);
  }
  // Busiest first: under contention the model with the most arrivals gets the
  // cores and memory first. Ties by name keep the result deterministic.
  std::stable_sort(views.begin(), views.end(), [](const View& a, const View& b) {
    if (a.demand.rate_qps != b.demand.rate_qps) return a.demand.rate_qps > b.demand.rate_qps;
    return a.key < b.key;
  });
  return views;
}

void Tick::UpdateForecasts(std::vector<View>& views, double dt) {
  // Updated in place (a fresh table per tick rebuilt thousands of entries).
  auto& models = out_.memory.models;
  for (View& v : views) {
    ModelMemory& m = models[v.key];
    v.demand.rate_qps = RateForTick(m.recent, v.demand.rate_qps * dt, dt, now_, config_);
    m.holt = Update(m.holt, v.demand.rate_qps, dt, config_.holt);
    // A monotonic queue: a sample that a later, higher one outlives can never
    // be the maximum again.
    while (!m.window.empty() && m.window.back().qps <= v.demand.rate_qps) m.window.pop_back();
    m.window.push_back({now_, v.demand.rate_qps});
    while (Seconds(now_ - m.window.front().at) >= config_.scale_down_window_s &&
           m.window.size() > 1) {
      m.window.erase(m.window.begin());
    }
    if (v.demand.rate_qps > 0) proj_.MarkBusy(v.key);
  }
  // Models with neither demand nor groups are forgotten. Every view's key is
  // in the table now and the views' keys are distinct, so only a table
  // larger than the views holds others.
  if (models.size() > views.size()) {
    absl::flat_hash_set<std::string_view> viewed;
    viewed.reserve(views.size());
    for (const View& v : views) viewed.insert(v.key);
    for (auto it = models.begin(); it != models.end();) {
      if (viewed.contains(it->first)) {
        ++it;
      } else {
        models.erase(it++);
      }
    }
  }
}

AutoscalerDecision Tick::Run() {
  double dt = config_.tick_s;
  if (out_.memory.last_tick && *out_.memory.last_tick < now_) {
    dt = Seconds(now_ - *out_.memory.last_tick);
  }
  out_.memory.last_tick = now_;
  std::vector<View> views = Views();
  UpdateForecasts(views, dt);
  // Idle unloads first: the memory they free is there for the models that
  // scale up in this same tick.
  for (View& v : views) UnloadIdle(v);
  for (View& v : views) Scale(v);
  return std::move(out_);
}

void Tick::UnloadIdle(View& view) {
  // A model with arrivals keeps its groups unless one of them sits idle while
  // another of its groups takes the queries (a selector's pick on a query's
  // critical path, say, left the as-registered group unused): that one is
  // redundant. The groups that serve stay, and Scale() sizes them.
  const bool busy = view.demand.rate_qps > 0;
  auto serving = [&](size_t self) -> const GroupState* {
    for (const std::vector<size_t>* list : {&view.managed, &view.pinned}) {
      for (size_t j : *list) {
        if (j == self || proj_.removed[j]) continue;
        if (Seconds(now_ - proj_.groups[j].last_used) < config_.idle_unload_s) {
          return &proj_.groups[j];
        }
      }
    }
    return nullptr;
  };
  std::vector<size_t> kept;
  for (size_t i : view.managed) {
    const GroupState& g = proj_.groups[i];
    const double idle_s = Seconds(now_ - g.last_used);
    const GroupState* other = nullptr;
    if (idle_s < config_.idle_unload_s || (busy && (other = serving(i)) == nullptr)) {
      kept.push_back(i);
      continue;
    }
    // Configured instances stay: idle, the group goes down to them, not away.
    if (const int floor = FloorOf(state_, g); floor > 0) {
      kept.push_back(i);
      if (g.replicas > floor && Evictable(g)) {
        if (DeviceState* d = proj_.Device(g.device)) {
          d->used_bytes -= static_cast<int64_t>(g.replicas - floor) * g.memory_bytes;
        }
        proj_.SetReplicas(i, floor);
        out_.actions.push_back(MakeAction(
            Action::kSetReplicas, proj_.groups[i],
            "idle " + Fmt("%.0f s", idle_s) + ": down to its " + std::to_string(floor) +
                " configured instance(s) (model.yaml instance_count), which stay loaded",
            Action::Cause::kIdle));
      }
      continue;
    }
    if (!Evictable(g)) {
      out_.notes.push_back(GroupLabel(g) + ": idle " + Fmt("%.0f s", idle_s) +
                           " but loading or queries in flight; kept");
      kept.push_back(i);
      continue;
    }
    const std::string unused = "no queries for " + Fmt("%.1f s", idle_s) + " (idle_unload_s " +
                               Fmt("%.0f s", config_.idle_unload_s) + ")";
    const std::string why = busy ? "redundant: " + unused + " while " + GroupLabel(*other) +
                                       " serves the model's " + Qps(view.demand.rate_qps)
                                 : "idle " + Fmt("%.0f s", idle_s) + ": " + unused;
    out_.actions.push_back(MakeAction(Action::kUnload, g, why,
                                      busy ? Action::Cause::kRedundant : Action::Cause::kIdle));
    proj_.Remove(i);
    if (DeviceState* d = proj_.Device(g.device)) d->used_bytes -= g.replicas * g.memory_bytes;
  }
  if (kept.size() != view.managed.size()) {
    // A change: the low-load ticks counted the groups just unloaded, and must
    // not carry over to whatever serves the model when its queries return.
    ModelMemory& mem = out_.memory.models[view.key];
    mem.last_change = now_;
    mem.low_ticks = 0;
  }
  view.managed = std::move(kept);
}

std::vector<Eligible> Tick::EligibleOptions(const View& view, bool* best_effort) const {
  std::vector<Eligible> meets_slo, meets_floor;
  const ModelDemand& d = view.demand;
  auto mine = options_by_key_.find(view.key);
  if (mine == options_by_key_.end()) {
    *best_effort = false;
    return {};
  }
  for (size_t i : mine->second) {
    const VariantOption& o = state_.options[i];
    if (!o.usable) continue;
    if (std::none_of(proj_.devices.begin(), proj_.devices.end(),
                     [&o](const DeviceState& dev) { return dev.name == o.device; })) {
      continue;
    }
    if (d.min_accuracy && (!o.accuracy || *o.accuracy < *d.min_accuracy)) continue;
    std::optional<ReplicaCapacity> c =
        CapacityOf(o, d.latency_slo_ms, config_.slo_queueing_fraction);
    if (!c) continue;
    meets_floor.push_back({i, *c});
    if (d.latency_slo_ms <= 0 || o.latency.Predict(1) <= d.latency_slo_ms) {
      meets_slo.push_back({i, *c});
    }
  }
  *best_effort = meets_slo.empty() && !meets_floor.empty();
  return *best_effort ? meets_floor : meets_slo;
}

const Eligible* Tick::FindEligible(const std::vector<Eligible>& eligible,
                                   const GroupState& g) const {
  for (const Eligible& e : eligible) {
    if (SameOption(g, state_.options[e.option])) return &e;
  }
  return nullptr;
}

// Rule 4: the cheapest configuration that carries the demand, or the most
// capacity that fits when none does.
std::optional<Target> Tick::Choose(const View& view, const std::vector<Eligible>& eligible,
                                   double demand, double pinned_qps) const {
  auto accuracy = [this](const Target& t) {
    return state_.options[t.option].accuracy.value_or(-1.0);
  };
  auto cheaper = [&](const Target& a, const Target& b) {
    if (std::abs(a.cost - b.cost) > kCostEpsilon) return a.cost < b.cost;
    if (accuracy(a) != accuracy(b)) return accuracy(a) > accuracy(b);
    const int64_t ma = a.replicas * state_.options[a.option].memory_bytes;
    const int64_t mb = b.replicas * state_.options[b.option].memory_bytes;
    if (ma != mb) return ma < mb;
    return state_.options[a.option].latency.Predict(1) <
           state_.options[b.option].latency.Predict(1);
  };
  std::optional<Target> best, most;
  // The model's own groups and whether it is busy, once for all its options.
  const std::vector<size_t>& key_groups = proj_.KeyGroups(view.key);
  const bool key_busy = proj_.IsBusyKey(view.key);
  for (const Eligible& e : eligible) {
    const VariantOption& o = state_.options[e.option];
    const DeviceState* dev = nullptr;
    for (const DeviceState& d : proj_.devices) {
      if (d.name == o.device) dev = &d;
    }
    Target t;
    t.option = e.option;
    t.capacity = e.capacity;
    t.demand = demand;
    t.latency_slo_ms = pinned_qps <= 0 ? view.demand.latency_slo_ms : 0;
    const double need_qps = t.demand / config_.target_utilization - pinned_qps;
    int n_need =
        need_qps <= 0
            ? 1
            : static_cast<int>(std::min(1e6, std::ceil(need_qps / e.capacity.qps - 1e-9)));
    if (pinned_qps <= 0) {
      n_need = std::max(n_need, ReplicasForWaitTail(t.demand, e.capacity, view.demand.latency_slo_ms,
                                                    config_.queueing_miss_target, n_need));
    }
    int have = 0;
    for (size_t i : view.managed) {
      if (SameOption(proj_.groups[i], o)) have = proj_.groups[i].replicas;
    }
    const int threads = std::max(o.hardware.threads, 1);
    const int slots = Slots(*dev);
    const int other_threads = proj_.OtherThreads(o.device, key_groups);
    // Idle groups of other models give their cores back as they give their
    // memory (Apply evicts them): at scale, the long tail's idle replicas
    // held every core of the cluster and a busy model could not grow.
    const Projection::Freeable freeable = proj_.EvictableOn(o.device, key_groups, key_busy);
    const int evictable_threads = freeable.threads;
    const int n_cores = std::max(0, slots - other_threads + evictable_threads) / threads;
    const int64_t free_bytes = dev->budget_bytes - dev->used_bytes;
    const int64_t evictable = freeable.bytes;
    const int64_t n_mem64 =
        o.memory_bytes <= 0 ? int64_t{1} << 30
                            : have + std::max<int64_t>(0, free_bytes + evictable) / o.memory_bytes;
    int n_cap = static_cast<int>(std::min<int64_t>(n_cores, n_mem64));
    const bool at_ceiling = o.max_replicas > 0 && o.max_replicas < n_cap;
    if (at_ceiling) n_cap = o.max_replicas;
    if (n_need <= n_cap) {
      t.replicas = n_need;
      t.cost = n_need * Price(o.hardware);
      if (!best || cheaper(t, *best)) best = t;
    } else if (n_cap >= 1) {
      t.replicas = n_cap;
      t.cost = n_cap * Price(o.hardware);
      t.short_of_demand = true;
      t.limits = "at most x" + std::to_string(n_cap) + " " + o.variant + "@" + o.hardware.Name();
      if (at_ceiling) {
        t.limits += ": a private model runs at most its instance_count replicas, the count its "
                    "owner's memory quota is charged for";
      } else {
        t.limits += " fits on " + o.device + ": cores " + std::to_string(dev->cores) + " x " +
                    Fmt("%.2g", config_.max_oversubscription) + " - " +
                    std::to_string(other_threads) + " threads of other groups + " +
                    std::to_string(evictable_threads) + " evictable, " + std::to_string(threads) +
                    " per replica; memory free " + FormatBytes(free_bytes) + " + evictable " +
                    FormatBytes(evictable) + ", " + FormatBytes(o.memory_bytes) + " per replica";
      }
      const double qa = t.replicas * t.capacity.qps;
      const double qb = most ? most->replicas * most->capacity.qps : 0;
      if (!most || qa > qb || (qa == qb && cheaper(t, *most))) most = t;
    }
  }
  return best ? best : most;
}

std::string Tick::Describe(const View& view) const {
  std::string s;
  for (size_t i : view.managed) {
    const GroupState& g = proj_.groups[i];
    s += (s.empty() ? "" : " + ") + g.variant + "@" + g.hardware.Name() + " x" +
         std::to_string(g.replicas);
  }
  return s.empty() ? "none" : s;
}

std::string Tick::DescribeTarget(const Target& t) const {
  const VariantOption& o = state_.options[t.option];
  const double qps = t.replicas * t.capacity.qps;
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "%s@%s x%d carries %.1f q/s (%.1f per replica at batch %lld in %.2f ms), "
                "utilisation %s at demand %.1f q/s (target %s), cost %s",
                o.variant.c_str(), o.hardware.Name().c_str(), t.replicas, qps, t.capacity.qps,
                static_cast<long long>(t.capacity.batch), t.capacity.batch_latency_ms,
                Pct(t.demand / qps).c_str(), t.demand, Pct(config_.target_utilization).c_str(),
                PerHour(t.cost).c_str());
  std::string s = buf;
  const double tail = WaitTail(t.demand, t.capacity, t.latency_slo_ms, t.replicas);
  if (tail > 0 && config_.queueing_miss_target > 0) {
    s += Fmt(", %.2g%% of queries wait past the SLO's slack", 100 * tail) +
         Fmt(" (at most %.2g%%)", 100 * config_.queueing_miss_target);
  }
  if (t.short_of_demand) s += "; short of demand: " + t.limits;
  return s;
}

void Tick::Apply(View& view, const Target& t, const std::string& tag, const std::string& why) {
  const VariantOption& o = state_.options[t.option];
  std::optional<size_t> existing;
  for (size_t i : view.managed) {
    if (SameOption(proj_.groups[i], o)) existing = i;
  }
  const int have = existing ? proj_.groups[*existing].replicas : 0;
  // A tag that carries its own colon ("vertical: cpu1 -> cpu2") takes a ';'.
  const std::string reason =
      tag + (tag.find(':') == std::string::npos ? ": " : "; ") + why + "; " + DescribeTarget(t);
  DeviceState* dev = proj_.Device(o.device);
  const int64_t need_bytes = std::max(0, t.replicas - have) * o.memory_bytes;
  if (need_bytes > dev->budget_bytes - dev->used_bytes) {
    ClusterState sub;
    sub.devices = {*dev};
    std::vector<size_t> index;
    for (size_t i = 0; i < proj_.groups.size(); ++i) {
      if (!proj_.EvictableFor(i, o.device, view.key)) continue;
      sub.groups.push_back(proj_.groups[i]);
      index.push_back(i);
    }
    StatusOr<PlacementDecision> placed = Place(sub, need_bytes, o.device, now_, config_.placement);
    if (!placed.ok()) {
      out_.notes.push_back(view.key + ": not done (" + reason + "): " + placed.status().message());
      return;
    }
    for (const EvictionVictim& v : placed->victims) {
      const size_t i = index[v.group];
      out_.actions.push_back(MakeAction(Action::kEvict, proj_.groups[i],
                                        v.reason + " (room for " + GroupLabel(o) + ")"));
      proj_.Remove(i);
      dev->used_bytes -= v.bytes;
    }
  }
  if (!EvictForCores(view, o, t.replicas, reason)) return;
  std::vector<std::string> replaced;
  for (size_t i : view.managed) {
    if (!(existing && i == *existing)) replaced.push_back(GroupLabel(proj_.groups[i]));
  }
  std::optional<size_t> made;  // the action that makes the new configuration
  if (existing) {
    GroupState& g = proj_.groups[*existing];
    if (t.replicas != g.replicas) {
      dev->used_bytes += static_cast<int64_t>(t.replicas - g.replicas) * g.memory_bytes;
      proj_.SetReplicas(*existing, t.replicas);
      made = out_.actions.size();
      out_.actions.push_back(MakeAction(Action::kSetReplicas, g, reason));
    }
  } else {
    GroupState g = GroupFor(o, t.replicas, now_);
    g.loading = true;
    dev->used_bytes += need_bytes;
    made = out_.actions.size();
    out_.actions.push_back(MakeAction(Action::kLoad, g, reason));
    proj_.Add(std::move(g));
  }
  if (made) out_.actions[*made].replaces = replaced;
  // Make before break: these run after the load above succeeds, so their
  // memory is not counted free in this tick.
  for (size_t i : view.managed) {
    if (existing && i == *existing) continue;
    out_.actions.push_back(MakeAction(Action::kUnload, proj_.groups[i],
                                      "replaced by " + GroupLabel(o) + " (" + tag + ")",
                                      Action::Cause::kReplaced));
    proj_.Remove(i);
  }
  ModelMemory& mem = out_.memory.models[view.key];
  mem.last_change = now_;
  mem.low_ticks = 0;
}

// Frees the cores that `replicas` of `o` need beyond the device's free ones
// by evicting idle groups of other models, the least valuable first (the
// order memory evictions follow, EvictionValue). False, with a note, when
// even all of them would not do (Choose counted them, so only a projection
// changed since).
bool Tick::EvictForCores(View& view, const VariantOption& o, int replicas,
                         const std::string& reason) {
  DeviceState* dev = proj_.Device(o.device);
  const int threads = std::max(o.hardware.threads, 1);
  int short_by = replicas * threads - (Slots(*dev) - proj_.OtherThreads(o.device, view.key));
  if (short_by <= 0) return true;
  std::vector<std::pair<double, size_t>> candidates;
  for (size_t i = 0; i < proj_.groups.size(); ++i) {
    if (!proj_.EvictableFor(i, o.device, view.key)) continue;
    candidates.emplace_back(EvictionValue(proj_.groups[i], now_, config_.placement), i);
  }
  std::sort(candidates.begin(), candidates.end());
  std::vector<size_t> victims;
  for (const auto& [value, i] : candidates) {
    if (short_by <= 0) break;
    victims.push_back(i);
    short_by -= GroupThreads(proj_.groups[i]);
  }
  if (short_by > 0) {
    out_.notes.push_back(view.key + ": not done (" + reason + "): " + std::to_string(short_by) +
                         " more threads than " + o.device + "'s free and idle cores");
    return false;
  }
  for (size_t i : victims) {
    const GroupState& g = proj_.groups[i];
    const int freed = GroupThreads(g);
    out_.actions.push_back(MakeAction(
        Action::kEvict, g,
        "evict: idle " + Fmt("%.0f s", Seconds(now_ - g.last_used)) + ", frees " + std::to_string(freed) +
            " thread(s) of " + o.device + " (cores for " + GroupLabel(o) + ")"));
    dev->used_bytes -= g.replicas * g.memory_bytes;
    proj_.Remove(i);
  }
  return true;
}

}  // namespace autoscaler_tick

using autoscaler_tick::Tick;

double RateForTick(std::vector<TickCount>& recent, double arrivals, double dt_s, TimePoint now,
                   const AutoscalerConfig& config) {
  if (!(dt_s > 0)) return recent.empty() ? 0 : recent.back().arrivals / recent.back().dt_s;
  // The ticks before this one, within the window.
  double before_n = 0, before_s = 0;
  for (const TickCount& t : recent) {
    before_n += t.arrivals;
    before_s += t.dt_s;
  }
  recent.push_back({now, arrivals, dt_s});
  double n = before_n + arrivals, s = before_s + dt_s;
  // Keep the fewest recent ticks that span the window.
  size_t drop = 0;
  while (drop + 1 < recent.size() && s - recent[drop].dt_s >= config.rate_window_s - 1e-9) {
    n -= recent[drop].arrivals;
    s -= recent[drop].dt_s;
    ++drop;
  }
  recent.erase(recent.begin(), recent.begin() + static_cast<std::ptrdiff_t>(drop));
  const double windowed = n / s;
  if (config.rise_deviations > 0 && before_s > 0) {
    // What the rate of the ticks before predicts for this one, and its
    // Poisson deviation; a count past it by rise_deviations is a rise.
    const double expected = before_n / before_s * dt_s;
    if (arrivals > expected + config.rise_deviations * std::sqrt(std::max(expected, 1.0))) {
      return std::max(windowed, arrivals / dt_s);
    }
  }
  return windowed;
}


AutoscalerDecision Decide(const ClusterState& state, AutoscalerMemory memory, TimePoint now,
                          const AutoscalerConfig& config) {
  return Tick(state, std::move(memory), now, config).Run();
}

namespace {

// The slack a query has to wait in (its SLO less its own batch), in s; 0
// when WaitTail has no tail to give (no SLO, no load, or best effort).
double WaitSlackS(double rate_qps, const ReplicaCapacity& replica, double latency_slo_ms) {
  if (latency_slo_ms <= 0 || rate_qps <= 0 || replica.qps <= 0) return 0;
  return std::max(0.0, (latency_slo_ms - replica.batch_latency_ms) / 1000.0);
}

// WaitTail at `replicas` below saturation, from Erlang B at that count
// (`erlang_b`): Erlang C, then the M/D/c decay past the slack.
double TailFromErlangB(double erlang_b, int replicas, double offered, double rate_qps,
                       const ReplicaCapacity& replica, double slack_s) {
  const double waits = replicas * erlang_b / (replicas - offered * (1 - erlang_b));
  return std::min(1.0, waits * std::exp(-2 * (replicas * replica.qps - rate_qps) * slack_s));
}

}  // namespace

double WaitTail(double rate_qps, const ReplicaCapacity& replica, double latency_slo_ms,
                int replicas) {
  const double slack_s = WaitSlackS(rate_qps, replica, latency_slo_ms);
  if (slack_s <= 0 || replicas < 1) return 0;  // best effort: no wait is short enough
  const double offered = rate_qps / replica.qps;  // Erlangs
  if (offered >= replicas) return 1;
  // Erlang B by its recursion (stable for any count), then Erlang C.
  double b = 1;
  for (int k = 1; k <= replicas; ++k) b = offered * b / (k + offered * b);
  return TailFromErlangB(b, replicas, offered, rate_qps, replica, slack_s);
}

int ReplicasForWaitTail(double rate_qps, const ReplicaCapacity& replica, double latency_slo_ms,
                        double miss_target, int at_least) {
  int n = std::max(at_least, 1);
  if (miss_target <= 0) return n;  // the rule is off
  // Bounded: the tail falls about e-fold per replica once past the load.
  const int most = n + 64 + static_cast<int>(replica.qps > 0 ? rate_qps / replica.qps : 0);
  const double slack_s = WaitSlackS(rate_qps, replica, latency_slo_ms);
  if (slack_s <= 0) return n;  // no tail (WaitTail)
  // WaitTail(n), WaitTail(n + 1), ...: Erlang B's recursion carried on from
  // one count to the next instead of started over for each (the same
  // arithmetic in the same order, so the same figures).
  const double offered = rate_qps / replica.qps;
  double b = 1;
  int k = 0;
  for (; n < most; ++n) {
    if (offered >= n) {  // the tail is 1
      if (!(1.0 > miss_target)) break;
      continue;
    }
    for (; k < n; ++k) b = offered * b / (k + 1 + offered * b);
    if (!(TailFromErlangB(b, n, offered, rate_qps, replica, slack_s) > miss_target)) break;
  }
  return n;
}

std::optional<ReplicaCapacity> CapacityOf(const VariantOption& option, double latency_slo_ms,
                                          double slo_queueing_fraction) {
  const double l1 = option.latency.Predict(1);
  if (!(l1 > 0)) return std::nullopt;
  const int64_t max_batch = std::max<int64_t>(option.max_batch, 1);
  int64_t batch = max_batch;
  if (latency_slo_ms > 0) {
    const double room_ms = latency_slo_ms * slo_queueing_fraction;
    // latency(b) is a straight line; walk down from max_batch so a fit with a
    // negative slope still gives the largest batch that fits.
    while (batch > 1 && !(option.latency.Predict(batch) <= room_ms)) --batch;
  }
  ReplicaCapacity c;
  c.batch = batch;
  c.batch_latency_ms = option.latency.Predict(batch);
  if (!(c.batch_latency_ms > 0)) return std::nullopt;
  c.qps = static_cast<double>(batch) * 1000.0 / c.batch_latency_ms;
  return c;
}

}  // namespace somm::control
