// Caller: who made a call, as the frontend's CallGuard (serving/call_guard.h)
// established it. It travels with a query (InferenceRequest::caller), so the
// router can keep a task query's candidates to the models the caller may use
// and tag its decisions with the caller's tenant.
//
// A server without authentication (`--auth none`) admits every call as an
// unauthenticated Caller, which may use every model: today's behaviour.
#pragma once

#include <string>

namespace somm {

struct Caller {
  // False without authentication: every model is usable, every decision visible.
  bool authenticated = false;
  std::string key_id;  // the API key's public id, never the key
  std::string tenant;
  bool admin = false;

  // Whether this caller may use (see, query, load) a model owned by
  // `owner_tenant` ("" = a public model).
  bool MayUse(const std::string& owner_tenant) const {
    return !authenticated || admin || owner_tenant.empty() || owner_tenant == tenant;
  }
  // Whether this caller may see a decision made for `decision_tenant`.
  bool MaySeeDecision(const std::string& decision_tenant) const {
    return !authenticated || admin || decision_tenant == tenant;
  }
};

}  // namespace somm
