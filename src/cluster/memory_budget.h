// A device's default memory budget for instances (DeviceState::budget_bytes):
// what a worker sizes itself by at start, and what the placement policy and
// the byte budget's default read. Here, below both the worker and the
// controller, so that neither reaches up to the other for it.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace somm::cluster {

// Default memory budgets, as fractions of what is free when the server starts.
// CPU: half of free RAM. The process also holds query tensors, batches, the
// allocator's slack and libtorch's per-thread arenas, none of which is in a
// profile's peak_memory_mb, and the machine is usually shared; swapping would
// cost more than any reload. GPU: 80% of free device memory. A GPU is
// normally ours alone, but the CUDA context, cuDNN/cuBLAS workspaces and the
// caching allocator's fragmentation take the rest.
inline constexpr double kDefaultCpuBudgetFraction = 0.5;
inline constexpr double kDefaultGpuBudgetFraction = 0.8;

// floor(free_bytes * fraction), clamped to [0, free_bytes].
inline int64_t DefaultMemoryBudget(int64_t free_bytes, double fraction) {
  if (free_bytes <= 0) return 0;
  fraction = std::clamp(fraction, 0.0, 1.0);
  return static_cast<int64_t>(std::floor(static_cast<double>(free_bytes) * fraction));
}

}  // namespace somm::cluster
