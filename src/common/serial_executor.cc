#include "common/serial_executor.h"

#include <pthread.h>

namespace somm {

SerialExecutor::SerialExecutor(std::string name, size_t max_queued)
    : name_(std::move(name)), max_queued_(max_queued) {
  thread_ = std::thread([this] { Run(); });
}

SerialExecutor::~SerialExecutor() { Shutdown(); }

SerialExecutor::Posted SerialExecutor::TryPost(std::function<void()> work) {
  {
    MutexLock lock(&mu_);
    if (stopping_) return Posted::kStopped;
    if (max_queued_ > 0 && queue_.size() >= max_queued_) return Posted::kFull;
    queue_.push_back(std::move(work));
  }
  cv_.notify_one();
  return Posted::kQueued;
}

void SerialExecutor::Shutdown() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

void SerialExecutor::Run() {
  pthread_setname_np(pthread_self(), name_.substr(0, 15).c_str());
  for (;;) {
    std::function<void()> work;
    {
      MutexLock lock(&mu_);
      while (queue_.empty() && !stopping_) cv_.wait(mu_.native());
      if (queue_.empty()) return;  // stopping, and everything posted has run
      work = std::move(queue_.front());
      queue_.pop_front();
    }
    work();
  }
}

}  // namespace somm
