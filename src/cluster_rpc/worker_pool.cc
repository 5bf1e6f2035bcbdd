#include "cluster_rpc/worker_pool.h"

#include <utility>

namespace somm {

GrpcWorkerPool::GrpcWorkerPool(Provider provider, GrpcWorkerPoolOptions options)
    : provider_(std::move(provider)), options_(std::move(options)) {}

void GrpcWorkerPool::UseQueue(std::shared_ptr<grpc_async::CallQueue> queue) {
  std::map<std::string, std::shared_ptr<GrpcWorkerStub>> dropped;  // released after the lock
  MutexLock lock(&mu_);
  options_.stub.queue = std::move(queue);
  dropped.swap(stubs_);
  read_at_ = {};
}

std::shared_ptr<WorkerStub> GrpcWorkerPool::Find(const std::string& worker) {
  {
    MutexLock lock(&mu_);
    auto it = stubs_.find(worker);
    if (it != stubs_.end() &&
        std::chrono::steady_clock::now() - read_at_ < options_.refresh) {
      return it->second;
    }
  }
  Refresh();
  MutexLock lock(&mu_);
  auto it = stubs_.find(worker);
  return it == stubs_.end() ? nullptr : it->second;
}

std::vector<std::string> GrpcWorkerPool::Ids() {
  Refresh();
  MutexLock lock(&mu_);
  std::vector<std::string> ids;
  ids.reserve(stubs_.size());
  for (const auto& [id, stub] : stubs_) ids.push_back(id);
  return ids;
}

void GrpcWorkerPool::Refresh() {
  // Outside the lock: the provider may ask the store over the network.
  std::map<std::string, std::string> addresses = provider_();
  const auto now = std::chrono::steady_clock::now();
  std::vector<std::shared_ptr<GrpcWorkerStub>> dropped;  // released after the lock
  MutexLock lock(&mu_);
  for (auto it = stubs_.begin(); it != stubs_.end();) {
    auto a = addresses.find(it->first);
    if (a == addresses.end() || a->second != it->second->address()) {
      dropped.push_back(std::move(it->second));
      it = stubs_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto& [id, address] : addresses) {
    if (address.empty() || stubs_.count(id)) continue;  // "" = no worker service
    // Channels connect lazily: a stub costs nothing until its first call.
    stubs_[id] = std::make_shared<GrpcWorkerStub>(id, address, options_.stub);
  }
  read_at_ = now;
}

}  // namespace somm
