#include "node/component_options.h"

#include <algorithm>

#include "router/routing_policy.h"

namespace somm {

StatusOr<RouterOptions> BuildRouterOptions(const RouterFlags& flags, bool managed) {
  RouterOptions o;
  o.managed = managed;
  o.compact_explanation = flags.explain == "compact";
  SOMM_ASSIGN_OR_RETURN(o.routing_policy, RoutingPolicy::ByName(flags.routing_policy));
  o.zone = flags.zone;
  o.cross_zone_rtt_ms = flags.cross_zone_rtt_ms;
  return o;
}

ControllerOptions BuildControllerOptions(const ControlLoopFlags& flags, bool managed) {
  ControllerOptions o;
  o.managed = managed;
  o.control_tick_ms = std::max(flags.tick_ms, kMinControlTickMs);
  o.idle_unload_s = flags.idle_unload_s;
  return o;
}

}  // namespace somm
