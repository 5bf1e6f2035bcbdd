#include "node/component_options.h"

#include <algorithm>
#include <utility>

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

StatusOr<std::optional<std::vector<std::string>>> StartupModels(
    const std::string& mode, const std::vector<std::string>& load_models) {
  if (mode != "none" && mode != "poll" && mode != "explicit") {
    return InvalidArgument("--model-control-mode must be none, poll or explicit, not '" + mode +
                           "'");
  }
  if (mode != "explicit") {
    if (!load_models.empty()) {
      return InvalidArgument("--load-model " + load_models.front() +
                             " needs --model-control-mode explicit (under " + mode +
                             " every model of the repository loads at start)");
    }
    return std::optional<std::vector<std::string>>();
  }
  std::vector<std::string> names;
  for (const std::string& name : load_models) {
    if (name == "*") return std::optional<std::vector<std::string>>();
    if (name.empty()) return InvalidArgument("--load-model needs a model name, or *");
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  }
  return std::optional<std::vector<std::string>>(std::move(names));
}

}  // namespace somm
