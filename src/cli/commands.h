// The somm subcommands. apps/somm_main.cc parses flags into these Options
// structs (CLI11) and calls Run*; each returns the process exit code.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "batching/batch_types.h"
#include "common/status.h"
#include "cli/client_options.h"
#include "node/node_options.h"
#include "repository/model_config.h"

namespace somm {

// `somm serve` (node/serve_node.h; ServeOptions is in node/node_options.h).
int RunServe(const ServeOptions& options);

// The cluster's processes (docs/cluster.md; node/node_options.h holds their
// options): each checks its flags, sets the process up (node/node_parts.h's
// SetUpProcess: logging, the stop signals) and runs its node until SIGTERM
// or SIGINT. --check-args runs the checks alone: deploy/'s manifests are
// checked with them.
int RunWorker(const WorkerProcessOptions& options);
int RunRouter(const RouterProcessOptions& options);
int RunController(const ControllerProcessOptions& options);

// Every client command below holds a ClientOptions (cli/client_options.h):
// --url, -i, --api-key, --tls-ca, --tls-cert, --tls-key, added to each by
// cli/client_flags.h's AddClientFlags.

struct InferOptions {
  ClientOptions client;
  std::string model;  // empty when `task` is set
  std::string task;   // task form: somm picks the model ("classification/digits")
  std::string version;
  std::string input;  // .json (OIP request body) or .png/.jpg/.jpeg
  std::vector<std::string> params;  // "key=value" request parameters (SLOs)
  int top_k = 3;
  bool binary = false;  // REST binary tensor extension
};
int RunInfer(const InferOptions& options);

// `somm models`: the repository index plus each model's variant state.
int RunModels(const ClientOptions& options);

struct RegisterOptions {
  ClientOptions client;
  std::string name;
  std::string model_file;           // the model file (TorchScript for torchscript)
  std::string platform = kDefaultPlatform;  // model.yaml's platform: the runtime it is for
  std::string task;                 // "task/dataset"
  std::vector<std::string> inputs;  // name:DATATYPE:dims, per sample
  std::vector<std::string> outputs;
  int64_t max_batch_size = 0;
  std::string validation_dir;      // meta.json + inputs.bin + labels.bin; optional
  std::string preprocessing_from;  // a model.yaml whose preprocessing is copied; optional
  std::string description;
  bool private_model = false;  // --private: for the caller's tenant only
  bool wait = false;  // poll the variants until READY or FAILED, then print them
  int poll_ms = 500;
};
int RunRegister(const RegisterOptions& options);

struct VariantsOptions {
  ClientOptions client;
  std::string name;
};
int RunVariants(const VariantsOptions& options);

struct DecisionsOptions {
  ClientOptions client;
  int limit = 100;
};
int RunDecisions(const DecisionsOptions& options);

// `somm tasks [TASK]`: task discovery (GET /v2/tasks, SommControl/ListTasks).
struct TasksOptions {
  ClientOptions client;
  std::string task;  // "" = every task
};
int RunTasks(const TasksOptions& options);

// `somm rollout MODEL [--model-version V --percent P [--shadow] ...] [--promote |
// --rollback | --set-percent P]`: a model's canary (docs/rollouts.md).
// Without a change it shows the rollout.
struct RolloutOptions {
  ClientOptions client;
  std::string model;
  std::string version;  // --model-version: starts a canary of this version
  int percent = -1;     // -1 = the first step (shadow: 100)
  bool shadow = false;
  std::string steps;    // "10,25,50,100"
  bool manual = false;  // held at --percent until told
  std::string bounds;   // with version: the rollback bounds, a JSON object ("" = the server's)
  bool promote = false;
  bool rollback = false;
  int set_percent = -1;
  std::string reason;
  bool json = false;    // print the answer's JSON as it came
};
int RunRollout(const RolloutOptions& options);

// `somm status`: the dashboard's overview as a terminal table
// (cli/status_format.h), from the operator's views: REST's /v2/somm/ GETs,
// or SommControl/OperatorCall over gRPC.
struct StatusOptions {
  ClientOptions client;
  bool watch = false;          // refresh until interrupted
  double interval_ms = 2000;   // --watch: time between refreshes (--interval 2s)
  int actions = 8;             // newest control actions listed
};
int RunStatus(const StatusOptions& options);

// `somm batch submit|status|cancel`: offline batch jobs (docs/lifecycle.md),
// over REST or gRPC (SommControl/OperatorCall, the same paths and bodies).
struct BatchOptions {
  ClientOptions client;
  std::string action;   // submit | status | cancel
  std::string id;       // status (one job; "" = all), cancel
  std::string model, version, task;  // version: --model-version
  double min_accuracy = -1;  // -1 = none
  double max_cost = -1;      // -1 = none
  std::string input, output;
  int concurrency = 2;
  bool watch = false;   // status: refresh, with a progress bar, until it ends
  bool wait = false;    // submit: then watch it to the end
  bool json = false;
};
int RunBatch(const BatchOptions& options);

}  // namespace somm
