#include "auth/quota.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

namespace somm::auth {
namespace {

Status ReadLimits(const YAML::Node& node, const std::string& where, TenantLimits* out) {
  if (!node.IsMap()) return InvalidArgument(where + ": expected a map of limits");
  static const std::set<std::string> kKeys = {"requests_per_s", "burst", "max_concurrent",
                                              "max_private_memory_mb"};
  for (const auto& kv : node) {
    const std::string key = kv.first.as<std::string>();
    if (!kKeys.count(key)) {
      return InvalidArgument(where + ": unknown limit '" + key +
                             "' (requests_per_s, burst, max_concurrent, max_private_memory_mb)");
    }
    double value = 0;
    try {
      value = kv.second.as<double>();
    } catch (const YAML::Exception&) {
      return InvalidArgument(where + "." + key + ": expected a number");
    }
    if (!(value >= 0) || !std::isfinite(value)) {
      return InvalidArgument(where + "." + key + ": must be a finite number >= 0");
    }
    if (key == "requests_per_s") out->requests_per_s = value;
    if (key == "burst") out->burst = value;
    if (key == "max_concurrent") out->max_concurrent = static_cast<int64_t>(value);
    if (key == "max_private_memory_mb") out->max_private_memory_mb = static_cast<int64_t>(value);
  }
  return Status::Ok();
}

std::string Escape(const std::string& label) {
  std::string out;
  for (char c : label) {
    if (c == '\\' || c == '"') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

const TenantLimits& QuotaConfig::For(const std::string& tenant) const {
  auto it = tenants.find(tenant);
  return it == tenants.end() ? defaults : it->second;
}

StatusOr<QuotaConfig> ParseQuotaConfig(const std::string& yaml_text, const std::string& source) {
  QuotaConfig config;
  try {
    const YAML::Node root = YAML::Load(yaml_text);
    if (!root || root.IsNull()) return config;
    if (!root.IsMap()) return InvalidArgument(source + ": expected 'default:' and 'tenants:'");
    for (const auto& kv : root) {
      const std::string key = kv.first.as<std::string>();
      if (key != "default" && key != "tenants") {
        return InvalidArgument(source + ": unknown key '" + key + "' (default, tenants)");
      }
    }
    if (root["default"]) {
      SOMM_RETURN_IF_ERROR(ReadLimits(root["default"], source + ": default", &config.defaults));
    }
    if (const YAML::Node tenants = root["tenants"]) {
      if (!tenants.IsMap()) return InvalidArgument(source + ": 'tenants' must be a map");
      for (const auto& kv : tenants) {
        const std::string tenant = kv.first.as<std::string>();
        // A tenant's entry starts from the defaults and overrides what it names.
        TenantLimits limits = config.defaults;
        SOMM_RETURN_IF_ERROR(ReadLimits(kv.second, source + ": tenants." + tenant, &limits));
        config.tenants[tenant] = limits;
      }
    }
  } catch (const YAML::Exception& e) {
    return InvalidArgument(source + ": " + e.what());
  }
  return config;
}

StatusOr<QuotaConfig> LoadQuotaConfig(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return QuotaConfig{};
  std::ifstream in(path);
  if (!in) return Unavailable("cannot read " + path);
  std::ostringstream text;
  text << in.rdbuf();
  return ParseQuotaConfig(text.str(), path);
}

std::string DefaultQuotaPath(const std::string& repository) {
  return (std::filesystem::path(repository) / ".somm" / "tenants.yaml").string();
}

TenantQuotas::TenantQuotas(QuotaConfig config, const Clock& clock)
    : config_(std::move(config)), clock_(clock) {}

Status TenantQuotas::Acquire(const std::string& tenant, int* retry_after_s) {
  const TenantLimits& limits = config_.For(tenant);
  const Clock::TimePoint now = clock_.Now();
  MutexLock lock(&mu_);
  State& s = states_[tenant];
  if (limits.requests_per_s > 0) {
    const double burst = limits.burst > 0 ? limits.burst : std::max(limits.requests_per_s, 1.0);
    if (s.tokens < 0) {
      s.tokens = burst;
    } else {
      const double elapsed = std::chrono::duration<double>(now - s.refilled).count();
      s.tokens = std::min(burst, s.tokens + std::max(elapsed, 0.0) * limits.requests_per_s);
    }
    s.refilled = now;
    if (s.tokens < 1) {
      ++s.rate_limited;
      *retry_after_s =
          std::max(1, static_cast<int>(std::ceil((1 - s.tokens) / limits.requests_per_s)));
      return ResourceExhausted("tenant '" + tenant + "' is over its request rate (" +
                               std::to_string(limits.requests_per_s) + "/s); retry after " +
                               std::to_string(*retry_after_s) + " s");
    }
  }
  if (limits.max_concurrent > 0 && s.inflight >= limits.max_concurrent) {
    ++s.concurrency_limited;
    *retry_after_s = 1;
    return ResourceExhausted("tenant '" + tenant + "' has " + std::to_string(s.inflight) +
                             " queries in flight, its limit");
  }
  if (limits.requests_per_s > 0) s.tokens -= 1;
  ++s.inflight;
  ++s.admitted;
  return Status::Ok();
}

void TenantQuotas::Release(const std::string& tenant) {
  MutexLock lock(&mu_);
  State& s = states_[tenant];
  if (s.inflight > 0) --s.inflight;
}

std::string MibText(int64_t bytes) {
  const int64_t tenths = (bytes * 10 + (1 << 19)) >> 20;
  return std::to_string(tenths / 10) + "." + std::to_string(tenths % 10) + " MiB";
}

Status TenantQuotas::CheckPrivateMemory(const std::string& tenant, int64_t private_bytes) {
  const TenantLimits& limits = config_.For(tenant);
  MutexLock lock(&mu_);
  State& s = states_[tenant];
  const int64_t limit = limits.max_private_memory_mb * 1024 * 1024;
  if (limit > 0 && private_bytes > limit) {
    ++s.memory_refused;
    return ResourceExhausted("tenant '" + tenant + "' private models would take " +
                             MibText(private_bytes) +
                             ", over its memory quota (max_private_memory_mb " +
                             std::to_string(limits.max_private_memory_mb) + " MiB)");
  }
  s.private_bytes = private_bytes;
  return Status::Ok();
}

std::string TenantQuotas::MetricsText() const {
  std::ostringstream out;
  out << "# HELP somm_tenant_queries_total Queries per tenant, by quota outcome.\n"
         "# TYPE somm_tenant_queries_total counter\n";
  MutexLock lock(&mu_);
  for (const auto& [tenant, s] : states_) {
    const std::string t = Escape(tenant);
    out << "somm_tenant_queries_total{tenant=\"" << t << "\",outcome=\"admitted\"} " << s.admitted
        << "\n"
        << "somm_tenant_queries_total{tenant=\"" << t << "\",outcome=\"rate_limited\"} "
        << s.rate_limited << "\n"
        << "somm_tenant_queries_total{tenant=\"" << t << "\",outcome=\"concurrency_limited\"} "
        << s.concurrency_limited << "\n";
  }
  out << "# HELP somm_tenant_inflight_queries Queries in flight per tenant.\n"
         "# TYPE somm_tenant_inflight_queries gauge\n";
  for (const auto& [tenant, s] : states_) {
    out << "somm_tenant_inflight_queries{tenant=\"" << Escape(tenant) << "\"} " << s.inflight
        << "\n";
  }
  out << "# HELP somm_tenant_private_model_bytes Bytes of a tenant's private models at its last "
         "register or load.\n"
         "# TYPE somm_tenant_private_model_bytes gauge\n";
  for (const auto& [tenant, s] : states_) {
    out << "somm_tenant_private_model_bytes{tenant=\"" << Escape(tenant) << "\"} "
        << s.private_bytes << "\n";
  }
  out << "# HELP somm_tenant_memory_refusals_total Registrations and loads refused by the "
         "private-memory limit.\n"
         "# TYPE somm_tenant_memory_refusals_total counter\n";
  for (const auto& [tenant, s] : states_) {
    out << "somm_tenant_memory_refusals_total{tenant=\"" << Escape(tenant) << "\"} "
        << s.memory_refused << "\n";
  }
  out << "# HELP somm_tenant_limit Configured limits per tenant (0 = unlimited).\n"
         "# TYPE somm_tenant_limit gauge\n";
  for (const auto& [tenant, s] : states_) {
    const TenantLimits& l = config_.For(tenant);
    const std::string t = Escape(tenant);
    out << "somm_tenant_limit{tenant=\"" << t << "\",limit=\"requests_per_s\"} " << l.requests_per_s
        << "\n"
        << "somm_tenant_limit{tenant=\"" << t << "\",limit=\"max_concurrent\"} " << l.max_concurrent
        << "\n"
        << "somm_tenant_limit{tenant=\"" << t << "\",limit=\"max_private_memory_mb\"} "
        << l.max_private_memory_mb << "\n";
  }
  return out.str();
}

}  // namespace somm::auth
