#include "simulator/infaas_policy.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <variant>

namespace somm::sim::infaas {

namespace {

using Field = std::variant<double*, int*, bool*>;

std::vector<std::pair<const char*, Field>> Fields(InfaasOptions& o) {
  return {
      {"fast_check_variants", &o.fast_check_variants},
      {"loose_slo_ms", &o.loose_slo_ms},
      {"recent_variants", &o.recent_variants},
      {"search_share", &o.search_share},
      {"metadata_lookup_ms", &o.metadata_lookup_ms},
      {"min_search_variants", &o.min_search_variants},
      {"not_loaded_penalty_ms", &o.not_loaded_penalty_ms},
      {"blacklisted_share", &o.blacklisted_share},
      {"least_loaded_workers", &o.least_loaded_workers},
      {"burst_queries", &o.burst_queries},
      {"burst_window_ms", &o.burst_window_ms},
      {"burst_blacklist_s", &o.burst_blacklist_s},
      {"monitor_period_s", &o.monitor_period_s},
      {"blacklist_latency_factor", &o.blacklist_latency_factor},
      {"blacklist_rate_factor", &o.blacklist_rate_factor},
      {"blacklist_queue_factor", &o.blacklist_queue_factor},
      {"unblacklist_latency_factor", &o.unblacklist_latency_factor},
      {"single_replica_latency_factor", &o.single_replica_latency_factor},
      {"single_replica_rate_factor", &o.single_replica_rate_factor},
      {"single_replica_queue_factor", &o.single_replica_queue_factor},
      {"idle_latency_decay", &o.idle_latency_decay},
      {"max_replicas", &o.max_replicas},
      {"headroom", &o.headroom},
      {"scale_down_requests", &o.scale_down_requests},
      {"upgrade_cost_ratio", &o.upgrade_cost_ratio},
      {"over_cap_factor", &o.over_cap_factor},
      {"load_allowance", &o.load_allowance},
      {"upgrade_cpu", &o.upgrade_cpu},
      {"vm_period_s", &o.vm_period_s},
      {"vm_blacklist_util", &o.vm_blacklist_util},
      {"vm_blacklist_s", &o.vm_blacklist_s},
      {"vm_scale_out_util", &o.vm_scale_out_util},
      {"vm_backoff_periods", &o.vm_backoff_periods},
      {"vm_idle_periods", &o.vm_idle_periods},
      {"vm_idle_min_util", &o.vm_idle_min_util},
      {"vm_idle_mean_util", &o.vm_idle_mean_util},
      {"initial_workers", &o.initial_workers},
  };
}

// Within the SLO, and, above loose_slo_ms, at least that slow (`floor`).
bool Within(const Candidate& c, std::optional<double> slo_ms, double floor_ms) {
  return (!slo_ms || c.batch1_ms <= *slo_ms) && c.batch1_ms >= floor_ms;
}

double FloorMs(std::optional<double> slo_ms, const InfaasOptions& o) {
  return slo_ms && *slo_ms > o.loose_slo_ms ? o.loose_slo_ms : 0;
}

// The released master ranks a running variant by its slack under the SLO
// (the least wins: the slowest variant that still meets it), and one not
// running by what it would take: the penalty, its load and its inference.
double RunningScore(const Candidate& c, std::optional<double> slo_ms) {
  return (slo_ms ? *slo_ms : 0) - c.batch1_ms;
}

}  // namespace

Status SetOption(InfaasOptions& o, const std::string& name, const std::string& value) {
  for (auto& [field, ptr] : Fields(o)) {
    if (name != field) continue;
    try {
      size_t used = 0;
      if (auto* d = std::get_if<double*>(&ptr)) {
        **d = std::stod(value, &used);
      } else if (auto* i = std::get_if<int*>(&ptr)) {
        **i = std::stoi(value, &used);
      } else if (value == "true" || value == "false") {
        *std::get<bool*>(ptr) = value == "true";
        used = value.size();
      }
      if (used != value.size() || value.empty()) {
        return InvalidArgument("--infaas " + name + ": '" + value + "' is not a value for it");
      }
    } catch (const std::exception&) {
      return InvalidArgument("--infaas " + name + ": '" + value + "' is not a number");
    }
    return Status::Ok();
  }
  std::string known;
  for (const std::string& n : OptionNames()) known += (known.empty() ? "" : ", ") + n;
  return InvalidArgument("--infaas: no option '" + name + "' (" + known + ")");
}

std::vector<std::string> OptionNames() {
  InfaasOptions o;
  std::vector<std::string> names;
  for (const auto& [name, ptr] : Fields(o)) names.push_back(name);
  return names;
}

std::vector<size_t> FastestWithin(const std::vector<Candidate>& cands, std::optional<double> slo_ms,
                                  const InfaasOptions& o) {
  const double floor_ms = FloorMs(slo_ms, o);
  std::vector<size_t> out;
  for (size_t c = 0; c < cands.size(); ++c) {
    if (Within(cands[c], slo_ms, floor_ms)) out.push_back(c);
  }
  std::stable_sort(out.begin(), out.end(), [&cands](size_t a, size_t b) {
    return cands[a].batch1_ms < cands[b].batch1_ms;
  });
  if (out.size() > static_cast<size_t>(std::max(o.fast_check_variants, 0))) {
    out.resize(std::max(o.fast_check_variants, 0));
  }
  return out;
}

VariantChoice ChooseForModel(const std::vector<Candidate>& cands,
                             const std::vector<VariantState>& states, std::optional<double> slo_ms,
                             double draw, const InfaasOptions& o) {
  // The fast check: the fastest few within the SLO, the first running and
  // not blacklisted.
  const std::vector<size_t> fastest = FastestWithin(cands, slo_ms, o);
  std::optional<size_t> blacklisted_fast;
  for (size_t c : fastest) {
    if (!states[c].running) continue;
    if (!states[c].blacklisted) return {true, c, true, "fast check"};
    blacklisted_fast = c;
  }
  // The general search: every variant within the SLO; of the running ones
  // not blacklisted, the one with the least slack.
  bool exists = false;
  bool any_blacklisted = false;
  std::optional<size_t> best;
  for (size_t c = 0; c < cands.size(); ++c) {
    if (slo_ms && cands[c].batch1_ms > *slo_ms) continue;
    exists = true;
    if (!states[c].running) continue;
    if (states[c].blacklisted) {
      any_blacklisted = true;
      continue;
    }
    if (!best || RunningScore(cands[c], slo_ms) < RunningScore(cands[*best], slo_ms)) best = c;
  }
  if (!exists) return {false, 0, false, "no variant within the SLO"};
  if (best) return {true, *best, true, "least slack"};
  if (fastest.empty()) {
    // A loose SLO and no variant that slow: the fastest within it.
    InfaasOptions tight = o;
    tight.loose_slo_ms = std::numeric_limits<double>::infinity();
    tight.fast_check_variants = 1;
    const std::vector<size_t> any = FastestWithin(cands, slo_ms, tight);
    if (any.empty()) return {false, 0, false, "no variant within the SLO"};
    return {true, any.front(), false, "none running: load the fastest"};
  }
  if (!any_blacklisted) return {true, fastest.front(), false, "none running: load the fastest"};
  // Running but blacklisted: a share still goes to the blacklisted variant
  // (on the least utilised worker, as every query of a variant not seen
  // running), the rest to the fastest, elsewhere.
  if (blacklisted_fast && draw < o.blacklisted_share) {
    return {true, *blacklisted_fast, false, "blacklisted: its share"};
  }
  return {true, fastest.front(), false, "blacklisted: elsewhere"};
}

VariantChoice ChooseForTask(const std::vector<Candidate>& cands,
                            const std::vector<VariantState>& states, std::optional<double> slo_ms,
                            const std::vector<size_t>& recent, const InfaasOptions& o) {
  // The fast check: the variants chosen last, running and not blacklisted.
  const double floor_ms = FloorMs(slo_ms, o);
  for (size_t c : recent) {
    if (Within(cands[c], slo_ms, floor_ms) && states[c].running && !states[c].blacklisted) {
      return {true, c, true, "recent"};
    }
  }
  // The general search: the least accurate variants that meet the floor
  // (unknown accuracy first), as many as its time budget allows.
  std::vector<size_t> order(cands.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&cands](size_t a, size_t b) {
    return cands[a].accuracy.value_or(-1) < cands[b].accuracy.value_or(-1);
  });
  if (slo_ms && o.metadata_lookup_ms > 0) {
    const int budget = std::max(o.min_search_variants,
                                static_cast<int>(o.search_share * *slo_ms / o.metadata_lookup_ms));
    if (order.size() > static_cast<size_t>(std::max(budget, 0))) order.resize(std::max(budget, 0));
  }
  // In that order, as released: a running variant not blacklisted
  // competes with its slack, one not loaded with the penalty, its load and
  // its latency, but only when its batch cap is below every one before it
  // (the released search's preference for small batch caps); each replaces
  // the pick so far when it scores less. Under a loose SLO the variant not
  // loaded that starts quickest wins when none runs and none is
  // blacklisted. Only variants of at least loose_slo_ms count under a
  // loose SLO; when none of those will do, all of them (not released:
  // there the search fails).
  for (double floor : {floor_ms, 0.0}) {
    std::optional<size_t> best;
    double best_score = std::numeric_limits<double>::infinity();
    bool valid_running = false;
    bool blacklisted = false;
    std::optional<size_t> quickest;  // not loaded, under a loose SLO
    double quickest_score = std::numeric_limits<double>::infinity();
    int64_t smallest_cap = std::numeric_limits<int64_t>::max();
    for (size_t c : order) {
      const Candidate& cand = cands[c];
      const bool smaller_cap = cand.max_batch < smallest_cap;
      if (smaller_cap) smallest_cap = cand.max_batch;
      if (!Within(cand, slo_ms, floor)) continue;
      if (states[c].running && states[c].blacklisted) {
        blacklisted = true;
        continue;
      }
      if (states[c].running) {
        const double score = RunningScore(cand, slo_ms);
        if (score < best_score) {
          best = c;
          best_score = score;
          valid_running = true;
        }
        continue;
      }
      const double score = o.not_loaded_penalty_ms + cand.load_ms + cand.batch1_ms;
      if (smaller_cap && score < best_score) {
        best = c;
        best_score = score;
      }
      if (floor > 0 && score < quickest_score) {
        quickest = c;
        quickest_score = score;
      }
    }
    if (quickest && !valid_running && !blacklisted) {
      return {true, *quickest, false, "loose SLO: load the quickest to start"};
    }
    if (best) {
      const bool running = states[*best].running;
      return {true, *best, running, running ? "least slack" : "not loaded: penalised"};
    }
    if (floor == 0) break;
  }
  return {false, 0, false, "no variant meets the query"};
}

void RememberChoice(std::deque<std::string>& recent, const std::string& id,
                    const InfaasOptions& o) {
  auto it = std::find(recent.begin(), recent.end(), id);
  if (it != recent.end()) {
    recent.erase(it);
  } else if (static_cast<int>(recent.size()) >= o.recent_variants && !recent.empty()) {
    recent.pop_back();
  }
  if (o.recent_variants > 0) recent.push_front(id);
}

int PickServingWorker(const std::vector<int>& least_loaded, const std::vector<bool>& blacklisted) {
  for (size_t k = 0; k < least_loaded.size(); ++k) {
    if (!blacklisted[k]) return least_loaded[k];
  }
  return -1;
}

int PickLoadingWorker(const std::vector<double>& util, const std::vector<bool>& can_hold,
                      int last_picked) {
  std::vector<int> order;
  for (int w = 0; w < static_cast<int>(util.size()); ++w) {
    if (can_hold[w]) order.push_back(w);
  }
  std::stable_sort(order.begin(), order.end(), [&util](int a, int b) { return util[a] < util[b]; });
  if (order.empty()) return -1;
  if (order.size() == 1) return order.front();
  for (int w : order) {
    if (w != last_picked) return w;
  }
  return order.front();
}

bool NoteQuery(BurstState& b, double now_ms, const InfaasOptions& o) {
  if (b.window_start_ms < 0) {
    b.window_start_ms = now_ms;
    b.queries = 1;
    return false;
  }
  if (now_ms - b.window_start_ms >= o.burst_window_ms) {
    b.window_start_ms = now_ms;
    b.queries = 0;
    return false;
  }
  if (++b.queries < o.burst_queries) return false;
  b.window_start_ms = now_ms;
  b.queries = 0;
  return true;
}

BlacklistVerdict JudgeVariant(const MonitorSample& s, bool was_blacklisted,
                              double last_mean_latency_ms, const InfaasOptions& o) {
  BlacklistVerdict v;
  const int replicas = std::max(s.replicas, 1);
  const double per_replica_qps = s.arrived / std::max(s.period_s, 1e-9) / replicas;
  v.mean_latency_ms = s.completed > 0 ? s.latency_sum_ms / static_cast<double>(s.completed)
                                      : last_mean_latency_ms / std::max(o.idle_latency_decay, 1.0);
  const double profiled = std::max(s.profiled_ms, 1e-6);
  const double throughput = 1000.0 / profiled;  // one replica's, per second
  const bool single = s.replicas == 1;
  const double latency_factor =
      single ? o.single_replica_latency_factor : o.blacklist_latency_factor;
  const double rate_factor = single ? o.single_replica_rate_factor : o.blacklist_rate_factor;
  const double queue_factor = single ? o.single_replica_queue_factor : o.blacklist_queue_factor;
  const double queue_limit = queue_factor * replicas * throughput;
  const bool slow =
      v.mean_latency_ms > profiled * latency_factor && per_replica_qps > rate_factor * throughput;
  if (slow || static_cast<double>(s.outstanding) > queue_limit) {
    v.blacklisted = true;
  } else if (static_cast<double>(s.outstanding) < queue_limit &&
             v.mean_latency_ms < profiled * o.unblacklist_latency_factor) {
    v.blacklisted = false;
  } else {
    v.blacklisted = was_blacklisted;
  }
  return v;
}

ScaleCount CountReplicas(const Candidate& c, const VariantLoad& l, int64_t free_bytes,
                         int free_cores, const InfaasOptions& o) {
  ScaleCount out;
  if (l.replicas <= 0) return out;  // loading: judged once it serves
  // A CPU variant's throughput as the released autoscaler sees it: one
  // query of the client's batch (1 here) per inference latency.
  const double throughput = 1000.0 / std::max(c.batch1_ms, 1e-6);
  const double current = l.replicas * throughput;
  const double extra = l.rate_qps - current * (1 - o.headroom);
  const int add = static_cast<int>(std::ceil(extra / throughput));
  if (add > 0) {
    out.count = add;
    out.extra_qps = extra;
    out.ok =
        add * c.memory_bytes <= std::max<int64_t>(free_bytes, 0) && add * c.cores <= free_cores;
  } else if (l.rate_qps <= std::max(0.0, (l.replicas - 1) * throughput)) {
    out.count = -1;
  }
  return out;
}

ScaleCount CountFastest(const Candidate& c, const VariantLoad& l, double others_extra_qps,
                        int64_t free_bytes, int free_cores, const InfaasOptions& o) {
  ScaleCount out;
  const double throughput = 1000.0 / std::max(c.batch1_ms, 1e-6);
  const double wanted = l.rate_qps + others_extra_qps;
  const double current = l.replicas * throughput;
  const double adjusted = wanted - current + o.load_allowance * c.load_ms;
  const int add = wanted > 0 ? static_cast<int>(std::ceil(adjusted / throughput)) : 0;
  if (add > 0) {
    if (add * c.memory_bytes > std::max<int64_t>(free_bytes, 0) || add * c.cores > free_cores) {
      out.ok = false;
      return out;
    }
    out.count = add;
  } else if (l.replicas > 0 &&
             (wanted <= std::max(0.0, (l.replicas - 1) * throughput) || l.rate_qps <= 0)) {
    out.count = -1;
  }
  return out;
}

size_t FastestCandidate(const std::vector<Candidate>& cands) {
  size_t best = 0;
  for (size_t c = 1; c < cands.size(); ++c) {
    if (cands[c].load_ms + cands[c].batch1_ms < cands[best].load_ms + cands[best].batch1_ms) {
      best = c;
    }
  }
  return best;
}

std::vector<ScaleRequest> ScaleModel(const std::vector<Candidate>& cands,
                                     const std::vector<VariantLoad>& here, int64_t free_bytes,
                                     int free_cores, const InfaasOptions& o) {
  const size_t fastest = FastestCandidate(cands);
  // Strategy (a): each variant on its own. What its additions would cost
  // in load time, a replica past the cap at a prohibitive price.
  std::vector<ScaleRequest> each;
  double extra_qps = 0;
  double replicate_cost = 0;
  VariantLoad fastest_load;
  fastest_load.candidate = fastest;
  for (const VariantLoad& l : here) {
    if (l.candidate == fastest) fastest_load = l;
    const Candidate& c = cands[l.candidate];
    const ScaleCount sc = CountReplicas(c, l, free_bytes, free_cores, o);
    if (sc.count > 0) extra_qps += sc.extra_qps;
    if (!sc.ok) continue;
    if (sc.count > 0) {
      replicate_cost += c.load_ms * sc.count;
      if (l.replicas + sc.count > o.max_replicas) replicate_cost += c.load_ms * o.over_cap_factor;
    }
    if (sc.count != 0) each.push_back({l.candidate, sc.count});
  }
  // Strategy (b): the fastest variant carries the others' excess too.
  const ScaleCount fc =
      CountFastest(cands[fastest], fastest_load, extra_qps, free_bytes, free_cores, o);
  bool upgrade = false;
  if (o.upgrade_cpu && fc.ok) {
    if (fc.count > 0 && replicate_cost > o.upgrade_cost_ratio * cands[fastest].load_ms * fc.count) {
      upgrade = true;
    }
    if (fc.count == 0 && fastest_load.replicas > 0) upgrade = true;
  }
  std::vector<ScaleRequest> out;
  auto push = [&out](const ScaleRequest& r) {
    // One request per variant and period: a later one for the same
    // variant finds it taken, as the released daemon's flag does.
    for (const ScaleRequest& q : out) {
      if (q.candidate == r.candidate) return;
    }
    out.push_back(r);
  };
  for (const ScaleRequest& r : each) {
    if (upgrade && r.count > 0 && r.candidate != fastest) continue;
    push(r);
  }
  if ((upgrade || fc.count < 0) && fc.count != 0) push({fastest, fc.count});
  return out;
}

int CarryOut(const ScaleRequest& r, int replicas, int& backlog, const InfaasOptions& o) {
  if (r.count < 0) {
    backlog += -r.count;
    if (backlog <= o.scale_down_requests) return replicas;
    backlog = 0;
    return replicas - std::min(-r.count, replicas);
  }
  backlog = 0;
  if (r.count == 0 || replicas + r.count > o.max_replicas) return replicas;
  return replicas + r.count;
}

VmDecision VmStep(VmState& s, const std::vector<double>& util, int pool, int fleet, int floor,
                  const InfaasOptions& o) {
  VmDecision d;
  for (size_t w = 0; w < util.size(); ++w) {
    if (util[w] > o.vm_blacklist_util) d.blacklist.push_back(static_cast<int>(w));
  }
  if (s.wait == 0 && !util.empty()) {
    const auto least = std::min_element(util.begin(), util.end());
    const double mean = std::accumulate(util.begin(), util.end(), 0.0) / util.size();
    if (*least > o.vm_scale_out_util && pool < fleet) {
      d.add = true;
      s.wait = o.vm_backoff_periods;
    }
    if (*least <= o.vm_idle_min_util || mean <= o.vm_idle_mean_util) {
      if (++s.idle >= o.vm_idle_periods) {
        if (pool > floor) {
          d.remove = static_cast<int>(least - util.begin());
          s.wait = o.vm_backoff_periods;
        }
        s.idle = 0;
      }
    } else {
      s.idle = 0;
    }
  }
  if (s.wait > 0) --s.wait;
  return d;
}

}  // namespace somm::sim::infaas
