#include "cluster/cluster_state.h"

#include <cstdio>

namespace somm::cluster {

const char* ActionKindName(Action::Kind kind) {
  switch (kind) {
    case Action::kLoad:
      return "load";
    case Action::kUnload:
      return "unload";
    case Action::kSetReplicas:
      return "set-replicas";
    case Action::kEvict:
      return "evict";
  }
  return "?";
}

const char* CauseName(Action::Cause cause) {
  switch (cause) {
    case Action::Cause::kDemand:
      return "demand";
    case Action::Cause::kIdle:
      return "idle";
    case Action::Cause::kRedundant:
      return "redundant";
    case Action::Cause::kReplaced:
      return "replaced";
  }
  return "?";
}

GroupState WithoutInstances(const GroupState& g) {
#if defined(__x86_64__) && defined(__GLIBCXX__)
  // A field added to GroupState must be copied below too: this fails until
  // it is (and the size is updated).
  static_assert(sizeof(GroupState) == 304, "copy the new GroupState field here");
#endif
  GroupState c;
  c.worker = g.worker;
  c.zone = g.zone;
  c.model = g.model;
  c.version = g.version;
  c.variant = g.variant;
  c.hardware = g.hardware;
  c.device = g.device;
  c.replicas = g.replicas;
  c.memory_bytes = g.memory_bytes;
  c.queued = g.queued;
  c.executing = g.executing;
  c.loading = g.loading;
  c.last_used = g.last_used;
  c.recent_rate_qps = g.recent_rate_qps;
  c.load_ms = g.load_ms;
  c.pinned = g.pinned;
  c.uses_total = g.uses_total;
  c.observed_slowdown = g.observed_slowdown;
  c.warm_overhead_ms = g.warm_overhead_ms;
  return c;
}

GroupState GroupFor(const VariantOption& o, int replicas, TimePoint last_used) {
  GroupState g;
  g.model = o.model;
  g.version = o.version;
  g.variant = o.variant;
  g.hardware = o.hardware;
  g.device = o.device;
  g.replicas = replicas;
  g.memory_bytes = o.memory_bytes;
  g.last_used = last_used;
  g.load_ms = o.load_ms;
  return g;
}

std::string GroupLabel(const std::string& model, int64_t version, const std::string& variant,
                       const HardwareConfig& hardware) {
  return model + ":" + std::to_string(version) + ":" + variant + "@" + hardware.Name();
}

std::string ToString(const Action& action) {
  std::string s = std::string(ActionKindName(action.kind)) + " " +
                  GroupLabel(action) +
                  " on " + action.device;
  if (action.kind != Action::kUnload && action.kind != Action::kEvict) s += " x" + std::to_string(action.replicas);
  return s + ": " + action.reason;
}

std::string FormatBytes(int64_t bytes) {
  char buf[64];
  const double b = static_cast<double>(bytes);
  const double abs = b < 0 ? -b : b;
  if (abs >= 1024.0 * 1024 * 1024) {
    std::snprintf(buf, sizeof buf, "%.1f GiB", b / (1024.0 * 1024 * 1024));
  } else if (abs >= 1024.0 * 1024) {
    std::snprintf(buf, sizeof buf, "%.1f MiB", b / (1024.0 * 1024));
  } else if (abs >= 1024.0) {
    std::snprintf(buf, sizeof buf, "%.1f KiB", b / 1024.0);
  } else {
    std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(bytes));
  }
  return buf;
}

}  // namespace somm::cluster
