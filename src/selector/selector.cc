#include "selector/selector.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>

#include "common/format_number.h"

namespace somm {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr size_t kNone = std::numeric_limits<size_t>::max();

// Costs closer than this (relative) are a tie, so that two candidates whose
// costs differ only by floating-point noise are ordered by latency instead.
constexpr double kCostTieRelative = 1e-9;

// Short numbers for messages: 0.9733, 0.05, 3.1e-10.
std::string Num(double v) { return FormatG(v, 4); }

// Time to run `samples` samples through batches of at most `max_batch`, one
// batch after the other: full batches first, then the remainder.
double BatchedLatencyMs(const LatencyCurve& curve, int64_t samples, int64_t max_batch) {
  if (samples <= 0) return 0;
  if (max_batch < 1) max_batch = 1;
  if (samples <= max_batch) return curve.Predict(samples);
  const int64_t full = samples / max_batch;
  const int64_t rest = samples % max_batch;
  return static_cast<double>(full) * curve.Predict(max_batch) + (rest > 0 ? curve.Predict(rest) : 0);
}

// The scan compares the query's model (or task) with every candidate's; names
// of one cluster share prefixes ("digits-mlp", "digits-cnn"), so comparing the
// length and the last byte inline rejects most before a memcmp call, which
// otherwise dominates a decision.
inline bool SameName(const std::string& a, const std::string& b) {
  const size_t n = a.size();
  if (n != b.size()) return false;
  if (n == 0) return true;
  if (a[n - 1] != b[n - 1]) return false;
  return std::memcmp(a.data(), b.data(), n - 1) == 0;
}

// What one candidate would do with this query, at its best instance.
struct Evaluation {
  double latency_ms = kInf;
  double cost_usd = kInf;    // ranks and meets the ceiling: charge + load
  double charge_usd = kInf;  // what the query pays
  int64_t instance_id = -1;  // -1: needs a load
};

Evaluation Evaluate(const Candidate& c, const Requirements& req, const PriceList& prices,
                    cluster::TimePoint now) {
  Evaluation e;
  const double compute_ms = BatchedLatencyMs(c.Latency(), req.batch, c.max_batch_size);
  const double usd_per_s = prices.PerSecond(c.hardware);
  // Rule 3: alone in its batch, the query's share is the whole batch; in a
  // larger batch it pays less when the fitted intercept is not negative (the
  // intercept is shared), so this errs high.
  const int64_t per_batch = std::max<int64_t>(c.max_batch_size, 1);
  const int64_t batches = std::max<int64_t>((req.batch + per_batch - 1) / per_batch, 1);
  e.charge_usd = QueryChargeUsd(
      usd_per_s, compute_ms + static_cast<double>(batches) * c.batch_overhead_ms, req.batch,
      req.batch);
  if (c.instances.empty()) {
    // Rule 2: the load comes before the batch. Rule 3: the load's
    // hardware-seconds count too, which is why a loaded instance wins a tie.
    e.latency_ms = c.load_time_ms + compute_ms;
    e.cost_usd = e.charge_usd + usd_per_s / 1000.0 * c.load_time_ms;
    return e;
  }
  for (const InstanceState& inst : c.instances) {
    double wait_ms = std::chrono::duration<double, std::milli>(inst.busy_until - now).count();
    if (wait_ms < 0) wait_ms = 0;
    const int64_t queued = inst.queued_samples > 0 ? inst.queued_samples : 0;
    const double latency = c.network_ms + wait_ms +
                           BatchedLatencyMs(c.Latency(), queued + req.batch, c.max_batch_size);
    if (latency < e.latency_ms) {
      e.latency_ms = latency;
      e.instance_id = inst.instance_id;
    }
  }
  e.cost_usd = e.charge_usd;
  return e;
}

// Rule 4's order: cheaper first, then faster.
bool CheaperThan(const Evaluation& a, const Evaluation& b) {
  const double tol = kCostTieRelative * std::max(std::fabs(a.cost_usd), std::fabs(b.cost_usd));
  if (a.cost_usd < b.cost_usd - tol) return true;
  if (b.cost_usd < a.cost_usd - tol) return false;
  return a.latency_ms < b.latency_ms;
}

// Rule 5's order for best effort: faster first, then cheaper.
bool FasterThan(const Evaluation& a, const Evaluation& b) {
  if (a.latency_ms != b.latency_ms) return a.latency_ms < b.latency_ms;
  return a.cost_usd < b.cost_usd;
}

// One pass over the candidates keeps only indices and numbers; strings are
// built afterwards, for the winner or for the error.
struct Scan {
  size_t matched = 0;
  size_t usable = 0;
  size_t best_accuracy = kNone;  // usable, highest known accuracy
  double best_accuracy_value = -kInf;
  size_t accurate = 0;           // usable and meeting the floor
  size_t cheapest_feasible = kNone;
  Evaluation cheapest_feasible_eval;
  size_t fastest = kNone;  // among the accurate
  Evaluation fastest_eval;
  size_t cheapest_in_slo = kNone;  // among the accurate that meet the SLO
  Evaluation cheapest_in_slo_eval;
};

Scan ScanCandidates(const Requirements& req, const SelectorState& state, const PriceList& prices,
                    cluster::TimePoint now) {
  Scan s;
  const bool by_model = !req.model.empty();
  const double slo = req.latency_slo_ms.value_or(kInf);
  const double max_cost = req.max_cost_usd.value_or(kInf);
  for (size_t i = 0; i < state.candidates.size(); ++i) {
    const Candidate& c = state.candidates[i];
    if (!(by_model ? SameName(c.model, req.model) : SameName(c.task, req.task))) continue;
    ++s.matched;
    // Rule 1.
    if (!c.usable) continue;
    ++s.usable;
    if (c.accuracy && *c.accuracy > s.best_accuracy_value) {
      s.best_accuracy = i;
      s.best_accuracy_value = *c.accuracy;
    }
    if (req.min_accuracy && (!c.accuracy || *c.accuracy < *req.min_accuracy)) continue;
    ++s.accurate;
    const Evaluation e = Evaluate(c, req, prices, now);
    if (s.fastest == kNone || FasterThan(e, s.fastest_eval)) {
      s.fastest = i;
      s.fastest_eval = e;
    }
    if (e.latency_ms > slo) continue;
    if (s.cheapest_in_slo == kNone || CheaperThan(e, s.cheapest_in_slo_eval)) {
      s.cheapest_in_slo = i;
      s.cheapest_in_slo_eval = e;
    }
    if (e.cost_usd > max_cost) continue;
    if (s.cheapest_feasible == kNone || CheaperThan(e, s.cheapest_feasible_eval)) {
      s.cheapest_feasible = i;
      s.cheapest_feasible_eval = e;
    }
  }
  return s;
}

std::string Scope(const Requirements& req) {
  return req.model.empty() ? "task '" + req.task + "'" : "model '" + req.model + "'";
}

std::string Where(const Candidate& c) { return c.variant_id + " on " + c.hardware.Name(); }

// "min_accuracy=0.9 and latency_slo_ms=5"; "" when nothing is required.
std::string Constraints(const Requirements& req) {
  std::vector<std::string> parts;
  if (req.min_accuracy) parts.push_back("min_accuracy=" + Num(*req.min_accuracy));
  if (req.latency_slo_ms) parts.push_back("latency_slo_ms=" + Num(*req.latency_slo_ms));
  if (req.max_cost_usd) parts.push_back("max_cost=" + Num(*req.max_cost_usd) + " USD");
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) out += i + 1 == parts.size() ? " and " : ", ";
    out += parts[i];
  }
  return out;
}

Decision MakeDecision(const Candidate& c, size_t index, const Evaluation& e,
                      DecisionOutcome outcome, const std::string& why) {
  Decision d;
  d.candidate = index;
  d.instance_id = e.instance_id;
  d.predicted_latency_ms = e.latency_ms;
  d.cost_usd = e.cost_usd;
  d.charge_usd = e.charge_usd;
  d.outcome = outcome;
  // "<why>: <variant> on <hardware> (<how>, predicted <ms> ms, <usd> USD)",
  // appended into one string: this runs for every selected query.
  std::string& r = d.reason;
  r.reserve(why.size() + c.variant_id.size() + 96);
  r.append(why).append(": ").append(c.variant_id).append(" on ").append(c.hardware.Name());
  if (e.instance_id >= 0) {
    char id[24];
    const auto printed = std::to_chars(id, id + sizeof id, e.instance_id);
    r.append(" (loaded instance ").append(id, printed.ptr);
    if (c.network_ms > 0) {
      r.append(", only in another zone: +");
      AppendG(&r, c.network_ms, 4);
      r.append(" ms round trip");
    }
  } else {
    r.append(" (needs load of ");
    AppendG(&r, c.load_time_ms, 4);
    r.append(" ms");
  }
  r.append(", predicted ");
  AppendG(&r, e.latency_ms, 4);
  r.append(" ms, ");
  AppendG(&r, e.cost_usd, 4);
  r.append(" USD)");
  return d;
}

Status AccuracyError(const Requirements& req, const SelectorState& state, const Scan& s) {
  if (!req.min_accuracy) {
    return FailedPrecondition("no usable variant for " + Scope(req) + ": all " +
                              std::to_string(s.matched) + " candidates are marked unusable");
  }
  const std::string head = "cannot meet min_accuracy=" + Num(*req.min_accuracy) + " for " + Scope(req);
  if (s.usable == 0) {
    return FailedPrecondition(head + ": no usable variant (all " + std::to_string(s.matched) +
                              " candidates are marked unusable)");
  }
  if (s.best_accuracy == kNone) {
    return FailedPrecondition(head + ": no usable variant has a measured accuracy");
  }
  const Candidate& best = state.candidates[s.best_accuracy];
  return FailedPrecondition(head + ": best usable variant reaches " + Num(*best.accuracy) + " (" +
                            best.variant_id + ")");
}

}  // namespace

const char* DecisionOutcomeName(DecisionOutcome outcome) {
  switch (outcome) {
    case DecisionOutcome::kLoadedInstance:
      return "loaded_instance";
    case DecisionOutcome::kNeedsLoad:
      return "needs_load";
    case DecisionOutcome::kBestEffort:
      return "best_effort";
  }
  return "unknown";
}

StatusOr<Decision> SelectVariant(const Requirements& req, const SelectorState& state,
                                 const PriceList& prices, cluster::TimePoint now) {
  if (req.model.empty() && req.task.empty()) {
    return InvalidArgument("requirements name neither a model nor a task");
  }
  if (req.batch < 1) {
    return InvalidArgument("batch must be at least 1, got " + std::to_string(req.batch));
  }
  const Scan s = ScanCandidates(req, state, prices, now);
  if (s.matched == 0) return NotFound("no variant serves " + Scope(req));
  if (s.accurate == 0) return AccuracyError(req, state, s);

  if (s.cheapest_feasible != kNone) {
    const Candidate& c = state.candidates[s.cheapest_feasible];
    const Evaluation& e = s.cheapest_feasible_eval;
    const std::string constraints = Constraints(req);
    return MakeDecision(c, s.cheapest_feasible, e,
                        e.instance_id >= 0 ? DecisionOutcome::kLoadedInstance
                                           : DecisionOutcome::kNeedsLoad,
                        constraints.empty() ? "cheapest variant for " + Scope(req)
                                            : "cheapest variant meeting " + constraints);
  }

  // Rule 5: the SLO or the ceiling cannot be met now. Which one failed: the
  // SLO when nothing accurate meets it, otherwise the ceiling.
  const bool slo_failed = s.cheapest_in_slo == kNone;
  const std::string requirement = slo_failed
                                      ? "latency_slo_ms=" + Num(*req.latency_slo_ms)
                                      : "max_cost=" + Num(*req.max_cost_usd) + " USD";
  if (req.best_effort) {
    return MakeDecision(state.candidates[s.fastest], s.fastest, s.fastest_eval,
                        DecisionOutcome::kBestEffort,
                        "best effort, cannot meet " + requirement + "; lowest predicted latency");
  }
  if (slo_failed) {
    return ResourceExhausted("cannot meet " + requirement + ": best predicted " +
                             Num(s.fastest_eval.latency_ms) + " ms (" +
                             Where(state.candidates[s.fastest]) + ")");
  }
  return ResourceExhausted("cannot meet " + requirement + ": cheapest feasible costs " +
                           Num(s.cheapest_in_slo_eval.cost_usd) + " USD (" +
                           Where(state.candidates[s.cheapest_in_slo]) + ")");
}

}  // namespace somm

namespace somm {

SelectorState CandidatesFrom(const cluster::ClusterState& state, const Requirements& req,
                             bool loaded_only, std::vector<size_t>* origins,
                             const RouterZone& where) {
  return CandidatesFrom(state.groups, state.options, req, loaded_only, origins, where);
}

SelectorState CandidatesFrom(const std::vector<cluster::GroupState>& groups,
                             const std::vector<cluster::VariantOption>& options,
                             const Requirements& req, bool loaded_only,
                             std::vector<size_t>* origins, const RouterZone& where) {
  SelectorState out;
  // Per query: one allocation for the list and one for each id, not a
  // regrowth per candidate and three temporaries per id.
  out.candidates.reserve(options.size());
  for (size_t i = 0; i < options.size(); ++i) {
    const cluster::VariantOption& o = options[i];
    if (req.model.empty() ? o.task != req.task : o.model != req.model) continue;
    Candidate& c = out.candidates.emplace_back();
    char version[24];
    const auto printed = std::to_chars(version, version + sizeof version, o.version);
    c.variant_id.reserve(o.model.size() + o.variant.size() + 2 +
                         static_cast<size_t>(printed.ptr - version));
    c.variant_id.append(o.model).append(1, ':').append(version, printed.ptr).append(1, ':').append(
        o.variant);
    c.model = o.model;
    // The scan matches a task query's candidates by task, a model query's by
    // model only: the task (often past the short-string size) is copied
    // only when it is read.
    if (req.model.empty()) c.task = o.task;
    c.hardware = o.hardware;
    c.accuracy = o.accuracy;
    c.usable = o.usable;
    c.latency_of_option = &o.latency;
    c.load_time_ms = o.load_ms;
    c.max_batch_size = std::max<int64_t>(o.max_batch, 1);
    bool loaded = false;
    bool near = where.zone.empty();
    for (const cluster::GroupState& g : groups) {
      if (g.model == o.model && g.version == o.version && g.variant == o.variant &&
          g.hardware == o.hardware && !g.loading && !g.instances.empty()) {
        c.instances.insert(c.instances.end(), g.instances.begin(), g.instances.end());
        loaded = true;
        near = near || g.zone == where.zone;
      }
    }
    if (loaded_only && !loaded) {
      out.candidates.pop_back();
      continue;
    }
    // The router dispatches in its own zone when a group is there
    // (Router::PickWorker); only a candidate held elsewhere alone pays the
    // round trip.
    if (loaded && !near) c.network_ms = where.cross_zone_rtt_ms;
    if (origins) origins->push_back(i);
  }
  return out;
}

}  // namespace somm
