// The router's and the controller's options, built in one place from what a
// process's flags say of them (node/node_options.h's RouterFlags and
// ControlLoopFlags). Every process that runs a router or a controller
// starts from these: `somm serve` (EmbeddedServer), `somm router`, `somm
// controller` and the simulator (simulator/simulation.cc), which then add
// their own wiring (clocks, callbacks, readiness, ids, devices). A new
// option that a flag sets goes into a flag group and into one builder here.
//
// Pure functions of their arguments: no I/O, no clock.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "controller/controller.h"
#include "node/node_options.h"
#include "router/router.h"

namespace somm {

// The shortest control period a process runs: a faster loop spends its time
// ticking (ControlLoopFlags::tick_ms is raised to it).
inline constexpr int kMinControlTickMs = 10;

// `managed`: the deployment's mode, the router's and the controller's
// alike (false = static provisioning). Fails on a --routing-policy that
// RoutingPolicy::ByName does not know, naming the ones it does.
StatusOr<RouterOptions> BuildRouterOptions(const RouterFlags& flags, bool managed);

ControllerOptions BuildControllerOptions(const ControlLoopFlags& flags, bool managed);

// The models a process loads at start under --model-control-mode `mode`
// with --load-model `load_models` (Triton's rules): every model (nullopt)
// under none and poll, and under explicit with "*" among the names; else,
// under explicit, exactly the names given (none given: none loads).
// InvalidArgument for a mode other than none, poll and explicit, and for
// --load-model without explicit.
StatusOr<std::optional<std::vector<std::string>>> StartupModels(
    const std::string& mode, const std::vector<std::string>& load_models);

}  // namespace somm
