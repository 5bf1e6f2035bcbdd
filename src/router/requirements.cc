#include "router/requirements.h"

#include <algorithm>
#include <cstdlib>

#include "common/format_number.h"

namespace somm {

namespace {

StatusOr<std::optional<double>> NumberParameter(const Parameters& p, const std::string& key) {
  auto it = p.find(key);
  if (it == p.end()) return std::optional<double>();
  if (const auto* d = std::get_if<double>(&it->second)) return std::optional<double>(*d);
  if (const auto* i = std::get_if<int64_t>(&it->second)) {
    return std::optional<double>(static_cast<double>(*i));
  }
  if (const auto* s = std::get_if<std::string>(&it->second)) {
    char* end = nullptr;
    const double v = std::strtod(s->c_str(), &end);
    if (!s->empty() && end && *end == '\0') return std::optional<double>(v);
  }
  return InvalidArgument("parameter '" + key + "' must be a number");
}

}  // namespace

StatusOr<Requirements> ParseRequirements(const Parameters& p, bool* any) {
  Requirements r;
  SOMM_ASSIGN_OR_RETURN(r.latency_slo_ms, NumberParameter(p, "latency_slo_ms"));
  SOMM_ASSIGN_OR_RETURN(r.min_accuracy, NumberParameter(p, "min_accuracy"));
  SOMM_ASSIGN_OR_RETURN(r.max_cost_usd, NumberParameter(p, "max_cost"));
  if (r.latency_slo_ms && !(*r.latency_slo_ms > 0)) {
    return InvalidArgument("parameter 'latency_slo_ms' must be positive");
  }
  if (r.min_accuracy && !(*r.min_accuracy >= 0 && *r.min_accuracy <= 1)) {
    return InvalidArgument("parameter 'min_accuracy' must be between 0 and 1");
  }
  if (r.max_cost_usd && !(*r.max_cost_usd >= 0)) {
    return InvalidArgument("parameter 'max_cost' must not be negative");
  }
  auto be = p.find("best_effort");
  if (be != p.end()) {
    if (const auto* b = std::get_if<bool>(&be->second)) {
      r.best_effort = *b;
    } else if (const auto* s = std::get_if<std::string>(&be->second)) {
      r.best_effort = *s == "true" || *s == "1";
    } else {
      return InvalidArgument("parameter 'best_effort' must be true or false");
    }
  }
  *any = r.latency_slo_ms || r.min_accuracy || r.max_cost_usd;
  return r;
}

std::string DescribeRequirements(const Requirements& r) {
  // %g is how a stream writes a double by default (precision 6); FormatG
  // because this runs for every query with requirements, and a stream's
  // construction (or printf's parsing) cost more than the rest.
  std::string s;
  auto add = [&s](const char* key, double value) {
    s.append(key).push_back('=');
    AppendG(&s, value);
    s.push_back(' ');
  };
  if (r.min_accuracy) add("min_accuracy", *r.min_accuracy);
  if (r.latency_slo_ms) add("latency_slo_ms", *r.latency_slo_ms);
  if (r.max_cost_usd) add("max_cost", *r.max_cost_usd);
  if (r.best_effort) s += "best_effort ";
  if (!s.empty()) s.pop_back();
  return s.empty() ? "none" : s;
}

int64_t QuerySamples(const std::vector<Tensor>& inputs) {
  if (inputs.empty() || inputs[0].shape.empty()) return 1;
  return std::max<int64_t>(inputs[0].shape[0], 1);
}


}  // namespace somm
