// PriceList: what a second of each hardware configuration costs. The
// selector's cost SLO, the autoscaler's cheapest-target rule and the
// simulator's bill all read it. Plain values.
#pragma once

#include "profiles/variant_profile.h"

namespace somm {

// Prices per hardware-second. Defaults: AWS EC2 on-demand, us-east-1 (Linux),
// c5.large = 2 vCPU at $0.085/h -> $0.0425 per vCPU-hour; g4dn.xlarge (one
// NVIDIA T4) at $0.526/h. See docs/selection.md.
struct PriceList {
  double cpu_thread_usd_per_s = 0.0425 / 3600.0;
  double gpu_usd_per_s = 0.526 / 3600.0;
  double PerSecond(const HardwareConfig& hw) const {
    return hw.device == DeviceKind::kCuda ? gpu_usd_per_s
                                          : cpu_thread_usd_per_s * static_cast<double>(hw.threads);
  }
};

}  // namespace somm
