// The replays of the policies that drive the simulated workers themselves,
// with no somm router or controller in the loop: INFaaS's policy
// (infaas_policy.h) and the offline oracle (oracle_policy.h). They share
// RunPolicy's world (simulation.h): the same simulated workers, virtual
// clock, zoo read from the repository, trace, warm-up before the replay and
// accounting (SummarizeOutcomes, instance-seconds, dollars), so their rows
// compare with somm's and the static policies' on equal terms.
//
// The policy functions decide; this file only carries their decisions out
// (loads, resizes and unloads through WorkerStub::Apply, queries through
// WorkerStub::Execute) and keeps the state they read (each instance's load
// per period, each worker's free cores and memory, blacklists).
//
// Thread-safety: pure functions of their arguments, as RunPolicy.
#pragma once

#include "loadgen/trace.h"
#include "simulator/simulation.h"

namespace somm::sim {

StatusOr<PolicyResult> RunInfaas(const SimulationOptions& options, const loadgen::Trace& trace);
StatusOr<PolicyResult> RunOracle(const SimulationOptions& options, const loadgen::Trace& trace);

}  // namespace somm::sim
