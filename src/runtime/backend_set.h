// BackendSet: the backends one process runs models on, one per platform
// (runtime/backend_registry.h). The first time a model of a platform needs
// one, the set makes it through that platform's registered factory, with
// the set's BackendOptions, and keeps it for as long as any copy of the set
// lives; a platform no model needs never gets one.
//
// A BackendSet is a handle: copies share the same backends, so the worker,
// the registry's in-process sandbox and the process that assembles them
// hold one set between them. Tests that fake the runtime hand a single
// Backend instead, which then serves every platform (the implicit
// conversion below exists for them: every component that takes a set
// takes a fake the same way).
//
// Thread-safe. A returned Backend* stays valid while a copy of the set does.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"
#include "runtime/backend.h"
#include "runtime/backend_registry.h"

namespace somm {

class BackendSet {
 public:
  // Each platform's backend made through the registry, with `options`.
  explicit BackendSet(BackendOptions options = {});
  // Every platform on `every_platform`, which outlives every copy of the
  // set (tests that fake the runtime).
  BackendSet(Backend& every_platform);  // NOLINT(google-explicit-constructor): see above

  // The backend of `platform` (its name or an alias), made now on first
  // need: InvalidArgument for an unknown platform (naming the registered
  // ones), FailedPrecondition when this binary does not link its runtime.
  StatusOr<Backend*> For(std::string_view platform) const;
  // The platforms whose backends were made so far, sorted.
  std::vector<std::string> Made() const;

 private:
  struct State {
    BackendOptions options;
    Backend* every_platform = nullptr;  // not owned; set: the registry is not asked
    mutable Mutex mu;
    // By the platform's own name (not an alias).
    std::map<std::string, std::unique_ptr<Backend>> made SOMM_GUARDED_BY(mu);
  };
  std::shared_ptr<State> state_;
};

}  // namespace somm
