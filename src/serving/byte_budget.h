// ByteBudget: the server's bound on the bytes its requests hold at once,
// request bodies and decoded tensors of all callers together.
//
// --max-inflight bounds how many inference requests are in flight, and
// --max-body-bytes how large each body is; neither bounds their product,
// which is what a burst of concurrent maximum-size bodies costs in memory.
// A frontend reserves a request's bytes before it holds them: REST the
// body's declared length as soon as its head is parsed and its caller known,
// before a byte of the body is read; gRPC, whose message's size is known
// only once it is read whole, the largest message a call may send
// (--max-body-bytes) as soon as its metadata is checked, before the message
// is read, shrunk to the message's size when it arrives (ShrinkTo); both
// the decoded tensors' bytes once they are decoded. A request that would
// take the bytes in flight past the budget is answered at once (HTTP 429 with
// Retry-After, gRPC RESOURCE_EXHAUSTED) with Refusal()'s message, and its
// body is not read or its message not decoded. A request holds its
// reservations until its answer is ready and gives them back before the
// answer is sent, so recovery needs no timer.
//
// One ByteBudget is shared by the REST and gRPC frontends of a process
// (`somm serve --max-inflight-bytes`, `somm router --max-inflight-bytes`).
// max_bytes 0 only counts: every reservation is granted.
//
// Every refusal is counted in somm_shed_total{protocol,reason="bytes"} and
// in refused(); the bytes held, in somm_inflight_bytes (metrics/serving_metrics.h).
//
// Thread-safety: every method may be called from any thread; a Reservation
// may be moved to and released on another thread. The budget must outlive
// its reservations and the frontends that borrow it.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <string>
#include <utility>

#include "common/status.h"
#include "metrics/serving_metrics.h"

namespace somm {

class ByteBudget {
 public:
  struct Options {
    // Bytes held at once by all requests; 0 = no bound (reservations only
    // count).
    int64_t max_bytes = 0;
    // What a refused REST client is told to wait (Retry-After), in seconds.
    int retry_after_s = 1;
    // Where refusals and the bytes held are recorded; null = only here.
    // Must outlive this.
    ServingMetrics* metrics = nullptr;
  };

  // Bytes one request holds; gives them back when destroyed or Release()d,
  // once. An empty Reservation holds nothing.
  class Reservation {
   public:
    Reservation() = default;
    Reservation(Reservation&& other) noexcept
        : budget_(std::exchange(other.budget_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
    Reservation& operator=(Reservation&& other) noexcept {
      if (this != &other) {
        Release();
        budget_ = std::exchange(other.budget_, nullptr);
        bytes_ = std::exchange(other.bytes_, 0);
      }
      return *this;
    }
    Reservation(const Reservation&) = delete;
    Reservation& operator=(const Reservation&) = delete;
    ~Reservation() { Release(); }

    void Release() {
      if (budget_ != nullptr) std::exchange(budget_, nullptr)->Give(std::exchange(bytes_, 0));
    }
    int64_t bytes() const { return bytes_; }
    // Keeps `bytes` of what is held, giving back the rest; holding fewer
    // already, nothing changes (what was reserved is the most it holds).
    // How a reservation made before a size was known (the largest a gRPC
    // message may be) becomes the size that came.
    void ShrinkTo(int64_t bytes) {
      if (budget_ == nullptr || bytes >= bytes_) return;
      budget_->Give(bytes_ - std::max<int64_t>(bytes, 0));
      bytes_ = std::max<int64_t>(bytes, 0);
    }

   private:
    friend class ByteBudget;
    Reservation(ByteBudget* budget, int64_t bytes) : budget_(budget), bytes_(bytes) {}
    ByteBudget* budget_ = nullptr;
    int64_t bytes_ = 0;
  };

  explicit ByteBudget(Options options) : options_(options) {}
  ByteBudget(const ByteBudget&) = delete;
  ByteBudget& operator=(const ByteBudget&) = delete;

  // `bytes` (negative counts as 0) reserved, or Refusal() (and the refusal
  // counted under `protocol`, "rest" or "grpc", unless `count_refusal` is
  // false: a caller that will ask again) when they would take the bytes in
  // flight past max_bytes.
  StatusOr<Reservation> Reserve(int64_t bytes, const char* protocol, bool count_refusal = true) {
    if (bytes < 0) bytes = 0;
    int64_t before = held_.load();
    do {
      if (options_.max_bytes > 0 && before + bytes > options_.max_bytes) {
        if (count_refusal) {
          refused_.fetch_add(1);
          if (options_.metrics != nullptr) options_.metrics->RecordShed(protocol, "bytes");
        }
        return Refusal(bytes, before);
      }
    } while (!held_.compare_exchange_weak(before, before + bytes));
    int64_t peak = peak_.load();
    while (before + bytes > peak && !peak_.compare_exchange_weak(peak, before + bytes)) {
    }
    if (options_.metrics != nullptr && bytes > 0) options_.metrics->AddInflightBytes(bytes);
    return Reservation(this, bytes);
  }

  // The refusal of a request of `bytes` (negative: not known yet) when
  // `held` bytes are in flight.
  Status Refusal(int64_t bytes, int64_t held) const {
    return ResourceExhausted(
        "server busy: request bodies and tensors in flight hold " + Mib(held) + " of the " +
        Mib(options_.max_bytes) + " it allows (max_inflight_bytes)" +
        (bytes >= 0 ? "; this request needs " + Mib(bytes) : std::string()) + "; retry after " +
        std::to_string(options_.retry_after_s) + " s");
  }
  Status Refusal(int64_t bytes) const { return Refusal(bytes, held_.load()); }

  int retry_after_s() const { return options_.retry_after_s; }
  int64_t max_bytes() const { return options_.max_bytes; }
  int64_t held() const { return held_.load(); }
  // The most bytes held at once since the budget was made.
  int64_t peak() const { return peak_.load(); }
  int64_t refused() const { return refused_.load(); }

  // The budget `--max-inflight-bytes flag` asks for: 0 = no bound; a
  // negative flag (its default) = a quarter of `memory_budget_bytes` (the
  // instances' budget, cluster/memory_budget.h's DefaultMemoryBudget: half
  // the memory free at start), and room for kDefaultMessagesAtLeast
  // maximum-size bodies at least: each gRPC call holds room for one while
  // its message is received (with room for 2, 16 concurrent small calls ran
  // at 0.55 of their throughput unbounded; with 8, at 1.0). InvalidArgument
  // for a bound below max_body_bytes, which no maximum-size body would ever
  // fit.
  static constexpr int64_t kDefaultMessagesAtLeast = 8;
  static StatusOr<int64_t> FromFlag(int64_t flag, int64_t memory_budget_bytes,
                                    int64_t max_body_bytes) {
    if (flag < 0) {
      return std::max(memory_budget_bytes / 4, kDefaultMessagesAtLeast * max_body_bytes);
    }
    if (flag > 0 && flag < max_body_bytes) {
      return InvalidArgument("--max-inflight-bytes " + std::to_string(flag) +
                             " is below --max-body-bytes " + std::to_string(max_body_bytes) +
                             ": a body of the largest size allowed would never fit (0 = no bound)");
    }
    return flag;
  }

  // "12.5 MiB": how refusals name sizes.
  static std::string Mib(int64_t bytes) {
    const int64_t tenths = (bytes * 10 + (1 << 19)) >> 20;
    return std::to_string(tenths / 10) + "." + std::to_string(tenths % 10) + " MiB";
  }

 private:
  void Give(int64_t bytes) {
    held_.fetch_sub(bytes);
    if (options_.metrics != nullptr && bytes > 0) options_.metrics->AddInflightBytes(-bytes);
  }

  const Options options_;
  std::atomic<int64_t> held_{0};
  std::atomic<int64_t> refused_{0};
  std::atomic<int64_t> peak_{0};
};

}  // namespace somm
