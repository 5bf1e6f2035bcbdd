#include "common/serial_executor.h"

#include <pthread.h>

namespace somm {

SerialExecutor::SerialExecutor(std::string name) : name_(std::move(name)) {
  thread_ = std::thread([this] { Run(); });
}

SerialExecutor::~SerialExecutor() { Shutdown(); }

bool SerialExecutor::Post(std::function<void()> work) {
  {
    MutexLock lock(&mu_);
    if (stopping_) return false;
    queue_.push_back(std::move(work));
  }
  cv_.notify_one();
  return true;
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
