#include "frontend/grpc/async_unary.h"

#include <pthread.h>

namespace somm::grpc_async {

void CallQueue::Begin() {
  MutexLock lock(&pending_mu_);
  ++pending_;
}

void CallQueue::End() {
  MutexLock lock(&pending_mu_);
  if (--pending_ == 0) idle_.notify_all();
}

void CallQueue::Track(grpc::ClientContext* call) {
  MutexLock lock(&client_mu_);
  client_calls_.insert(call);
}

void CallQueue::Untrack(grpc::ClientContext* call) {
  MutexLock lock(&client_mu_);
  client_calls_.erase(call);
}

void CallQueue::StartThreads(int n, const char* name) {
  for (int i = 0; i < n; ++i) threads_.emplace_back([this, name] { Poll(name); });
}

void CallQueue::Poll(const char* name) {
  pthread_setname_np(pthread_self(), name);
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
