// The role table: which operations each API key role may call. Tenant
// rules (whose private model) come after this, in auth/guard.cc.
//
//   operation                        admin  user                 metrics
//   server metadata, index,          yes    yes (index and       no
//   decisions                               decisions filtered)
//   model metadata, ready, variants  yes    models it may see    no
//   infer, task infer                yes    models it may use    no
//   register                         yes    private models only  no
//   load, unload                     yes    own private models   no
//   GET /metrics                     yes    no                   yes
//   operator views (overview, ...)   yes    models it may see    no
//   health probes                    need no key
#pragma once

#include "auth/key_store.h"
#include "serving/call_guard.h"

namespace somm::auth {

inline bool RoleAllows(Role role, Operation op) {
  switch (role) {
    case Role::kAdmin:
      return true;
    case Role::kMetrics:
      return op == Operation::kMetrics;
    case Role::kUser:
      return op != Operation::kMetrics;
  }
  return false;
}

}  // namespace somm::auth
