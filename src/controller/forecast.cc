#include "controller/forecast.h"

#include <algorithm>

namespace somm::control {

HoltState Update(HoltState state, double observed_rate, double dt_s, const HoltParams& params) {
  observed_rate = std::max(observed_rate, 0.0);
  if (!state.initialized) {
    return HoltState{observed_rate, 0.0, true};
  }
  if (dt_s <= 0) return state;
  const double predicted = state.level + state.trend * dt_s;
  HoltState next;
  next.initialized = true;
  // A level below zero means nothing; clamping keeps a falling trend from
  // dragging the forecast under zero long after the traffic stopped.
  next.level = std::max(0.0, params.alpha * observed_rate + (1 - params.alpha) * predicted);
  next.trend = params.beta * (next.level - state.level) / dt_s + (1 - params.beta) * state.trend;
  return next;
}

double Forecast(const HoltState& state, double horizon_s) {
  return std::max(0.0, state.level + state.trend * std::max(horizon_s, 0.0));
}

}  // namespace somm::control
