// CallGuard: the one question a protocol frontend asks before it serves a
// call: who is calling, and may they? auth/ implements it (API keys, roles,
// tenants, quotas, the audit log); frontends only see this interface, so they
// stay free of OpenSSL and of the key store.
//
// Contract:
//   * A frontend may call Authenticate() as soon as it has a call's head
//     (REST) or metadata (gRPC), before any of its body is read, and carries
//     the VerifiedKey it returns into Admit (CallInfo::verified), so a call's
//     key is verified once. A refusal there is answered at once, and
//     audited as Admit's are.
//   * A frontend calls Admit() once per call, before it decodes anything
//     expensive when it can, with the Authorization value as received
//     ("Bearer <key>", "" when absent). A refused call is answered with the
//     returned Status (UNAUTHENTICATED, PERMISSION_DENIED, NOT_FOUND for a
//     model the caller may not see, RESOURCE_EXHAUSTED with retry_after_s).
//   * An admitted call is ended with exactly one Done(), from any thread,
//     with its outcome: that frees its concurrency slot and writes the audit
//     line of a repository change.
//   * MaySee() filters lists (the repository index) by the same rule.
//   * Health probes are never guarded: frontends answer them first.
//   * Every method is thread-safe; the guard must outlive the frontends.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"
#include "api/caller.h"

namespace somm {

enum class Operation {
  kServerMetadata,
  kModelMetadata,  // also model ready and a model's variants
  kInfer,
  kTaskInfer,
  kIndex,
  kDecisions,
  kLoad,
  kUnload,
  kRegister,
  kRollout,  // a canary's start, step, promotion or rollback: as a load
  kMetrics,
  kOperator,  // the operator's views (overview, workers, actions): admin only
};

const char* OperationName(Operation op);

// A key Authenticate() verified: who it names, and its role in the guard's
// own terms (auth/roles.h), which frontends only carry back to Admit.
struct VerifiedKey {
  Caller caller;  // unauthenticated when the guard asks for no key
  int guard_role = 0;
};

struct CallInfo {
  Operation op = Operation::kServerMetadata;
  std::string model;           // "" when the call names none
  std::string authorization;   // the Authorization header or metadata value
  bool private_model = false;  // a registration that asks for a private model
  size_t payload_bytes = 0;    // a registration's model file size
  // What Authenticate() returned for this very call's Authorization value:
  // Admit takes the caller from it instead of verifying the key again (a
  // key revoked between the two is not looked for within one call). Null =
  // Admit verifies the key itself. Must outlive the Admit call.
  const VerifiedKey* verified = nullptr;
};

struct Admission {
  Status status;  // OK = admitted
  Caller caller;  // meaningful when admitted
  // With RESOURCE_EXHAUSTED from a rate limit: when a retry may succeed
  // (REST Retry-After), in whole seconds.
  int retry_after_s = 0;
};

class CallGuard {
 public:
  virtual ~CallGuard() = default;
  // Whether the Authorization value names a valid key whose role may call
  // `op` (nullopt: any key), and nothing else (no tenant or quota rule):
  // what a frontend asks as soon as a request's head or metadata is read,
  // so that an unknown caller's body is never read or decoded. `target`
  // (the model or path) only names the call in the audit record of a
  // refusal. An unauthenticated VerifiedKey without authentication.
  virtual StatusOr<VerifiedKey> Authenticate(const std::string& authorization,
                                             std::optional<Operation> op, std::string_view target) {
    return VerifiedKey{};
  }
  virtual Admission Admit(const CallInfo& call) = 0;
  // Whether `caller`'s tenant has room in its memory quota for a private
  // model `model` whose instances take `bytes` in all, beside what its
  // private models take already: what a registration asks once its probe
  // has measured the model (RegistrationRequest::admit_private_memory). OK
  // without authentication or a quota.
  virtual Status AdmitPrivateMemory(const Caller& caller, const std::string& model, int64_t bytes) {
    return Status::Ok();
  }
  virtual void Done(const Caller& caller, const CallInfo& call, const Status& outcome) = 0;
  virtual bool MaySee(const Caller& caller, const std::string& model) = 0;
};

inline const char* OperationName(Operation op) {
  switch (op) {
    case Operation::kServerMetadata:
      return "server_metadata";
    case Operation::kModelMetadata:
      return "model_metadata";
    case Operation::kInfer:
      return "infer";
    case Operation::kTaskInfer:
      return "task_infer";
    case Operation::kIndex:
      return "index";
    case Operation::kDecisions:
      return "decisions";
    case Operation::kLoad:
      return "load";
    case Operation::kUnload:
      return "unload";
    case Operation::kRegister:
      return "register";
    case Operation::kRollout:
      return "rollout";
    case Operation::kMetrics:
      return "metrics";
    case Operation::kOperator:
      return "operator";
  }
  return "unknown";
}

}  // namespace somm
