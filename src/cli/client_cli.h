// The client commands' command line: `somm infer`, `register`, `variants`,
// `decisions`, `tasks`, `rollout`, `batch`, `status`, `models` and `bench`,
// each with the shared client flags (cli/client_flags.h: --url, -i,
// --api-key, --tls-ca, --tls-cert, --tls-key) and one name per concept:
// --model-version for a model's version, --json for "print the answer as
// JSON", --*-file for a file written, durations with their unit (--interval
// 2s, --slo 50ms). Old spellings (--version, --interval-ms, --duration-s,
// --warmup-s, --window-s, --slo-ms, bench's --json FILE, --query-log,
// --timeline, register's --model) still parse, hidden from --help.
//
// apps/somm_main.cc adds these beside the server commands; the struct holds
// what they parse into and must outlive the parse.
#pragma once

#include "cli/commands.h"
#include "loadgen/bench.h"

namespace CLI {
class App;
}  // namespace CLI

namespace somm {

struct ClientCommandLine {
  InferOptions infer;
  RegisterOptions reg;
  VariantsOptions variants;
  DecisionsOptions decisions;
  TasksOptions tasks;
  RolloutOptions rollout;
  BatchOptions batch;
  StatusOptions status;
  ClientOptions models;
  loadgen::BenchOptions bench;
  ClientOptions bench_client;  // copied into `bench` after the parse

  CLI::App* infer_cmd = nullptr;
  CLI::App* register_cmd = nullptr;
  CLI::App* variants_cmd = nullptr;
  CLI::App* decisions_cmd = nullptr;
  CLI::App* tasks_cmd = nullptr;
  CLI::App* rollout_cmd = nullptr;
  CLI::App* batch_cmd = nullptr;
  CLI::App* batch_submit = nullptr;
  CLI::App* batch_cancel = nullptr;
  CLI::App* status_cmd = nullptr;
  CLI::App* models_cmd = nullptr;
  CLI::App* bench_cmd = nullptr;
};

void AddClientCommands(CLI::App& app, ClientCommandLine* line);

// Runs the client command that was parsed: its exit code; -1 when none was.
int RunClientCommands(ClientCommandLine& line);

}  // namespace somm
