#include "transport/grpc/async_unary.h"

#include <pthread.h>

#include <algorithm>

namespace somm::grpc_async {

void CallQueue::Begin() {
  MutexLock lock(&pending_mu_);
  ++pending_;
}

void CallQueue::End() {
  MutexLock lock(&pending_mu_);
  if (--pending_ == 0) idle_.notify_all();
}

namespace {
// The queue whose thread this is, if it is one.
thread_local const CallQueue* polled_queue = nullptr;

int64_t SteadyNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

bool CallQueue::ClientCallStarted(grpc::ClientContext* call) {
  {
    MutexLock lock(&client_mu_);
    client_calls_.insert(call);
  }
  const bool off_queue = polled_queue != this;
  Started(off_queue);
  return off_queue;
}

void CallQueue::ClientCallEnded(grpc::ClientContext* call, bool started_off_queue) {
  {
    MutexLock lock(&client_mu_);
    client_calls_.erase(call);
  }
  Ended(started_off_queue);
}

void CallQueue::Started(bool off_queue) {
  calls_.fetch_add(1);
  if (off_queue) calls_off_queue_.fetch_add(1);
  if (!Overlapping()) return;
  last_overlap_ns_.store(SteadyNowNs(), std::memory_order_relaxed);
  if (parked_.load() > 0) {
    MutexLock lock(&park_mu_);
    park_cv_.notify_all();
  }
}

void CallQueue::Ended(bool off_queue) {
  if (off_queue) calls_off_queue_.fetch_sub(1);
  calls_.fetch_sub(1);
}

bool CallQueue::Overlapping() const {
  return calls_.load() >= kOverlapFrom || calls_off_queue_.load() > 0;
}

void CallQueue::StartThreads(int n, const char* name) {
  helpers_.fetch_add(std::max(n - 1, 0));
  for (int i = 0; i < n; ++i) {
    threads_.emplace_back([this, name, i] { i == 0 ? Poll(name) : Help(name); });
  }
}

void CallQueue::Help(const char* name) {
  pthread_setname_np(pthread_self(), name);
  polled_queue = this;
  void* tag;
  bool ok;
  while (true) {
    {
      MutexLock lock(&park_mu_);
      // parked_ before the test, as Started counts before it looks
      // (both seq_cst): one of the two sees the other, so no wake is lost.
      parked_.fetch_add(1);
      while (!closing_ && !Overlapping()) park_cv_.wait(park_mu_.native());
      parked_.fetch_sub(1);
    }
    // Back to the park once calls have not overlapped for kLinger: a
    // router under steady REST load keeps its helper on gRPC, as it would
    // be with every thread polling, instead of waking it for each query.
    // The deadline bounds how long that takes when no event comes; while
    // calls overlap it is long, or a helper under slow queries (resnet18's
    // take 20 ms) would wake 500 times a second only to look.
    do {
      const auto deadline =
          std::chrono::system_clock::now() + (Overlapping() ? kOverlapWait : kLinger);
      switch (cq_->AsyncNext(&tag, &ok, deadline)) {
        case grpc::CompletionQueue::SHUTDOWN:
          return;
        case grpc::CompletionQueue::GOT_EVENT:
          static_cast<Tag*>(tag)->Proceed(ok);
          break;
        case grpc::CompletionQueue::TIMEOUT:
          break;
      }
    } while (Overlapping() ||
             SteadyNowNs() - last_overlap_ns_.load(std::memory_order_relaxed) <
                 std::chrono::nanoseconds(kLinger).count());
  }
}

void CallQueue::Poll(const char* name) {
  pthread_setname_np(pthread_self(), name);
  polled_queue = this;
  void* tag;
  bool ok;
  while (cq_->Next(&tag, &ok)) static_cast<Tag*>(tag)->Proceed(ok);
}

void CallQueue::Close() {
  std::call_once(closed_, [this] {
    // The server's Shutdown (before this) let the calls still running answer
    // until its deadline, then cancelled them. A call taken off the queue
    // just before may still be answered after it, and a handler's work may
    // end later still: answers from now on are dropped (OnOpenQueue), and
    // the wait below outlasts the work.
    {
      WriterLock lock(&open_mu_);
      open_ = false;
    }
    // A client call still in flight serves nothing any more (a worker call of
    // a query whose client is gone), and one with no deadline could keep the
    // queue open for ever. Cancelled under the lock, so none is freed
    // meanwhile; each then ends on the queue like any other.
    {
      MutexLock lock(&client_mu_);
      for (grpc::ClientContext* call : client_calls_) call->TryCancel();
    }
    if (cq_) cq_->Shutdown();
    {
      MutexLock lock(&park_mu_);
      closing_ = true;
      park_cv_.notify_all();
    }
    for (std::thread& t : threads_) t.join();
    threads_.clear();
    // Whatever no thread took (none started: the server failed to start).
    void* tag;
    bool ok;
    while (cq_ && cq_->Next(&tag, &ok)) static_cast<Tag*>(tag)->Proceed(ok);
    MutexLock lock(&pending_mu_);
    while (pending_ > 0) idle_.wait(pending_mu_.native());
  });
}

}  // namespace somm::grpc_async
