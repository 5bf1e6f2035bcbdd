// Provisioner: the seam between the worker scaler's decisions
// (controller/worker_scaler.h) and whatever runs worker processes. The
// controller's leader calls it from its control loop, one call at a time;
// implementations need not be thread-safe.
//
// Contract:
//   - Start(n) asks for n more workers and returns once they are asked for,
//     not once they serve: a worker counts as *pending* from then until it
//     registers in the cluster state (its first heartbeat), and Pending()
//     says how many are. A worker that never registers stays pending until
//     the provisioner gives up on it (local: its process exited).
//   - Stop(id) asks worker `id` to drain (SIGTERM: it deregisters, finishes
//     its queries and exits 0) and returns without waiting for it.
//     Removable() names the workers Stop() may be asked about.
//   - Errors are values: a failed call changes nothing the caller must undo;
//     the scaler decides again next tick.
//   - `registered` is the set of worker ids in the cluster state now.
#pragma once

#include <set>
#include <string>

#include "common/status.h"

namespace somm {

class Provisioner {
 public:
  virtual ~Provisioner() = default;
  virtual std::string name() const = 0;  // "local", "kubernetes"
  virtual Status Start(int count) = 0;
  virtual Status Stop(const std::string& id) = 0;
  virtual StatusOr<int> Pending(const std::set<std::string>& registered) = 0;
  virtual std::set<std::string> Removable(const std::set<std::string>& registered) = 0;
};

}  // namespace somm
