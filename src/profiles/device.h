// Device: where an instance's memory and compute live ("cpu", "cuda:0").
// Part of the profiles vocabulary that the runtime, the policies and the
// wire share. Plain values.
#pragma once

#include <string>

namespace somm {

enum class DeviceKind { kCpu, kCuda };

struct Device {
  DeviceKind kind = DeviceKind::kCpu;
  int index = 0;
  std::string ToString() const {
    return kind == DeviceKind::kCpu ? "cpu" : "cuda:" + std::to_string(index);
  }
};

}  // namespace somm
