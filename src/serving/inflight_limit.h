// InflightLimit: the server's bound on inference requests in flight, the
// check a protocol frontend makes before it decodes a request's body.
//
// Under overload the expensive part of a refusal is the work done before it:
// reading a body is unavoidable, but decoding its tensors and routing the
// query are not. A frontend takes a Slot for each inference request right
// after matching its path (REST) or method (gRPC); when `limit` requests hold
// one, it answers at once with Refusal() (HTTP 429 with Retry-After /
// RESOURCE_EXHAUSTED) and never decodes the body. A request holds its slot
// until its answer is ready and gives it back before the answer is sent, so
// the bound covers decoding, queueing and compute, a client that has its
// answer finds the slot free, and the first answer after a burst makes room
// for the next request: recovery needs no timer.
//
// One InflightLimit is shared by the REST and gRPC frontends of a process
// (`somm serve --max-inflight`), like Ray Serve's max_ongoing_requests for a
// whole server rather than a replica. It is a concurrency bound only; the
// batchers' SLO admission still refuses a query that would miss its deadline.
//
// Every refusal is counted in somm_shed_total{protocol,reason="inflight"}
// (metrics/serving_metrics.h) and in shed().
//
// Thread-safety: every method may be called from any thread; a Slot may be
// moved to and released on another thread. The limit must outlive its slots
// and the frontends that borrow it.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <utility>

#include "common/status.h"
#include "metrics/serving_metrics.h"

namespace somm {

class InflightLimit {
 public:
  struct Options {
    // Inference requests admitted at once; 0 = no bound (slots only count).
    int64_t max_inflight = 0;
    // What a refused REST client is told to wait (Retry-After), in seconds.
    int retry_after_s = 1;
    // Where refusals are counted; null = only in shed(). Must outlive this.
    ServingMetrics* metrics = nullptr;
  };

  // Held by one admitted request; releases its place when destroyed or
  // Release()d, once.
  class Slot {
   public:
    Slot() = default;
    Slot(Slot&& other) noexcept : limit_(std::exchange(other.limit_, nullptr)) {}
    Slot& operator=(Slot&& other) noexcept {
      if (this != &other) {
        Release();
        limit_ = std::exchange(other.limit_, nullptr);
      }
      return *this;
    }
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;
    ~Slot() { Release(); }

    void Release() {
      if (limit_ != nullptr) std::exchange(limit_, nullptr)->inflight_.fetch_sub(1);
    }
    bool held() const { return limit_ != nullptr; }

   private:
    friend class InflightLimit;
    explicit Slot(InflightLimit* limit) : limit_(limit) {}
    InflightLimit* limit_ = nullptr;
  };

  explicit InflightLimit(Options options) : options_(options) {}
  InflightLimit(const InflightLimit&) = delete;
  InflightLimit& operator=(const InflightLimit&) = delete;

  // A held slot, or an empty one (and the refusal counted under `protocol`,
  // "rest" or "grpc") when max_inflight requests hold one already.
  Slot TryAcquire(const char* protocol) {
    const int64_t before = inflight_.fetch_add(1);
    if (options_.max_inflight > 0 && before >= options_.max_inflight) {
      inflight_.fetch_sub(1);
      shed_.fetch_add(1);
      if (options_.metrics != nullptr) options_.metrics->RecordShed(protocol, "inflight");
      return Slot();
    }
    return Slot(this);
  }

  // The answer to a refused request: RESOURCE_EXHAUSTED naming the bound.
  Status Refusal() const {
    return ResourceExhausted("server overloaded: " + std::to_string(options_.max_inflight) +
                             " inference requests in flight, its limit (max_inflight); retry "
                             "after " +
                             std::to_string(options_.retry_after_s) + " s");
  }

  int retry_after_s() const { return options_.retry_after_s; }
  int64_t max_inflight() const { return options_.max_inflight; }
  int64_t inflight() const { return inflight_.load(); }
  int64_t shed() const { return shed_.load(); }

 private:
  const Options options_;
  std::atomic<int64_t> inflight_{0};
  std::atomic<int64_t> shed_{0};
};

}  // namespace somm
