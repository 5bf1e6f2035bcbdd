// TenantQuotas: per-tenant limits on queries and on private models.
//
//   * request rate: a token bucket per tenant (requests_per_s, burst); a
//     query that finds it empty is refused with RESOURCE_EXHAUSTED and the
//     seconds until a token is back (REST Retry-After);
//   * concurrent queries: at most max_concurrent in flight per tenant;
//   * private-model memory: the bytes of the tenant's private models' files
//     (what their instances hold, near enough for TorchScript) may not pass
//     max_private_memory_mb when it registers or loads one.
//
// Limits come from <repo>/.somm/tenants.yaml (docs/security.md):
//   default: {requests_per_s: 100, burst: 200, max_concurrent: 16,
//             max_private_memory_mb: 1024}
//   tenants:
//     team-a: {requests_per_s: 500}
// A tenant's entry overrides only the fields it names; 0 = unlimited, and a
// missing file limits nothing. The policy is a pure function of the counts
// and the clock (passed in), so tests drive it with a ManualClock.
//
// Thread-safety: every method may be called concurrently (mu_ guards the
// per-tenant state; held only for arithmetic).
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "common/clock.h"
#include "common/mutex.h"
#include "common/status.h"

namespace somm::auth {

struct TenantLimits {
  double requests_per_s = 0;          // 0 = unlimited
  double burst = 0;                   // bucket size; 0 = max(requests_per_s, 1)
  int64_t max_concurrent = 0;         // 0 = unlimited
  int64_t max_private_memory_mb = 0;  // 0 = unlimited
};

struct QuotaConfig {
  TenantLimits defaults;
  std::map<std::string, TenantLimits> tenants;
  const TenantLimits& For(const std::string& tenant) const;
};

StatusOr<QuotaConfig> ParseQuotaConfig(const std::string& yaml_text, const std::string& source);
// A missing file is the empty config (no limits).
StatusOr<QuotaConfig> LoadQuotaConfig(const std::string& path);
// <repo>/.somm/tenants.yaml
std::string DefaultQuotaPath(const std::string& repository);

// "12.5 MiB": how quota refusals name sizes.
std::string MibText(int64_t bytes);

class TenantQuotas {
 public:
  // `clock` must outlive this.
  TenantQuotas(QuotaConfig config, const Clock& clock);

  // Admits one query of `tenant`: takes a token and a concurrency slot, or
  // refuses with RESOURCE_EXHAUSTED (*retry_after_s set for the rate limit).
  // An admitted query must be released once with Release().
  Status Acquire(const std::string& tenant, int* retry_after_s) SOMM_EXCLUDES(mu_);
  void Release(const std::string& tenant) SOMM_EXCLUDES(mu_);

  // Whether `tenant` may hold `private_bytes` of private models; notes the
  // figure for the metrics either way.
  Status CheckPrivateMemory(const std::string& tenant, int64_t private_bytes) SOMM_EXCLUDES(mu_);

  // Prometheus text exposition of the per-tenant counters and limits
  // (somm_tenant_*), appended to /metrics.
  std::string MetricsText() const SOMM_EXCLUDES(mu_);

 private:
  struct State {
    double tokens = -1;  // < 0 = not yet filled
    Clock::TimePoint refilled;
    int64_t inflight = 0;
    int64_t admitted = 0;
    int64_t rate_limited = 0;
    int64_t concurrency_limited = 0;
    int64_t memory_refused = 0;
    int64_t private_bytes = 0;
  };

  const QuotaConfig config_;
  const Clock& clock_;
  mutable Mutex mu_;
  std::map<std::string, State> states_ SOMM_GUARDED_BY(mu_);
};

}  // namespace somm::auth
