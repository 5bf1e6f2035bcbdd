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
  std::atomic<int> authenticated{0};  // keys verified, early or in Admit
  StatusOr<VerifiedKey> Authenticate(const std::string& authorization, std::optional<Operation>,
                                     std::string_view) override {
    ++authenticated;
    if (authorization != "Bearer good") return Unauthenticated("unknown API key");
    VerifiedKey verified;
    verified.caller.authenticated = true;
    return verified;
  }
  Admission Admit(const CallInfo& call) override {
    ++admitted;
    Admission a;
    if (call.verified != nullptr) {
      a.caller = call.verified->caller;
      return a;
    }
    StatusOr<VerifiedKey> verified = Authenticate(call.authorization, call.op, call.model);
    a.status = verified.status();
    if (verified.ok()) a.caller = verified->caller;
    return a;
  }
  void Done(const Caller&, const CallInfo&, const Status&) override {}
  bool MaySee(const Caller&, const std::string&) override { return true; }
};

}  // namespace somm::testing
