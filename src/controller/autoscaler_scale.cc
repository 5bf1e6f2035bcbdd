// The autoscaler's scaling of one model (autoscaler_tick.h): its groups
// assessed against its demand, then a step up to cover the demand or down to
// what it needs, within the holds of the rules.
#include "controller/autoscaler_tick.h"

namespace somm::control::autoscaler_tick {
namespace {

// "scale up", "upgrade", "vertical: cpu1 -> cpu2", ...: what moving from the
// model's current groups to `t` is called.
std::string ChangeTag(const std::vector<GroupState>& groups, const std::vector<size_t>& managed,
                      const VariantOption& o, bool up) {
  const GroupState* primary = nullptr;
  for (size_t i : managed) {
    if (SameOption(groups[i], o)) return up ? "scale up" : "scale down";
    if (primary == nullptr || groups[i].replicas * groups[i].hardware.threads >
                                  primary->replicas * primary->hardware.threads) {
      primary = &groups[i];
    }
  }
  if (primary == nullptr) return up ? "scale up" : "scale down";
  if (primary->variant == o.variant && primary->device == o.device &&
      primary->hardware.device == DeviceKind::kCpu && o.hardware.device == DeviceKind::kCpu) {
    return "vertical: " + primary->hardware.Name() + " -> " + o.hardware.Name();
  }
  return up ? "upgrade" : "downgrade";
}

}  // namespace

Tick::Assessment Tick::Assess(const View& view, const std::vector<Eligible>& eligible) const {
  const ModelMemory& mem = out_.memory.models.at(view.key);
  Assessment a;
  a.cost = 0;
  for (size_t i : view.managed) {
    const GroupState& g = proj_.groups[i];
    const Eligible* e = FindEligible(eligible, g);
    a.managed_qps += e ? g.replicas * e->capacity.qps : 0;
    a.cost += g.replicas * Price(g.hardware);
    a.accuracy = std::min(a.accuracy, e ? state_.options[e->option].accuracy.value_or(-1) : -1);
  }
  for (size_t i : view.pinned) {
    const Eligible* e = FindEligible(eligible, proj_.groups[i]);
    a.pinned_qps += e ? proj_.groups[i].replicas * e->capacity.qps : 0;
  }
  // Rule 3's horizon: whatever is chosen now must carry the load until any
  // alternative could be ready, i.e. the slowest eligible load plus a tick.
  double load_s = 0;
  for (const Eligible& e : eligible) {
    load_s = std::max(load_s, state_.options[e.option].load_ms / 1000.0);
  }
  const double horizon_s = std::min(load_s, config_.max_forecast_horizon_s) + config_.tick_s;
  const double forecast = Forecast(mem.holt, horizon_s);
  a.observed = view.demand.rate_qps;
  a.demand = std::max(a.observed, forecast);
  // What shedding would have to reload is what runs now: its load time
  // sets how long idle capacity is held.
  double reload_s = 0;
  for (size_t i : view.managed) reload_s = std::max(reload_s, proj_.groups[i].load_ms / 1000.0);
  a.hold_s = std::max(reload_s * config_.scale_down_hold_per_load_s,
                      config_.scale_down_min_hold_s);
  const double window_s = std::min(a.hold_s, config_.scale_down_window_s);
  // The window is a decreasing queue in time order: the highest rate of the
  // last hold_s is its first sample that recent.
  double window_peak = 0;
  for (const RateSample& r : mem.window) {
    if (Seconds(now_ - r.at) < window_s) {
      window_peak = r.qps;
      break;
    }
  }
  a.peak = std::max(a.demand, window_peak);
  {
    int replicas = 0;
    ReplicaCapacity slowest;
    for (size_t i : view.managed) {
      const Eligible* e = FindEligible(eligible, proj_.groups[i]);
      if (e == nullptr) continue;
      replicas += proj_.groups[i].replicas;
      if (e->capacity.batch_latency_ms > slowest.batch_latency_ms) slowest = e->capacity;
    }
    if (replicas > 0 && view.pinned.empty()) {
      slowest.qps = a.managed_qps / replicas;  // the mean replica's rate
      a.wait_tail = WaitTail(a.demand, slowest, view.demand.latency_slo_ms, replicas);
    }
  }
  a.forecast = forecast;
  a.horizon_s = horizon_s;
  return a;
}

std::string Tick::Summary(const View& view, const Assessment& a) const {
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "demand %.1f q/s (observed %.1f, forecast %.1f in %.1f s) is %s of capacity %.1f "
                "q/s (%s%s)",
                a.demand, a.observed, a.forecast, a.horizon_s, Pct(a.Utilisation(a.demand)).c_str(),
                a.Capacity(), Describe(view).c_str(), view.pinned.empty() ? "" : " + pinned");
  return buf;
}

void Tick::Scale(View& view) {
  ModelMemory& mem = out_.memory.models[view.key];
  if (view.managed.empty() && view.pinned.empty() && view.demand.rate_qps <= 0) return;
  bool best_effort = false;
  const std::vector<Eligible> eligible = EligibleOptions(view, &best_effort);
  if (eligible.empty()) {
    out_.notes.push_back(view.key + ": no usable profiled option meets min_accuracy " +
                         (view.demand.min_accuracy ? Fmt("%.3f", *view.demand.min_accuracy)
                                                   : std::string("(none)")));
    mem.low_ticks = 0;
    return;
  }
  Assessment now = Assess(view, eligible);
  if (best_effort) {
    now.slo_note = "; best effort: no option meets latency_slo_ms " +
                   Fmt("%.3g", view.demand.latency_slo_ms) + " at batch 1";
  }
  const double util = now.Utilisation(now.demand);
  mem.low_ticks = util < config_.low_watermark ? mem.low_ticks + 1 : 0;

  if (view.managed.empty() && view.pinned.empty()) {  // rule 5, load on demand
    std::optional<Target> t = Choose(view, eligible, now.demand, 0);
    if (!t) {
      out_.notes.push_back(view.key + ": arrivals " + Qps(now.observed) +
                           " but no option fits any device's cores and memory");
      return;
    }
    Apply(view, *t, "load on demand",
          "observed " + Qps(now.observed) + " and no instance" + now.slo_note);
  } else if (util > config_.high_watermark ||
             (config_.queueing_miss_target > 0 &&
              now.wait_tail > config_.queueing_miss_target * kWaitTailSlack)) {
    ScaleUp(view, eligible, now);
  } else {
    ScaleDown(view, eligible, now);
  }
}

// Rule 5, up: promptly.
void Tick::ScaleUp(View& view, const std::vector<Eligible>& eligible, const Assessment& now) {
  std::optional<Target> t = Choose(view, eligible, now.demand, now.pinned_qps);
  // Above the watermark, or (within it) queueing past the SLO's slack.
  const std::string trigger =
      now.Utilisation(now.demand) > config_.high_watermark
          ? ", above high watermark " + Pct(config_.high_watermark)
          : Fmt(", and %.2g%% of queries would wait past the SLO's slack", 100 * now.wait_tail) +
                Fmt(" (at most %.2g%%)", 100 * config_.queueing_miss_target);
  const bool unchanged = t && view.managed.size() == 1 &&
                         SameOption(proj_.groups[view.managed[0]], state_.options[t->option]) &&
                         proj_.groups[view.managed[0]].replicas == t->replicas;
  if (!t || unchanged || (t->short_of_demand && t->replicas * t->capacity.qps <= now.managed_qps)) {
    out_.notes.push_back(view.key + ": " + Summary(view, now) + trigger +
                         ", but no larger configuration fits" +
                         (t && t->short_of_demand ? ": " + t->limits : ""));
    return;
  }
  // "preload" when only the forecast, not what arrives now, crosses the mark.
  const bool preload = now.Utilisation(now.observed) <= config_.high_watermark &&
                       now.Utilisation(now.demand) > config_.high_watermark;
  const std::string tag = (preload ? "preload " : "") +
                          ChangeTag(proj_.groups, view.managed, state_.options[t->option], true);
  Apply(view, *t, tag, Summary(view, now) + trigger + now.slo_note);
}

// Rule 5, down: only after the hysteresis, and only to something better.
void Tick::ScaleDown(View& view, const std::vector<Eligible>& eligible, const Assessment& now) {
  ModelMemory& mem = out_.memory.models[view.key];
  const double since_s =
      mem.last_change ? Seconds(now_ - *mem.last_change) : std::numeric_limits<double>::infinity();
  const int low_ticks_needed = std::min<int>(
      config_.scale_down_ticks, static_cast<int>(std::ceil(now.hold_s / config_.tick_s)));
  const double cooldown_s = std::min(config_.scale_down_cooldown_s, now.hold_s);
  if (mem.low_ticks < low_ticks_needed || since_s < cooldown_s || view.managed.empty()) return;
  // Worded only for an action (see Summary).
  auto wording = [&] {
    return Summary(view, now) + ", below low watermark " + Pct(config_.low_watermark) + " for " +
           std::to_string(mem.low_ticks) + " ticks, " + Fmt("%.0f s", since_s) +
           " since the last change (cooldown " + Fmt("%.0f s", cooldown_s) +
           "), peak " + Qps(now.peak) + " in the last " +
           Fmt("%.0f s", std::min(now.hold_s, config_.scale_down_window_s));
  };
  if (!view.pinned.empty() && now.peak <= now.pinned_qps * config_.target_utilization) {
    const std::string why = wording();
    for (size_t i : view.managed) {
      out_.actions.push_back(MakeAction(Action::kUnload, proj_.groups[i],
                                        "scale down: pinned groups carry the demand; " + why,
                                        Action::Cause::kRedundant));
      proj_.Remove(i);
    }
    mem.last_change = now_;
    mem.low_ticks = 0;
    return;
  }
  // Sized for the window's peak, so a swing back up does not reload it.
  std::optional<Target> t = Choose(view, eligible, now.peak, now.pinned_qps);
  if (!t || t->short_of_demand) return;
  const double accuracy = state_.options[t->option].accuracy.value_or(-1);
  const bool better = t->cost < now.cost - kCostEpsilon ||
                      (std::abs(t->cost - now.cost) <= kCostEpsilon && accuracy > now.accuracy);
  if (!better) return;
  Apply(view, *t, ChangeTag(proj_.groups, view.managed, state_.options[t->option], false),
        wording() + ", cost " + PerHour(now.cost) + " -> " + PerHour(t->cost) + now.slo_note);
}

}  // namespace somm::control::autoscaler_tick
