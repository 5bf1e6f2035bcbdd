// CallGuard: the one question a protocol frontend asks before it serves a
// call: who is calling, and may they? auth/ implements it (API keys, roles,
// tenants, quotas, the audit log); frontends only see this interface, so they
// stay free of OpenSSL and of the key store.
//
// Contract:
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
#include <string>

#include "common/status.h"
#include "serving/caller.h"

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

struct CallInfo {
  Operation op = Operation::kServerMetadata;
  std::string model;           // "" when the call names none
  std::string authorization;   // the Authorization header or metadata value
  bool private_model = false;  // a registration that asks for a private model
  size_t payload_bytes = 0;    // a registration's model file size
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
  // Whether the Authorization value names a valid key, and nothing else (no
  // role, tenant or quota rule): what a frontend asks as soon as a
  // request's head is read, so that an unknown caller's body is never read
  // or decoded. OK without authentication.
  virtual Status Authenticate(const std::string& authorization) { return Status::Ok(); }
  virtual Admission Admit(const CallInfo& call) = 0;
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
