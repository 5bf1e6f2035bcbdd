#include "simulator/cost_bound.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <tuple>
#include <unordered_map>

#include "registry/model_catalog.h"
#include "simulator/zoo.h"

namespace somm::sim::bound {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// The certificates of one interval length Δ, one per load weight: each a
// list of (price of one query, queries at it).
std::vector<std::vector<std::pair<double, double>>> Prices(const Demand& d, double delta,
                                                           const std::vector<double>& thetas) {
  const double D = d.duration_s;
  const int64_t T = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(D / delta)));
  auto interval_of = [&](double s) {
    return std::clamp<int64_t>(static_cast<int64_t>(std::floor(s / delta)), 0, T - 1);
  };
  auto len = [&](int64_t t) { return t + 1 < T ? delta : D - static_cast<double>(T - 1) * delta; };
  // The queries grouped by class, arrival interval t and the last interval
  // their work may fall in (T: past D, where nothing is billed).
  struct GroupKey {
    int c;
    int64_t t;
    int64_t last;
    bool operator==(const GroupKey&) const = default;
  };
  struct GroupHash {
    size_t operator()(const GroupKey& k) const {
      return std::hash<int64_t>()((static_cast<int64_t>(k.c) * 1000003 + k.t) * 1000003 + k.last);
    }
  };
  std::unordered_map<GroupKey, double, GroupHash> groups;
  double free_queries = 0;  // no SLO, or no eligible option: price 0
  for (const Arrival& a : d.arrivals) {
    const QueryClass& c = d.classes[a.query_class];
    if (!c.slo_ms || c.capacity.empty()) {
      free_queries += 1;
      continue;
    }
    const int64_t t = interval_of(a.at_s);
    const double deadline = a.at_s + *c.slo_ms / 1000.0;
    // Interval k holds [kΔ, (k+1)Δ]: a deadline on a boundary keeps the
    // work in the interval that ends there.
    const int64_t last =
        deadline > D
            ? T
            : std::clamp<int64_t>(static_cast<int64_t>(std::ceil(deadline / delta)) - 1, t, T - 1);
    groups[{a.query_class, t, last}] += 1;
  }
  // The assignment without substitution: each class's work to its cheapest
  // option at the plain price, in its arrival interval; where that busy time
  // rises, the certificate charges a load (lambda).
  std::vector<std::pair<size_t, double>> cheapest(d.classes.size(), {0, 0});  // option, capacity
  for (size_t c = 0; c < d.classes.size(); ++c) {
    double best = kInf;
    for (const auto& [o, cap] : d.classes[c].capacity) {
      const double price = d.options[o].usd_per_s / cap;
      if (price < best) {
        best = price;
        cheapest[c] = {o, cap};
      }
    }
  }
  auto key = [T](uint64_t a, int64_t t) { return a * static_cast<uint64_t>(T) + t; };
  std::unordered_map<uint64_t, double> work;  // (option, t) -> busy seconds
  for (const auto& [g, n] : groups) {
    const auto& [o, cap] = cheapest[g.c];
    work[key(o, g.t)] += n / cap;
  }
  auto rate = [&](size_t o, int64_t t) {
    auto it = work.find(key(o, t));
    return it == work.end() ? 0.0 : it->second / len(t);
  };
  std::vector<std::vector<std::pair<double, double>>> out;
  for (double theta : thetas) {
    auto lambda = [&](size_t o, int64_t t) {
      if (t < 2 || t >= T || theta <= 0) return 0.0;
      if (!(rate(o, t) > rate(o, t - 1))) return 0.0;
      const Option& op = d.options[o];
      return theta * op.usd_per_s * std::min(op.load_s, delta);
    };
    // alpha_ot >= 0 by construction (lambda_o,t+1 <= p_o Δ, and |I_t| = Δ
    // whenever t + 1 < T); the max only absorbs rounding.
    auto alpha = [&](size_t o, int64_t t) {
      return std::max(0.0, d.options[o].usd_per_s + (lambda(o, t) - lambda(o, t + 1)) / len(t));
    };
    std::unordered_map<uint64_t, double> least;  // (class, t) -> least alpha / k
    auto price_in = [&](int c, int64_t t) {
      auto [it, fresh] = least.try_emplace(key(static_cast<uint64_t>(c), t), kInf);
      if (fresh) {
        for (const auto& [o, cap] : d.classes[c].capacity) {
          it->second = std::min(it->second, alpha(o, t) / cap);
        }
      }
      return it->second;
    };
    std::vector<std::pair<double, double>>& prices = out.emplace_back();
    prices.reserve(groups.size() + 1);
    if (free_queries > 0) prices.emplace_back(0.0, free_queries);
    for (const auto& [g, n] : groups) {
      double price = g.last >= T ? 0.0 : kInf;
      for (int64_t u = g.t; u <= std::min(g.last, T - 1) && price > 0; ++u) {
        price = std::min(price, price_in(g.c, u));
      }
      prices.emplace_back(price, n);
    }
  }
  return out;
}

}  // namespace

CostCurve::CostCurve(int64_t feasible, std::vector<std::vector<std::pair<double, double>>> prices)
    : feasible_(feasible) {
  for (auto& certificate : prices) {
    std::sort(certificate.begin(), certificate.end());
    std::vector<Step> steps;
    double queries = 0;
    double usd = 0;
    for (const auto& [price, n] : certificate) {
      if (n <= 0) continue;
      queries += n;
      usd += price * n;
      steps.push_back({price, queries, usd});
    }
    steps_.push_back(std::move(steps));
  }
}

double CostCurve::UsdAt(double attainment) const {
  const double want = std::clamp(attainment, 0.0, 1.0) * static_cast<double>(feasible_);
  double best = 0;
  for (const std::vector<Step>& steps : steps_) {
    // The cheapest `want` queries, the last step in part.
    auto it = std::lower_bound(steps.begin(), steps.end(), want,
                               [](const Step& s, double q) { return s.queries < q; });
    double usd = 0;
    if (it == steps.end()) {
      usd = steps.empty() ? 0 : steps.back().usd;
    } else {
      const double before_q = it == steps.begin() ? 0 : std::prev(it)->queries;
      const double before_usd = it == steps.begin() ? 0 : std::prev(it)->usd;
      usd = before_usd + (want - before_q) * it->price;
    }
    best = std::max(best, usd);
  }
  return best;
}

double CostCurve::AttainmentAt(double usd) const {
  if (feasible_ <= 0) return 1;
  double most = 1;
  for (const std::vector<Step>& steps : steps_) {
    auto it = std::upper_bound(steps.begin(), steps.end(), usd,
                               [](double u, const Step& s) { return u < s.usd; });
    double queries = 0;
    if (it == steps.end()) {
      queries = steps.empty() ? 0 : steps.back().queries;
      queries = std::max(queries, static_cast<double>(feasible_));
    } else {
      const double before_q = it == steps.begin() ? 0 : std::prev(it)->queries;
      const double before_usd = it == steps.begin() ? 0 : std::prev(it)->usd;
      queries = before_q + (it->price > 0 ? (usd - before_usd) / it->price : 0);
    }
    most = std::min(most, queries / static_cast<double>(feasible_));
  }
  return std::clamp(most, 0.0, 1.0);
}

double CapacityAtSlo(const LatencyCurve& latency, int64_t max_batch, std::optional<double> slo_ms) {
  double best = 0;
  for (int64_t b = 1; b <= std::max<int64_t>(max_batch, 1); ++b) {
    const double ms = latency.Measured(b);
    if (ms <= 0 || (slo_ms && ms > *slo_ms)) continue;
    best = std::max(best, static_cast<double>(b) * 1000.0 / ms);
  }
  return best;
}

CostCurve ComputeCostBound(const Demand& demand, const BoundOptions& options) {
  std::vector<std::vector<std::pair<double, double>>> prices;
  if (demand.duration_s > 0) {
    std::vector<double> thetas;
    for (double theta : options.load_weights) thetas.push_back(std::clamp(theta, 0.0, 1.0));
    for (double delta : options.intervals_s) {
      if (!(delta > 0)) continue;
      for (auto& certificate : Prices(demand, delta, thetas)) {
        prices.push_back(std::move(certificate));
      }
    }
  }
  // A window of no length bills nothing: the bound is 0.
  return CostCurve(static_cast<int64_t>(demand.arrivals.size()), std::move(prices));
}

StatusOr<Demand> TraceDemand(const std::string& repository, const PriceList& prices, int max_cores,
                             double time_scale, const loadgen::Trace& trace) {
  if (time_scale <= 0) return InvalidArgument("--time-scale must be positive");
  ModelCatalog registry(repository);
  SOMM_ASSIGN_OR_RETURN(const TraceZoo zoo, PublishTraceZoo(registry, trace));
  Demand d;
  // Options by (model, candidate), each model's candidates read once.
  std::map<std::string, std::pair<size_t, std::vector<Candidate>>> by_model;
  std::vector<VersionPtr> keep;  // the candidates point into their records
  for (const std::string& name : zoo.models) {
    SOMM_ASSIGN_OR_RETURN(VersionPtr v, registry.Resolve(name, ""));
    auto& [first, cands] = by_model[name];
    first = d.options.size();
    cands = Candidates(*v, prices, max_cores);
    for (const Candidate& c : cands) d.options.push_back({c.usd_per_s, c.load_ms / 1000.0});
    keep.push_back(std::move(v));
  }
  std::map<std::tuple<const RowTarget*, double, double, double>, int> class_ids;
  for (const loadgen::TraceQuery& q : trace.queries) {
    const RowTarget& target = zoo.TargetOf(q);
    if (!Feasible(target, q, prices)) continue;
    const auto k = std::make_tuple(&target, q.latency_slo_ms.value_or(-1),
                                   q.min_accuracy.value_or(-1), q.max_cost.value_or(-1));
    auto [it, fresh] = class_ids.emplace(k, static_cast<int>(d.classes.size()));
    if (fresh) {
      QueryClass c;
      c.slo_ms = q.latency_slo_ms;
      for (const VersionPtr& v : target.versions) {
        const auto& [first, cands] = by_model.at(v->config.name);
        for (size_t j = 0; j < cands.size(); ++j) {
          if (!Honours(cands[j], q)) continue;
          const double cap =
              CapacityAtSlo(cands[j].profile->latency, v->config.max_batch_size, q.latency_slo_ms);
          if (cap > 0) c.capacity.emplace_back(first + j, cap);
        }
      }
      d.classes.push_back(std::move(c));
    }
    d.arrivals.push_back({q.timestamp_ms / time_scale / 1000.0, it->second});
  }
  const double last_ms = trace.queries.empty() ? 0 : trace.queries.back().timestamp_ms;
  d.duration_s = last_ms / time_scale / 1000.0;
  return d;
}

}  // namespace somm::sim::bound
