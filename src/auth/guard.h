// Guard: somm's CallGuard (serving/call_guard.h). Per call it authenticates
// the API key (auth/key_store.h), applies the role table (auth/roles.h) and
// the tenant rules, takes the tenant's quota (auth/quota.h), and writes the
// audit record of a repository change (auth/audit_log.h).
//
// Tenant rules (docs/security.md): a model whose model.yaml names
// `owner_tenant` is private to that tenant. A user key's call that names a
// model - metadata, ready, variants, rollout, infer, load, unload - is
// checked first, before its version, body or parameters: a model the caller
// may not see, or one that does not exist, gets the very NOT_FOUND an
// unknown model gets, so existence is not revealed; the index leaves it out
// (MaySee). A registration over a hidden name is answered as one of a new
// name (ModelRegistrar::Register). Task queries are checked by the router,
// which has the configs in memory (InferenceRequest::caller). The owner
// comes from the registry in memory (SetOwnerLookup), else from the
// repository's model.yaml.
//
// With AuthMode::kNone every call is admitted as an unauthenticated Caller
// (today's behaviour, loopback only: CheckListenAddress), quotas do not
// apply, and repository changes are still audited.
//
// Thread-safety: every method may be called concurrently.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "auth/audit_log.h"
#include "auth/key_store.h"
#include "auth/quota.h"
#include "common/clock.h"
#include "common/mutex.h"
#include "crypto/tls_files.h"
#include "serving/call_guard.h"

namespace somm::auth {

enum class AuthMode { kNone, kKeys };

StatusOr<AuthMode> ParseAuthMode(const std::string& text);

// Whether `address` (a literal, or "localhost") is a loopback one.
bool IsLoopback(const std::string& address);

// What a worker or a controller must have to listen beyond loopback: mutual
// TLS on its service port (only the cluster's own certificates may call
// it), and a key file for its /metrics (a metrics or admin key).
Status CheckClusterListenAddress(const std::string& address, const crypto::TlsServerFiles& tls,
                                 const std::string& keys_file);

// Refuses `--auth none` on an address beyond loopback, with a message that
// names --auth and `somm keys`.
Status CheckListenAddress(AuthMode mode, const std::string& address, const std::string& flag);

struct GuardOptions {
  AuthMode mode = AuthMode::kNone;
  // The model repository: model owners, and the default files below.
  std::string repository;
  // Where the files below are by default: "" = <repo>/.somm (a router with
  // no repository mounted names its own, --state-dir).
  std::string state_dir;
  std::string keys_path;         // "" = <state_dir>/keys
  std::string tenants_path;      // "" = <state_dir>/tenants.yaml (read at start)
  std::string audit_path;        // "" = <state_dir>/audit.log
  const Clock* clock = nullptr;  // null = Clock::Real()
};

class Guard : public CallGuard {
 public:
  // Fails on a malformed tenants.yaml.
  static StatusOr<std::unique_ptr<Guard>> Create(GuardOptions options);
  // What `somm serve` and `somm router` do with their flags: parses --auth,
  // refuses `none` beyond loopback, and creates the guard for `repository`
  // ("" = none mounted) with its files in `state_dir` ("" = <repo>/.somm).
  // `keys_file` "" = <state_dir>/keys.
  static StatusOr<std::unique_ptr<Guard>> ForServer(const std::string& auth_flag,
                                                    const std::string& address,
                                                    const std::string& repository,
                                                    const std::string& keys_file,
                                                    const std::string& state_dir = "");

  // Where a model's owner comes from first: the registry's view of the
  // model (a cluster's router builds it from the leader's catalog, and in
  // Kubernetes has no repository mounted); nullopt when the registry does
  // not know the model, and then the repository's model.yaml is read. Set
  // once, before the server takes calls.
  using OwnerLookup = std::function<std::optional<std::string>(const std::string& model)>;
  void SetOwnerLookup(OwnerLookup lookup) { owner_lookup_ = std::move(lookup); }

  // GET /metrics on the metrics port: OK for an admin or metrics key.
  Status AdmitMetrics(const std::string& authorization);

  StatusOr<VerifiedKey> Authenticate(const std::string& authorization, std::optional<Operation> op,
                                     std::string_view target) override;
  Admission Admit(const CallInfo& call) override;
  Status AdmitPrivateMemory(const Caller& caller, const std::string& model, int64_t bytes) override;
  void Done(const Caller& caller, const CallInfo& call, const Status& outcome) override;
  bool MaySee(const Caller& caller, const std::string& model) override;

  // Writes one record to the audit log (what other components audit through
  // the guard: batch jobs' submissions, cancellations and ends).
  void Audit(const AuditEvent& event) { audit_.Record(event); }

  // The per-tenant quota metrics, appended to /metrics.
  std::string MetricsText() const;
  AuthMode mode() const { return options_.mode; }

 private:
  struct Ownership {
    bool exists = false;    // the model's folder is in the repository
    bool readable = false;  // its model.yaml parsed
    std::string owner;      // "" = public
  };
  Guard(GuardOptions options, QuotaConfig quotas);
  Admission Decide(const CallInfo& call);
  // The key an Authorization value ("Bearer <key>") carries, verified.
  StatusOr<KeyRecord> KeyOf(std::string_view authorization);
  // Writes the audit record of a refused call when it is one the log keeps:
  // any refusal for want of a valid key (at a bounded rate, below) or of a
  // role, whatever the operation, and every refused repository change.
  // `action` and `target` name the call.
  void AuditRefusal(const Caller& caller, Operation op, const char* action, std::string_view target,
                    const Status& refusal);
  Ownership OwnerOf(const std::string& model) const;
  bool Visible(const Caller& caller, const Ownership& o) const;
  // The memory `tenant`'s private models in the repository are charged:
  // per version, its measured peak (repository/measured_memory.h), else its
  // model.pt's size, times the model's instance_count.
  int64_t PrivateBytes(const std::string& tenant) const;
  Status CheckTenantRules(const Caller& caller, const CallInfo& call);
  Status CheckRegistration(const Caller& caller, const CallInfo& call);

  // Whether a refused call without a valid key may be audited now: at most
  // kAnonymousAuditPerS a second (burst kAnonymousAuditBurst), so nobody
  // can grow the audit log without limit; the ones left out are counted in
  // a record of their own.
  bool AdmitAnonymousRecord();
  static constexpr double kAnonymousAuditPerS = 10;
  static constexpr double kAnonymousAuditBurst = 20;

  const GuardOptions options_;
  OwnerLookup owner_lookup_;
  Mutex anonymous_mu_;
  double anonymous_tokens_ SOMM_GUARDED_BY(anonymous_mu_) = kAnonymousAuditBurst;
  double anonymous_refill_s_ SOMM_GUARDED_BY(anonymous_mu_) = 0;
  int64_t anonymous_suppressed_ SOMM_GUARDED_BY(anonymous_mu_) = 0;
  KeyStore keys_;
  TenantQuotas quotas_;
  AuditLog audit_;
};

}  // namespace somm::auth
