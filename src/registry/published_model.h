// PublishedModel: one model's registry entry as a cluster's leader
// controller writes it into the cluster state (Redis) and routers read it
// back: the model.yaml text, each served version's file and variant
// profiles, and the problems the leader's last read of the repository found.
// Routers build their registry from it, so the metadata and profiles that
// drive every router's selector come from one reader (the leader), change
// together under one catalog generation, and never depend on each router's
// own view of the shared folder. The model files themselves stay in the
// shared repository (workers load them from there).
//
// Plain values and their JSON form; no I/O, no threads.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "registry/model_catalog.h"

namespace somm {

struct PublishedModel {
  std::string name;
  std::string config_yaml;  // model.yaml as the leader read it
  std::vector<VersionPtr> versions;
  std::vector<RepositoryEntry> problems;
  // Its rollout (rollout/rollout.h), so every router splits alike.
  std::optional<Rollout> rollout;
};

std::string PublishedModelToJson(const PublishedModel& model);
// Parses what PublishedModelToJson wrote; the config is parsed again (so a
// router checks it as `somm serve` would), named `name` when it names none.
// INVALID_ARGUMENT names the model and what is wrong.
StatusOr<PublishedModel> PublishedModelFromJson(const std::string& json, const std::string& name);

}  // namespace somm
