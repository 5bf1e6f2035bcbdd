// HoldingInferenceServer: a FakeInferenceServer (fake_inference_server.h)
// that holds every query it is given until the test calls Release(), then
// answers each as the fake does. A request stays in flight for exactly as
// long as a test needs, with no sleeps: what the frontends' overload tests
// need. Test-only.
//
// Thread-safety: every method may be called concurrently.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <utility>
#include <vector>

#include "api/testing/fake_inference_server.h"

namespace somm::testing {

class HoldingInferenceServer : public FakeInferenceServer {
 public:
  void Infer(InferenceRequest request, InferCallback done) override {
    std::lock_guard lock(hold_mu_);
    held_.emplace_back(std::move(request), std::move(done));
    hold_cv_.notify_all();
  }
  // Whether `n` queries are held within 10 s.
  bool WaitHeld(size_t n) {
    std::unique_lock lock(hold_mu_);
    return hold_cv_.wait_for(lock, std::chrono::seconds(10), [&] { return held_.size() >= n; });
  }
  // Answers every held query, on the caller's thread (or the fake's own
  // with inline_callback off).
  void Release() {
    std::vector<std::pair<InferenceRequest, InferCallback>> held;
    {
      std::lock_guard lock(hold_mu_);
      held.swap(held_);
    }
    for (auto& [request, done] : held) FakeInferenceServer::Infer(std::move(request), done);
  }
  size_t held() {
    std::lock_guard lock(hold_mu_);
    return held_.size();
  }

 private:
  std::mutex hold_mu_;
  std::condition_variable hold_cv_;
  std::vector<std::pair<InferenceRequest, InferCallback>> held_;
};

}  // namespace somm::testing
