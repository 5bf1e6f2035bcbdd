#include "simulator/router_fleet.h"

#include <algorithm>
#include <string>

namespace somm::sim {

std::shared_ptr<const cluster::ClusterState> RouterView::Read() const {
  const auto now = loop_.Now();
  if (!snapshot_ || (now - taken_at_ >= lag_ && store_.generation() != taken_generation_)) {
    taken_generation_ = store_.generation();
    snapshot_ = store_.ReadFresh();
    taken_at_ = now;
  }
  return snapshot_;
}

RouterFleet::RouterFleet(int count, const RouterOptions& options, const EventLoop& loop,
                         EventLoop::Duration view_lag, ModelCatalog& registry,
                         SimulatedStore& store, WorkerDirectory& workers, ControlClient& controller,
                         ServingMetrics& metrics, DecisionLog& log) {
  for (int k = 0; k < std::max(count, 1); ++k) {
    RouterOptions o = options;
    cluster::ClusterStateStore* view = &store;
    if (k > 0) {
      o.id = options.id + "-" + std::to_string(k);
      // Distinct draws per router, still following from the seed.
      if (options.seed != 0) o.seed = (options.seed + 0x9E3779B9u * static_cast<uint32_t>(k)) | 1u;
    }
    if (count > 1) {
      views_.push_back(std::make_unique<RouterView>(loop, store, view_lag));
      view = views_.back().get();
    }
    routers_.push_back(
        std::make_unique<Router>(o, registry, /*registrar=*/nullptr, *view, workers, controller, metrics, log));
  }
}

void RouterFleet::Infer(size_t i, InferenceRequest request, InferCallback done) {
  routers_[i % routers_.size()]->Infer(std::move(request), std::move(done));
}

void RouterFleet::PublishDemand() {
  for (auto& r : routers_) r->PublishDemand();
}

void RouterFleet::Shutdown() {
  for (auto& r : routers_) r->Shutdown();
}

}  // namespace somm::sim
