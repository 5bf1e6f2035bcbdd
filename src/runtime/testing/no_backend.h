// NoBackend: a Backend (runtime/backend.h) that loads nothing, for tests of
// what only reads the registry (controller, router, worker, simulator): no
// registration happens there, so no model is loaded through a backend. A
// Load says so, with `why`.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "runtime/backend.h"

namespace somm::testing {

class NoBackend : public Backend {
 public:
  explicit NoBackend(std::string why = "no backend in these tests") : why_(std::move(why)) {}
  std::string Name() const override { return "none"; }
  std::vector<Device> Devices() const override { return {Device{}}; }
  StatusOr<std::unique_ptr<ExecutableModel>> Load(const LoadOptions&) override {
    return Unimplemented(why_);
  }

 private:
  std::string why_;
};

}  // namespace somm::testing
