#include "runtime/backend_set.h"

#include <utility>

namespace somm {

BackendSet::BackendSet(BackendOptions options) : state_(std::make_shared<State>()) {
  state_->options = std::move(options);
}

BackendSet::BackendSet(Backend& every_platform) : state_(std::make_shared<State>()) {
  state_->every_platform = &every_platform;
}

StatusOr<Backend*> BackendSet::For(std::string_view platform) const {
  if (state_->every_platform != nullptr) return state_->every_platform;
  SOMM_ASSIGN_OR_RETURN(const BackendRegistration* registration, BackendFor(platform));
  MutexLock lock(&state_->mu);
  std::unique_ptr<Backend>& slot = state_->made[registration->platform];
  if (slot == nullptr) {
    // Made under the lock: a platform's backend is made once, and a second
    // caller for it waits for the first rather than making another.
    StatusOr<std::unique_ptr<Backend>> made =
        CreateBackend(registration->platform, state_->options);
    if (!made.ok()) {
      state_->made.erase(registration->platform);
      return made.status();
    }
    slot = std::move(made).value();
  }
  return slot.get();
}

std::vector<std::string> BackendSet::Made() const {
  MutexLock lock(&state_->mu);
  std::vector<std::string> out;
  for (const auto& [platform, backend] : state_->made) out.push_back(platform);
  return out;
}

}  // namespace somm
