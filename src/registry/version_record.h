// VersionRecord: one version of one model as the catalog knows it (its
// config, its files, its variant profiles), with no catalog, backend or
// sandbox behind it. The worker API (worker/worker_api.h), the router and
// the controller pass versions around as VersionPtr; only the catalog
// (model_catalog.h) makes them.
//
// A VersionRecord is immutable once published: new profiles make a new
// record, so readers hold a shared_ptr and no lock.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "profiles/variant_profile.h"
#include "repository/model_config.h"

namespace somm {

// One version of one model, as the repository and the profiles describe it.
struct VersionRecord {
  ModelConfig config;
  int64_t version = 0;
  std::string version_str;
  // <repo>/<model>/<version>/<model file>: the file name is the platform's
  // (runtime/backend_registry.h); whoever loads the version reads it here.
  std::string path;
  std::vector<VariantProfile> profiles;
  // Unique in the process for each read of the version's files (a reload
  // gets a new one; new profiles keep it): the response cache's keys carry
  // it, so an answer of the files before a reload is never found again.
  uint64_t generation = 0;
};
using VersionPtr = std::shared_ptr<const VersionRecord>;
uint64_t NextVersionGeneration();

// The name of `v`'s variant that is its model file as registered: the
// first variant its platform's registration lists (variants/ generates it
// first; runtime/backend_registry.h). "" when this binary does not know the
// platform.
std::string AsRegisteredVariant(const VersionRecord& v);

}  // namespace somm
