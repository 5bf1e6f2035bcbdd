// The --device flag of the serving commands (serve, worker, router,
// controller): "auto" (the first GPU when libtorch has CUDA and the machine
// has one, else the CPU), "cpu" or "cuda:N".
#pragma once

#include <string>

#include "common/status.h"
#include "runtime/backend.h"

namespace somm {

StatusOr<Device> ParseDeviceFlag(const std::string& text, const Backend& backend);

// "127.0.0.1" for a wildcard listen address, else the address: what a local
// client dials.
std::string DialHost(const std::string& address);

}  // namespace somm
