// OneKeyGuard: a CallGuard that knows one key, "good" (sent as "Bearer
// good"), and counts the calls that reach its full admission, so a test can
// tell a refusal from the head or metadata alone (Authenticate) from one
// made after the request was read (Admit). Test-only.
#pragma once

#include <atomic>
#include <string>

#include "serving/call_guard.h"

namespace somm::testing {

class OneKeyGuard : public CallGuard {
 public:
  std::atomic<int> admitted{0};
  Status Authenticate(const std::string& authorization) override {
    return authorization == "Bearer good" ? Status::Ok() : Unauthenticated("unknown API key");
  }
  Admission Admit(const CallInfo& call) override {
    ++admitted;
    Admission a;
    a.status = Authenticate(call.authorization);
    a.caller.authenticated = a.status.ok();
    return a;
  }
  void Done(const Caller&, const CallInfo&, const Status&) override {}
  bool MaySee(const Caller&, const std::string&) override { return true; }
};

}  // namespace somm::testing
