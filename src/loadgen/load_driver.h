// Load drivers: the threads that send queries and time them. The decisions
// (what counts as latency, when a point is done) live in measurement.h and
// stability.h; this file is only mechanism.
//
//   ClosedLoop  N threads, each: send, wait for the answer, send again.
//               A query's scheduled time is when it was sent.
//   OpenLoop    a dispatcher thread releases queries at their planned times
//               (Poisson or a trace) into a FIFO that a pool of sender
//               threads drains. A query that finds every sender busy waits in
//               the FIFO and its latency still counts from its planned time,
//               so a slow server cannot slow the offered load down
//               (no coordinated omission).
//
// Every finished query becomes a QueryRecord in a RecordSink, which the
// measuring thread drains window by window. All times are NowNs().
//
// Ownership and threads: a driver borrows its ClientFactory, requests and
// sink, which must outlive it. Start, Stop and WaitUntilDone are called from
// one controlling thread; the destructor Stops. RecordSink is thread-safe.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "loadgen/bench_client.h"
#include "loadgen/measurement.h"
#include "common/status.h"
#include "api/inference.h"

namespace somm::loadgen {

// Monotonic nanoseconds (steady_clock).
int64_t NowNs();

class RecordSink {
 public:
  void Add(QueryRecord record);
  // Everything added since the last Drain, in no particular order.
  std::vector<QueryRecord> Drain();

 private:
  std::mutex mu_;
  std::vector<QueryRecord> records_;  // guarded by mu_
};

// Sends one query and times it; never fails (errors become the record's code).
// scheduled_ns nullopt = scheduled when sent (closed loop).
QueryRecord SendQuery(BenchClient& client, const InferenceRequest& request,
                      std::optional<int64_t> scheduled_ns, std::optional<double> slo_ms);

class ClosedLoop {
 public:
  // Thread i sends requests[i % size], then the next one round-robin, so a
  // single request is the common case and a list warms several models.
  ClosedLoop(ClientFactory* factory, std::vector<const InferenceRequest*> requests, int concurrency,
             RecordSink* sink);
  ~ClosedLoop();
  ClosedLoop(const ClosedLoop&) = delete;
  ClosedLoop& operator=(const ClosedLoop&) = delete;

  // Makes every client first, so a failure starts no thread.
  Status Start();
  // Lets each thread finish its query in flight (recorded), then joins.
  void Stop();

 private:
  ClientFactory* factory_;
  std::vector<const InferenceRequest*> requests_;
  int concurrency_;
  RecordSink* sink_;
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
};

// One query of an open-loop schedule.
struct PlannedQuery {
  int64_t offset_ns = 0;  // planned arrival, from the driver's origin
  const InferenceRequest* request = nullptr;
  std::optional<double> slo_ms;
};

// Called on the dispatcher thread for the next query, in non-decreasing
// offset order; nullopt ends the schedule.
using ArrivalSource = std::function<std::optional<PlannedQuery>()>;

class OpenLoop {
 public:
  OpenLoop(ClientFactory* factory, ArrivalSource source, int senders, RecordSink* sink);
  ~OpenLoop();
  OpenLoop(const OpenLoop&) = delete;
  OpenLoop& operator=(const OpenLoop&) = delete;

  // Makes every sender's client, starts the senders, then fixes the origin
  // (now) and starts the dispatcher.
  Status Start();
  int64_t origin_ns() const { return origin_ns_; }
  // Stops releasing queries, drops those still waiting for a sender (they
  // are not recorded), lets queries in flight finish (recorded), joins.
  void Stop();
  // Waits until the source is exhausted and every released query answered.
  void WaitUntilDone();

 private:
  void Dispatch();
  void Serve(BenchClient* client);
  void Join();

  ClientFactory* factory_;
  ArrivalSource source_;
  int senders_;
  RecordSink* sink_;
  int64_t origin_ns_ = 0;

  std::mutex mu_;
  // Two condition variables so that releasing one query wakes one sender
  // (notify_one) and can never be swallowed by the dispatcher's own wait.
  std::condition_variable ready_cv_;     // senders: a query is ready, or stop/exhausted
  std::condition_variable dispatch_cv_;  // dispatcher: stop
  std::deque<PlannedQuery> ready_;       // released, waiting for a sender; guarded by mu_
  bool stop_ = false;                    // guarded by mu_
  bool exhausted_ = false;               // the source ended; guarded by mu_

  std::vector<std::unique_ptr<BenchClient>> clients_;
  std::thread dispatcher_;
  std::vector<std::thread> threads_;
};

}  // namespace somm::loadgen
