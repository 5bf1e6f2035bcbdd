// `somm simulate`: replays a trace (the CSV `somm bench --trace` sends,
// loadgen/trace.h) through the simulator (simulation.h) under one or all
// provisioning policies, and writes {"policies": {"<policy>": {...}}} as JSON.
// Its flags are declared here, so that apps/somm_main.cc only mounts it.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "simulator/simulation.h"

namespace somm::sim {

struct SimulateCommandOptions {
  SimulationOptions simulation;
  std::string trace;
  std::string policy = "all";
  std::string json_path;  // "" = stdout only
  // Per-worker memory in MiB; 0 = half of what is available on this machine
  // now (DefaultMemoryBudget, as `somm serve` sizes its budget).
  int64_t worker_memory_mb = 0;
  // A cluster description (ReadClusterFile); "" = --workers alike workers.
  std::string cluster_file;
  // Per-worker cores; 0 = this machine's.
  int worker_cores = 0;
  // spdlog level of the router's and the controller's logs (warn: quiet;
  // info: every control action with its reason, as `somm serve` logs them).
  std::string log_level = "warn";
  // "MODEL=N" items: SimulationOptions::static_peak_replicas / static_avg_replicas.
  std::vector<std::string> static_peak_replicas;
  std::vector<std::string> static_avg_replicas;
  // "NAME=VALUE" items: SimulationOptions::infaas (infaas::SetOption).
  std::vector<std::string> infaas;
};

// Adds the subcommand and its flags to `app`, filling `*options` (which must
// outlive the parse).
CLI::App* AddSimulateCommand(CLI::App& app, SimulateCommandOptions* options);

// Runs it; the process's exit code.
int RunSimulate(SimulateCommandOptions options);

}  // namespace somm::sim
