// PlatformNames: the values a model.yaml's `platform` may hold in this
// binary, and the platform each one stands for.
//
// The repository does not know any platform itself: each backend registers
// its names through runtime/backend_registry.h (the torchscript one among
// them), which calls AddPlatformNames for it when the binary starts. The
// table sits here, below runtime/, because ParseModelConfig checks
// `platform` and the repository layer may not include the runtime.
//
// Contract:
//   * AddPlatformNames(platform, aliases): `platform` and each alias now
//     name `platform`. A name added again for the same platform is a no-op;
//     one already taken by another platform is refused (FailedPrecondition).
//   * CanonicalPlatform(name): the platform `name` stands for, or nullopt.
//   * AcceptedPlatformNames(): every accepted name, sorted (for messages).
// Thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace somm {

Status AddPlatformNames(const std::string& platform, const std::vector<std::string>& aliases);
std::optional<std::string> CanonicalPlatform(std::string_view name);
std::vector<std::string> AcceptedPlatformNames();

}  // namespace somm
