// Arrival-rate forecasting: Holt's double exponential smoothing (a level and a
// trend), as a value the caller keeps between ticks and passes back in. The
// autoscaler forecasts at the horizon a change takes to land (a candidate's
// load time plus a tick), so capacity is loaded before a rise arrives.
//
// Update with an observation `x` taken `dt` seconds after the previous one:
//   predicted = level + trend * dt
//   level'    = alpha * x + (1 - alpha) * predicted
//   trend'    = beta * (level' - level) / dt + (1 - beta) * trend
// The trend is in (queries/s) per second, so irregular ticks (the simulator's)
// extrapolate correctly. The first observation sets the level, trend 0.
//
// Thread-safety: values and pure functions.
#pragma once

namespace somm::control {

struct HoltParams {
  // alpha 0.5: the level halves its distance to a new rate in one tick, fast
  // enough to scale up within two ticks of a step yet half as jumpy as the raw
  // per-tick count. beta 0.2: a trend must persist for several ticks before
  // it is extrapolated, so one noisy tick does not trigger a preload.
  double alpha = 0.5;
  double beta = 0.2;
};

struct HoltState {
  double level = 0;  // queries/s
  double trend = 0;  // (queries/s) per second
  bool initialized = false;
};

// dt_s <= 0 (a repeated tick) leaves an initialized state unchanged.
HoltState Update(HoltState state, double observed_rate, double dt_s, const HoltParams& params = {});

// level + trend * horizon, never below 0.
double Forecast(const HoltState& state, double horizon_s);

}  // namespace somm::control
