// somm: one binary, one subcommand per job. Flags follow Triton's names where
// Triton has them (--model-repository, --http-port, --grpc-port, --metrics-port).
#include <CLI/CLI.hpp>

#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>

#include "loadgen/bench.h"
#include "cli/commands.h"
#include "cli/keys_command.h"
#include "cli/model_sandbox_command.h"
#include "common/process_env.h"
#include "node/component_options.h"
#include "node/log_format.h"
#include "router/routing_policy.h"
#include "simulator/simulate_command.h"

namespace {

// --model-control-mode: the modes StartupModels knows, and its message for
// any other; --log-format: the formats CheckLogFormat knows. One list each.
std::string CheckModelControlMode(const std::string& mode) {
  const auto checked = somm::StartupModels(mode, {});
  return checked.ok() ? std::string() : checked.status().message();
}
std::string CheckLogFormatFlag(const std::string& format) {
  const somm::Status checked = somm::node::CheckLogFormat(format);
  return checked.ok() ? std::string() : checked.message();
}

// --log-format and --exit-timeout-secs: every serving process takes both.
void AddLogAndExitFlags(CLI::App* cmd, std::string& log_format, double& exit_timeout_secs) {
  cmd->add_option("--log-format", log_format,
                  "text, or json: one object per line with the same fields (time, logger, "
                  "level, message)")
      ->check(CheckLogFormatFlag)
      ->capture_default_str();
  cmd->add_option("--exit-timeout-secs", exit_timeout_secs,
                  "On SIGTERM, how long calls in flight may finish before they are cancelled "
                  "(as Triton's)")
      ->check(CLI::Range(0.0, 3600.0))
      ->capture_default_str();
}

// --routing-policy: the names RoutingPolicy::ByName knows, and its message
// for any other (a new policy needs no change here).
std::string CheckRoutingPolicy(const std::string& name) {
  auto policy = somm::RoutingPolicy::ByName(name);
  return policy.ok() ? std::string() : policy.status().message();
}

}  // namespace

int main(int argc, char** argv) {
  // First of all, before anything reads the environment: `somm serve` runs
  // the models, so it re-executes itself once with OMP_WAIT_POLICY=PASSIVE
  // unless the user set a policy (common/process_env.h says why). The client
  // commands run no models and skip the second start (loading libtorch and
  // the rest again). The subcommand is always argv[1]: the app has no global
  // flags.
  if (argc > 1 && (std::string_view(argv[1]) == "serve" || std::string_view(argv[1]) == "worker")) {
    somm::ReexecWithProcessEnvDefaults(argv);
  }
  // A registration's confined child (cli/model_sandbox_command.h): started
  // by a server only, so it is no subcommand of the help.
  if (argc > 1 && std::string_view(argv[1]) == "model-sandbox") {
    somm::RunModelSandboxCommand(argc, argv);
  }

  CLI::App app{"somm: managed, model-less inference serving"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("somm ") + SOMM_VERSION);

  somm::ServeOptions serve;
  auto* serve_cmd = app.add_subcommand("serve", "Serve a model repository over REST and gRPC "
                                                "(Open Inference Protocol v2)");
  serve_cmd->add_option("--model-repository,--repo", serve.model_repository,
                        "Model repository folder")->required();
  serve_cmd->add_option("--address", serve.address, "Address to listen on (beyond loopback needs --auth keys)")->capture_default_str();
  serve_cmd->add_option("--auth", serve.auth, "keys: every call but health probes needs an API key (somm keys); none: loopback only")
      ->capture_default_str()->check(CLI::IsMember({"keys", "none"}));
  serve_cmd->add_option("--keys-file", serve.keys_file, "API key file (default <repo>/.somm/keys)");
  serve_cmd->add_option("--http-port", serve.http_port, "REST port (0 = pick a free one)")
      ->capture_default_str()->check(CLI::Range(0, 65535));
  serve_cmd->add_option("--grpc-port", serve.grpc_port, "gRPC port (0 = pick a free one)")
      ->capture_default_str()->check(CLI::Range(0, 65535));
  serve_cmd->add_option("--metrics-port", serve.metrics_port, "Prometheus port (0 = pick a free one)")
      ->capture_default_str()->check(CLI::Range(0, 65535));
  serve_cmd->add_option("--max-body-bytes", serve.max_body_bytes,
                        "Largest REST body or gRPC message accepted")
      ->capture_default_str()->check(CLI::Range(int64_t{1024}, int64_t{1} << 30));
  serve_cmd->add_option("--http-threads", serve.http_threads,
                        "REST I/O threads (epoll loops; connections are spread over them); 0 = half the cores, 1 to 4")
      ->capture_default_str()->check(CLI::Range(0, 64));
  serve_cmd->add_option("--max-inflight", serve.max_inflight,
                        "Inference requests (REST and gRPC) admitted at once; more get 429 / RESOURCE_EXHAUSTED before their body is decoded (as Ray Serve's max_ongoing_requests); 0 = no bound")
      ->capture_default_str()->check(CLI::Range(int64_t{0}, int64_t{1} << 20));
  serve_cmd->add_option("--max-inflight-bytes", serve.max_inflight_bytes,
                        "Bytes of REST bodies, gRPC messages and decoded tensors held at once (all requests together); past it, 429 / RESOURCE_EXHAUSTED before the body is read. -1 (default) = a quarter of the memory budget (--memory-budget-mb, else half the memory free at start), at least eight times --max-body-bytes; 0 = no bound")
      ->capture_default_str()->check(CLI::Range(int64_t{-1}, int64_t{1} << 50));
  serve_cmd->add_option("--device", serve.device, "auto (a GPU when libtorch has CUDA and one is present), cpu or cuda:N")->capture_default_str();
  serve_cmd->add_option("--inline-max-compute-us", serve.inline_max_compute_us, "An idle one-thread instance runs a query predicted to take at most this long on the REST or gRPC thread that received it, as a worker does (0 = always via its batcher thread)")->capture_default_str();
  serve_cmd->add_option("--inline-min-gap-us", serve.inline_min_gap_us, "... and only while its queries come at least this many microseconds apart on average (closer is load, for its batcher thread)")->capture_default_str();
  serve_cmd->add_option("--log-level", serve.log_level, "trace, debug, info, warn, error")
      ->capture_default_str();
  AddLogAndExitFlags(serve_cmd, serve.log_format, serve.exit_timeout_secs);
  serve_cmd->add_option("--auto-variants", serve.auto_variants,
                        "Generate and profile variants of repository models that have none")
      ->capture_default_str();
  serve_cmd->add_option("--managed", serve.managed,
                        "Managed runtime: autoscale replicas and variants, evict, load on demand "
                        "(false = static provisioning: the configured instances only)")
      ->capture_default_str();
  serve_cmd->add_option("--model-control-mode", serve.model_control_mode,
                        "As Triton's: none (every model loads at start; the repository API's "
                        "load and unload are refused), poll (none, and the repository is "
                        "watched: new and changed models load, removed ones unload; "
                        "--repository-poll-secs) or explicit (only the --load-model models load "
                        "at start; load and unload through the repository API)")
      ->check(CheckModelControlMode)
      ->capture_default_str();
  serve_cmd->add_option("--load-model", serve.load_models,
                        "With --model-control-mode explicit: a model to load at start "
                        "(repeatable; * = every model of the repository)");
  serve_cmd->add_option("--repository-poll-secs", serve.repository_poll_secs,
                        "How often --model-control-mode poll scans the repository")
      ->check(CLI::Range(0.1, 3600.0))
      ->capture_default_str();
  serve_cmd->add_option("--explain", serve.routing.explain,
                        "How answers explain somm's choice: compact (one 'somm' parameter holding "
                        "every fact; cheaper to encode) or full (one somm_* parameter per fact); "
                        "a query may ask for either with the parameter somm_explain")
      ->check(CLI::IsMember({"full", "compact"}))
      ->capture_default_str();
  serve_cmd->add_option("--routing-policy", serve.routing.routing_policy,
                        "Where among the workers that hold a query's chosen variant it goes: "
                        "p2c (two drawn at random, the less loaded wins) or least-wait (the "
                        "shortest wait predicted from the queues and the variant's profile)")
      ->check(CheckRoutingPolicy)
      ->capture_default_str();
  serve_cmd->add_option("--control-tick-ms", serve.control.tick_ms,
                        "How often the controller looks at the load")
      ->check(CLI::Range(10, 3600000))
      ->capture_default_str();
  serve_cmd->add_option("--memory-budget-mb", serve.memory_budget_mb,
                        "Memory for instances (0 = half the memory available at start)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  serve_cmd->add_option("--idle-unload-s", serve.control.idle_unload_s,
                        "Unload a model's instances after this long without queries (0 = 30 s)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  serve_cmd->add_option("--background-duty", serve.background_duty,
                        "Largest share of wall time that back-to-back background loads and "
                        "unloads may take, so that models serving next to them keep their "
                        "latency (1 = unpaced; loads a query waits for are never paced)")
      ->check(CLI::Range(0.01, 1.0))
      ->capture_default_str();

  somm::InferOptions infer;
  auto* infer_cmd = app.add_subcommand(
      "infer", "Send one query and print the result: `somm infer MODEL FILE`, or task form "
               "`somm infer --task TASK FILE` where somm picks the model");
  // Both positionals are optional to CLI11, which fills them in order: with
  // --task, the one given is the input (sorted out after parsing).
  infer_cmd->add_option("model", infer.model,
                        "Model name (a variant id also works); omit with --task");
  infer_cmd->add_option("input", infer.input,
                        "A JSON request body (OIP v2) or an image (.png/.jpg) that is "
                        "preprocessed per the model's config");
  infer_cmd->add_option("--task", infer.task,
                        "Task-form query (e.g. classification/digits): somm picks the model "
                        "that meets the --param SLOs");
  infer_cmd->add_option("--param", infer.params,
                        "Request parameter key=value, repeatable: latency_slo_ms=5, "
                        "min_accuracy=0.95, max_cost=1e-6, best_effort=true (numbers become "
                        "doubles, true/false booleans, the rest strings)")
      ->allow_extra_args(false);
  infer_cmd->add_option("--url,-u", infer.client.url, "host:port of the server")->capture_default_str();
  infer_cmd->add_option("--protocol,-i", infer.client.protocol, "http or grpc")
      ->capture_default_str()->check(CLI::IsMember({"http", "grpc"}));
  infer_cmd->add_option("--model-version", infer.version, "Version (default: latest)");
  infer_cmd->add_option("--top-k", infer.top_k, "Classes to show for classifiers")->capture_default_str();
  infer_cmd->add_flag("--binary", infer.binary, "REST: use the binary tensor data extension");

  somm::RegisterOptions reg;
  auto* register_cmd = app.add_subcommand(
      "register", "Register a TorchScript model for a task; somm then generates and profiles "
                  "its variants in the background");
  register_cmd->add_option("name", reg.name, "Name of the new model")->required();
  register_cmd->add_option("--model", reg.model_file, "The TorchScript file (.pt)")
      ->required()->check(CLI::ExistingFile);
  register_cmd->add_option("--task", reg.task, "Task it serves, task/dataset "
                                               "(e.g. classification/digits)")->required();
  register_cmd->add_option("--input", reg.inputs,
                           "An input as name:DATATYPE:dims, per sample (e.g. pixels:FP32:64, "
                           "image:FP32:3x224x224; -1 = variable); repeatable")
      ->required()->allow_extra_args(false);
  register_cmd->add_option("--output", reg.outputs,
                           "An output as name:DATATYPE:dims (e.g. logits:FP32:10); repeatable")
      ->required()->allow_extra_args(false);
  register_cmd->add_option("--max-batch-size", reg.max_batch_size,
                           "Largest batch the model takes (0 = it does not batch)")
      ->required()->check(CLI::Range(int64_t{0}, int64_t{65536}));
  register_cmd->add_option("--validation", reg.validation_dir,
                           "Folder with meta.json (count), inputs.bin and labels.bin (INT64) to "
                           "measure each variant's accuracy on")->check(CLI::ExistingDirectory);
  register_cmd->add_option("--preprocessing-from", reg.preprocessing_from,
                           "A model.yaml whose preprocessing block (image input) is copied")
      ->check(CLI::ExistingFile);
  register_cmd->add_option("--platform", reg.platform,
                           "The runtime the model file is for (model.yaml's platform); the "
                           "server refuses one it does not support, listing those it does")
      ->capture_default_str();
  register_cmd->add_option("--description", reg.description, "Free text shown in metadata");
  register_cmd->add_flag("--private", reg.private_model,
                         "Private to the tenant of the caller's key (SOMM_API_KEY)");
  register_cmd->add_flag("--wait", reg.wait,
                         "Show progress until the variants are READY (or FAILED), then print "
                         "them");
  register_cmd->add_option("--url,-u", reg.client.url, "host:port of the server")
      ->capture_default_str();
  register_cmd->add_option("--protocol,-i", reg.client.protocol, "http or grpc")
      ->capture_default_str()->check(CLI::IsMember({"http", "grpc"}));

  somm::VariantsOptions variants;
  auto* variants_cmd = app.add_subcommand(
      "variants", "Show a registered model's variants: precision, accuracy, latency at batch 1 "
                  "per hardware, load time, memory; or the progress of their generation");
  variants_cmd->add_option("name", variants.name, "Model name")->required();
  variants_cmd->add_option("--url,-u", variants.client.url, "host:port of the server")
      ->capture_default_str();
  variants_cmd->add_option("--protocol,-i", variants.client.protocol, "http or grpc")
      ->capture_default_str()->check(CLI::IsMember({"http", "grpc"}));

  somm::DecisionsOptions decisions;
  auto* decisions_cmd = app.add_subcommand(
      "decisions", "Show the selector's recent decisions: which variant and hardware served "
                   "each query, and why");
  decisions_cmd->add_option("--limit,-n", decisions.limit, "How many, newest first")
      ->capture_default_str()->check(CLI::Range(1, 10000));
  decisions_cmd->add_option("--url,-u", decisions.client.url, "host:port of the server")
      ->capture_default_str();
  decisions_cmd->add_option("--protocol,-i", decisions.client.protocol, "http or grpc")
      ->capture_default_str()->check(CLI::IsMember({"http", "grpc"}));

  somm::TasksOptions tasks;
  auto* tasks_cmd = app.add_subcommand(
      "tasks", "List the tasks a model-less query may name (or describe one): signature, "
               "models, accuracy and batch-1 latency ranges");
  tasks_cmd->add_option("task", tasks.task, "One task to describe, e.g. classification/digits");
  tasks_cmd->add_option("--url,-u", tasks.client.url, "host:port of the server")
      ->capture_default_str();
  tasks_cmd->add_option("--protocol,-i", tasks.client.protocol, "http or grpc")
      ->capture_default_str()->check(CLI::IsMember({"http", "grpc"}));

  somm::RolloutOptions rollout;
  auto* rollout_cmd = app.add_subcommand(
      "rollout", "Start, step, promote or roll back a model's canary version, or show it: the "
                 "canary takes a share of the model's unversioned queries (or shadows them) and "
                 "somm promotes it step by step, or rolls it back when it is worse");
  rollout_cmd->add_option("model", rollout.model, "The model")->required();
  rollout_cmd->add_option("--version", rollout.version, "Start a canary of this version");
  rollout_cmd->add_option("--percent", rollout.percent,
                          "With --version: its first share (default: the first step; shadow 100)")
      ->check(CLI::Range(0, 100));
  rollout_cmd->add_flag("--shadow", rollout.shadow,
                        "With --version: mirror queries to it and compare, clients get the stable "
                        "answers; goes live at the first step once it agrees");
  rollout_cmd->add_option("--steps", rollout.steps, "With --version: shares to advance through, "
                                                    "ending at 100 (default 10,25,50,100)");
  rollout_cmd->add_flag("--manual", rollout.manual,
                        "With --version: hold at --percent until told (still rolled back when "
                        "worse)");
  rollout_cmd->add_option("--bounds", rollout.bounds,
                          "With --version: what rolls it back, as JSON (max_accuracy_drop, "
                          "max_error_rate_increase, max_latency_ratio, latency_floor_ms, ...; "
                          "those left out keep their defaults)");
  rollout_cmd->add_flag("--promote", rollout.promote, "Promote the canary to 100% now");
  rollout_cmd->add_flag("--rollback", rollout.rollback, "Roll the canary back now");
  rollout_cmd->add_option("--set-percent", rollout.set_percent, "Set the canary's share now")
      ->check(CLI::Range(0, 100));
  rollout_cmd->add_option("--reason", rollout.reason, "Words kept in the rollout's history");
  rollout_cmd->add_flag("--json", rollout.json, "Print the rollout as JSON");
  rollout_cmd->add_option("--url,-u", rollout.client.url, "host:port of the server")
      ->capture_default_str();
  rollout_cmd->add_option("--protocol,-i", rollout.client.protocol, "http or grpc")
      ->capture_default_str()->check(CLI::IsMember({"http", "grpc"}));

  somm::BatchOptions batch;
  auto* batch_cmd = app.add_subcommand(
      "batch", "Offline batch jobs: run every item of a folder or a JSONL file through a model "
               "or a task at low priority, one output file per item (submit, status, cancel)");
  batch_cmd->require_subcommand(1);
  auto* batch_submit = batch_cmd->add_subcommand("submit", "Submit a job; prints its id last");
  batch_submit->add_option("--model,-m", batch.model, "The model (or --task)");
  batch_submit->add_option("--version", batch.version, "The model's version (default: its default)");
  batch_submit->add_option("--task,-t", batch.task, "The task: somm picks the model per item");
  batch_submit->add_option("--min-accuracy", batch.min_accuracy, "Accuracy floor")
      ->check(CLI::Range(0.0, 1.0));
  batch_submit->add_option("--max-cost", batch.max_cost, "Cost ceiling per item, USD");
  batch_submit->add_option("--input", batch.input, "A folder of OIP request bodies (*.json) or a "
                                                   "JSONL file of them, in this key's batch folder "
                                                   "on the server (relative to it)")->required();
  batch_submit->add_option("--output", batch.output, "The folder for the answers, in this key's "
                                                     "batch folder on the server")->required();
  batch_submit->add_option("--concurrency", batch.concurrency, "Items in flight at most")
      ->capture_default_str()->check(CLI::Range(1, 1024));
  batch_submit->add_flag("--wait", batch.wait, "Then show its progress until it ends");
  auto* batch_status = batch_cmd->add_subcommand("status", "Show one job, or every job");
  batch_status->add_option("id", batch.id, "The job (default: every job)");
  batch_status->add_flag("--watch,-w", batch.watch, "Refresh with a progress bar until it ends");
  auto* batch_cancel = batch_cmd->add_subcommand("cancel", "Cancel a job (what it wrote stays)");
  batch_cancel->add_option("id", batch.id, "The job")->required();
  for (auto* cmd : {batch_submit, batch_status, batch_cancel}) {
    cmd->add_option("--url,-u", batch.url, "host:port of the REST port")->capture_default_str();
    cmd->add_flag("--json", batch.json, "Print the server's JSON");
  }

  somm::StatusOptions status;
  auto* status_cmd = app.add_subcommand(
      "status", "Show models, instances per worker, load, SLO attainment and recent control "
                "actions (the dashboard's overview as a table)");
  status_cmd->add_option("--url,-u", status.url, "host:port of the REST port")->capture_default_str();
  status_cmd->add_flag("--watch,-w", status.watch, "Refresh until interrupted");
  status_cmd->add_option("--interval-ms", status.interval_ms, "--watch: time between refreshes")
      ->capture_default_str()->check(CLI::Range(200, 3600000));
  status_cmd->add_option("--actions", status.actions, "Newest control actions listed")
      ->capture_default_str()->check(CLI::Range(0, 20));

  somm::KeysOptions keys;
  auto* keys_cmd = somm::AddKeysCommand(app, &keys);

  somm::ClientOptions models;
  auto* models_cmd = app.add_subcommand("models", "List the server's model repository and status");
  models_cmd->add_option("--url,-u", models.url, "host:port of the server")->capture_default_str();
  models_cmd->add_option("--protocol,-i", models.protocol, "http or grpc")
      ->capture_default_str()->check(CLI::IsMember({"http", "grpc"}));

  somm::sim::SimulateCommandOptions simulate;
  auto* simulate_cmd = somm::sim::AddSimulateCommand(app, &simulate);

  somm::loadgen::BenchOptions bench;
  auto* bench_cmd = app.add_subcommand(
      "bench", "Generate load against an OIP server (REST or gRPC) and report throughput, "
               "latency percentiles, SLO attainment and the server-side split");
  bench_cmd->add_option("model", bench.model, "Model name")->required();
  bench_cmd->add_option("--url,-u", bench.url, "host:port of the server")->capture_default_str();
  bench_cmd->add_option("--protocol,-i", bench.protocol, "http or grpc")
      ->capture_default_str()->check(CLI::IsMember({"http", "grpc"}));
  auto* bench_conc = bench_cmd->add_option("--concurrency", bench.concurrency,
                                           "Closed loop: N senders, each sends, waits, sends "
                                           "(the default load is 1)")->check(CLI::PositiveNumber);
  auto* bench_range = bench_cmd->add_option(
      "--concurrency-range", bench.concurrency_range,
      "Closed-loop sweep START:END[:STEP]; STEP multiplies (1:16:2 = 1 2 4 8 16, default 2), "
      "+STEP adds (1:16:+5 = 1 6 11 16)");
  auto* bench_rate = bench_cmd->add_option("--request-rate", bench.request_rate,
                                           "Open loop: Poisson arrivals at R queries/s")
                         ->check(CLI::PositiveNumber);
  auto* bench_trace = bench_cmd->add_option(
      "--trace", bench.trace,
      "Replay a CSV trace once: header row, timestamp_ms required; model, task, latency_slo_ms, "
      "min_accuracy, max_cost optional")->check(CLI::ExistingFile);
  bench_conc->excludes(bench_range, bench_rate, bench_trace);
  bench_range->excludes(bench_rate, bench_trace);
  bench_rate->excludes(bench_trace);
  bench_cmd->add_option("--duration-s", bench.duration_s,
                        "Poisson: measure exactly this long instead of until stable");
  bench_cmd->add_option("--warmup-s", bench.warmup_s, "Load before measuring (discarded)")
      ->capture_default_str();
  bench_cmd->add_option("--window-s", bench.window_s, "Length of one measurement window")
      ->capture_default_str();
  bench_cmd->add_option("--stability-pct", bench.stability_pct,
                        "Stop when the last 3 windows' throughput and p99 are each within this "
                        "% of their mean")->capture_default_str();
  bench_cmd->add_option("--max-windows", bench.max_windows, "Stop after this many windows")
      ->capture_default_str();
  bench_cmd->add_option("--slo-ms", bench.slo_ms,
                        "Latency SLO of every query; attained = succeeded within it");
  bench_cmd->add_flag("--send-slo", bench.send_slo,
                      "Also send --slo-ms with every query (parameter latency_slo_ms), so the "
                      "server selects, admits and sheds by it; without it the SLO only judges "
                      "the answers");
  bench_cmd->add_option("--input", bench.input,
                        "OIP REST request body (.json) to send; default: random inputs built "
                        "from the model's metadata")->check(CLI::ExistingFile);
  bench_cmd->add_option("--batch-size,-b", bench.batch_size, "Samples per query")
      ->capture_default_str();
  bench_cmd->add_flag("--binary", bench.binary, "REST: use the binary tensor data extension");
  bench_cmd->add_option("--api-key", bench.api_key,
                        "API key of every query (default: $SOMM_API_KEY, if set)");
  bench_cmd->add_option("--senders", bench.senders, "Open loop / trace: sender threads")
      ->capture_default_str();
  bench_cmd->add_option("--seed", bench.seed, "Seed of the Poisson schedule and random inputs")
      ->capture_default_str();
  bench_cmd->add_option("--time-scale", bench.time_scale,
                        "Trace: replay X times faster (arrival offsets divided by X)")
      ->capture_default_str();
  bench_cmd->add_option("--label", bench.label, "Name of the target in the report (default: url)");
  bench_cmd->add_option("--json", bench.json_path, "Also write the report as JSON to this file");
  bench_cmd->add_option("--query-log", bench.query_log_path,
                        "Trace: write every query (due/sent/done ms, model, SLO, status code, "
                        "server timing) as CSV to this file");
  bench_cmd->add_option("--timeline", bench.timeline_path,
                        "Trace: write per (second, model) counts (sent, ok, SLO met, late, "
                        "rejected, expired, failed, p50, p99) as CSV to this file");

  // The cluster's processes (docs/cluster.md).
  somm::WorkerProcessOptions worker;
  auto* worker_cmd = app.add_subcommand(
      "worker", "Cluster worker: hosts model instances for the cluster's routers and controller");
  worker_cmd->add_option("--model-repository,--repo", worker.model_repository,
                         "Shared model repository folder")->required();
  worker_cmd->add_option("--redis", worker.redis, "host:port of the cluster's Redis")->capture_default_str();
  worker_cmd->add_option("--address", worker.address, "Address the worker service listens on")->capture_default_str();
  worker_cmd->add_option("--port", worker.port, "Worker service (gRPC) port (0 = pick a free one)")->capture_default_str();
  worker_cmd->add_option("--advertise", worker.advertise, "host:port routers dial (default: address:port)");
  worker_cmd->add_option("--metrics-port", worker.metrics_port, "Prometheus and health port (0 = pick)")->capture_default_str();
  worker_cmd->add_option("--worker-id", worker.worker_id, "Stable worker name (default hostname-port)");
  worker_cmd->add_option("--zone", worker.zone, "Zone label");
  worker_cmd->add_option("--device", worker.device, "auto, cpu or cuda:N")->capture_default_str();
  worker_cmd->add_option("--memory-budget-mb", worker.memory_budget_mb, "Memory instances may use (0 = half of free RAM)")->capture_default_str();
  worker_cmd->add_option("--inline-max-compute-us", worker.inline_max_compute_us, "An idle one-thread instance runs a query predicted to take at most this long on the RPC thread (0 = always via its batcher thread)")->capture_default_str();
  worker_cmd->add_option("--inline-min-gap-us", worker.inline_min_gap_us, "... and only while its queries come at least this many microseconds apart on average (closer is load, for its batcher thread)")->capture_default_str();
  worker_cmd->add_option("--lease-ms", worker.lease_ms, "Lease of its report in Redis")->capture_default_str();
  worker_cmd->add_option("--heartbeat-ms", worker.heartbeat_ms, "How often it renews the lease")->capture_default_str();
  worker_cmd->add_option("--background-duty", worker.background_duty, "Share of time background loads may take")->capture_default_str();
  worker_cmd->add_option("--log-level", worker.log_level, "trace, debug, info, warn, error")->capture_default_str();
  AddLogAndExitFlags(worker_cmd, worker.log_format, worker.exit_timeout_secs);

  somm::RouterProcessOptions router;
  auto* router_cmd = app.add_subcommand(
      "router", "Cluster router: the Open Inference Protocol (REST and gRPC) in front of the workers");
  router_cmd->add_option("--model-repository,--repo", router.model_repository,
                         "Shared model repository folder (optional: a router serves the "
                         "cluster's catalog)");
  router_cmd->add_option("--state-dir", router.state_dir,
                         "Its audit log, quota file, default key file and batch jobs (default "
                         "<repo>/.somm, or $HOME/.somm without a repository)");
  router_cmd->add_option("--redis", router.redis, "host:port of the cluster's Redis")->capture_default_str();
  router_cmd->add_option("--address", router.address, "Address to listen on (beyond loopback needs --auth keys)")->capture_default_str();
  router_cmd->add_option("--auth", router.auth, "keys: every call but health probes needs an API key (somm keys); none: loopback only")
      ->capture_default_str()->check(CLI::IsMember({"keys", "none"}));
  router_cmd->add_option("--keys-file", router.keys_file, "API key file (default <repo>/.somm/keys)");
  router_cmd->add_option("--http-port", router.http_port, "REST port (0 = pick)")->capture_default_str();
  router_cmd->add_option("--grpc-port", router.grpc_port, "gRPC port (0 = pick)")->capture_default_str();
  router_cmd->add_option("--metrics-port", router.metrics_port, "Prometheus port (0 = pick)")->capture_default_str();
  router_cmd->add_option("--router-id", router.router_id, "Router name (default hostname-port)");
  router_cmd->add_option("--zone", router.routing.zone, "Zone label: prefer workers of this --zone");
  router_cmd->add_option("--cross-zone-rtt-ms", router.routing.cross_zone_rtt_ms, "Round trip to a worker of another zone, added to latency predictions")->capture_default_str();
  router_cmd->add_option("--device", router.device, "Where configured instances run: auto, cpu or cuda:N")->capture_default_str();
  router_cmd->add_option("--max-body-bytes", router.max_body_bytes, "Largest request body or message")->capture_default_str();
  router_cmd->add_option("--http-threads", router.http_threads, "REST I/O threads (0 = half the cores, 1 to 4)")->capture_default_str();
  router_cmd->add_option("--grpc-threads", router.grpc_threads, "Threads serving gRPC and taking the workers' answers (0 = half the cores, 2 to 4)")
      ->capture_default_str()->check(CLI::Range(0, 64));
  router_cmd->add_option("--max-inflight", router.max_inflight,
                         "Inference requests (REST and gRPC) admitted at once; more get 429 / RESOURCE_EXHAUSTED before their body is decoded; 0 = no bound (the workers' queues shed)")
      ->capture_default_str()->check(CLI::Range(int64_t{0}, int64_t{1} << 20));
  router_cmd->add_option("--max-inflight-bytes", router.max_inflight_bytes,
                         "Bytes of REST bodies, gRPC messages and decoded tensors held at once; past it, 429 / RESOURCE_EXHAUSTED before the body is read. -1 (default) = a quarter of half the memory free at start, at least eight times --max-body-bytes; 0 = no bound")
      ->capture_default_str()->check(CLI::Range(int64_t{-1}, int64_t{1} << 50));
  router_cmd->add_option("--managed", router.managed, "As the controller's --managed (false = pick only loaded variants)")->capture_default_str();
  router_cmd->add_option("--explain", router.routing.explain, "As somm serve's --explain: full or compact")
      ->check(CLI::IsMember({"full", "compact"}))
      ->capture_default_str();
  router_cmd->add_option("--routing-policy", router.routing.routing_policy, "As somm serve's --routing-policy: p2c or least-wait")
      ->check(CheckRoutingPolicy)
      ->capture_default_str();
  router_cmd->add_option("--model-control-mode", router.model_control_mode,
                         "As somm serve's: the repository API's load and unload pass only under "
                         "explicit (the leader controller's flags say what loads at start)")
      ->check(CheckModelControlMode)
      ->capture_default_str();
  router_cmd->add_option("--log-level", router.log_level, "trace, debug, info, warn, error")->capture_default_str();
  AddLogAndExitFlags(router_cmd, router.log_format, router.exit_timeout_secs);

  somm::ControllerProcessOptions ctl;
  auto* controller_cmd = app.add_subcommand(
      "controller", "Cluster controller: placement, autoscaling and the repository API; one leader "
                    "at a time holds a lease in Redis, others stand by");
  controller_cmd->add_option("--model-repository,--repo", ctl.model_repository,
                             "Shared model repository folder")->required();
  controller_cmd->add_option("--redis", ctl.redis, "host:port of the cluster's Redis")->capture_default_str();
  controller_cmd->add_option("--address", ctl.address, "Address the control service listens on")->capture_default_str();
  controller_cmd->add_option("--port", ctl.port, "Control service (gRPC) port (0 = pick)")->capture_default_str();
  controller_cmd->add_option("--advertise", ctl.advertise, "host:port routers dial (default: address:port)");
  controller_cmd->add_option("--metrics-port", ctl.metrics_port, "Prometheus and health port (0 = pick)")->capture_default_str();
  controller_cmd->add_option("--controller-id", ctl.controller_id, "Controller name (default hostname-port)");
  controller_cmd->add_option("--leader-lease-ms", ctl.leader_lease_ms, "Leader lease TTL")->capture_default_str();
  controller_cmd->add_option("--control-tick-ms", ctl.control.tick_ms, "Control loop period")->capture_default_str();
  controller_cmd->add_option("--managed", ctl.managed, "Autoscale, evict and load on demand (false = static)")->capture_default_str();
  controller_cmd->add_option("--auto-variants", ctl.auto_variants,
                             "As leader, generate and profile variants of model versions that have none (also redoes a job its predecessor did not finish)")
      ->capture_default_str();
  controller_cmd->add_option("--model-control-mode", ctl.model_control_mode,
                             "As somm serve's: which models the leader loads when it takes the "
                             "lease (explicit: the --load-model ones and those the cluster "
                             "already served); poll = the leader watches the repository")
      ->check(CheckModelControlMode)
      ->capture_default_str();
  controller_cmd->add_option("--load-model", ctl.load_models,
                             "With --model-control-mode explicit: a model to load (repeatable; "
                             "* = every model)");
  controller_cmd->add_option("--repository-poll-secs", ctl.repository_poll_secs,
                             "How often the leader scans the repository in poll mode")
      ->check(CLI::Range(0.1, 3600.0))
      ->capture_default_str();
  controller_cmd->add_option("--idle-unload-s", ctl.control.idle_unload_s, "Seconds idle before a model's instances go (0 = default)")->capture_default_str();
  controller_cmd->add_option("--device", ctl.device, "Where configured instances run: auto, cpu or cuda:N")->capture_default_str();
  controller_cmd->add_option("--wait-for-workers-s", ctl.wait_for_workers_s, "How long a new leader waits for a first worker")->capture_default_str();
  controller_cmd->add_option("--provisioner", ctl.provisioner, "Worker autoscaling: none, local (child processes) or kubernetes (the worker Deployment)")->check(CLI::IsMember({"none", "local", "kubernetes"}))->capture_default_str();
  controller_cmd->add_option("--min-workers", ctl.min_workers, "Fewest workers the provisioner keeps")->capture_default_str();
  controller_cmd->add_option("--max-workers", ctl.max_workers, "Most workers the provisioner starts")->capture_default_str();
  controller_cmd->add_option("--scale-in-after-s", ctl.scale_in_after_s, "Seconds a worker must be spare before it is drained")->capture_default_str();
  controller_cmd->add_option("--scale-cooldown-s", ctl.scale_cooldown_s, "Seconds after a scaling step before a drain")->capture_default_str();
  controller_cmd->add_option("--scale-in-fill", ctl.scale_in_fill, "A worker is drained only if the groups in use then fill the others at most this much")->capture_default_str();
  controller_cmd->add_option("--worker-in-use-window-s", ctl.worker_in_use_window_s, "A group that served a query this recently is in use")->capture_default_str();
  controller_cmd->add_option("--local-worker-binary", ctl.local_worker_binary, "local: the somm binary for workers (default: this one)");
  controller_cmd->add_option("--local-worker-args", ctl.local_worker_args, "local: extra `somm worker` arguments, space-separated");
  controller_cmd->add_option("--local-worker-base-port", ctl.local_worker_base_port, "local: worker k listens on base+10k and base+10k+1 (0 = pick)")->capture_default_str();
  controller_cmd->add_option("--local-worker-log-dir", ctl.local_worker_log_dir, "local: a folder for each worker's output (default: the controller's)");
  controller_cmd->add_option("--k8s-namespace", ctl.k8s_namespace, "kubernetes: the worker Deployment's namespace (default: the pod's)");
  controller_cmd->add_option("--k8s-deployment", ctl.k8s_deployment, "kubernetes: the worker Deployment")->capture_default_str();
  controller_cmd->add_option("--log-level", ctl.log_level, "trace, debug, info, warn, error")->capture_default_str();
  AddLogAndExitFlags(controller_cmd, ctl.log_format, ctl.exit_timeout_secs);

  // Worker and controller: who may read /metrics; router: its client side
  // toward them.
  worker_cmd->add_option("--keys-file", worker.keys_file,
                         "/metrics needs a metrics or admin key from this file (required beyond "
                         "loopback)")->check(CLI::ExistingFile);
  controller_cmd->add_option("--keys-file", ctl.keys_file,
                             "/metrics needs a metrics or admin key from this file (required "
                             "beyond loopback)")->check(CLI::ExistingFile);
  router_cmd->add_option("--cluster-tls-cert", router.cluster_tls.cert_file,
                         "Its client certificate toward workers and the controller (default: "
                         "--tls-cert when --tls-client-ca is given)")->check(CLI::ExistingFile);
  router_cmd->add_option("--cluster-tls-key", router.cluster_tls.key_file,
                         "Private key of --cluster-tls-cert")->check(CLI::ExistingFile);
  router_cmd->add_option("--cluster-tls-ca", router.cluster_tls.ca_file,
                         "The CA of the cluster's certificates")->check(CLI::ExistingFile);
  for (auto [cmd, flag] : {std::pair{serve_cmd, &serve.check_args}, std::pair{worker_cmd, &worker.check_args},
                           std::pair{router_cmd, &router.check_args}, std::pair{controller_cmd, &ctl.check_args}}) {
    cmd->add_flag("--check-args", *flag,
                  "Check the flags as a start would (addresses, TLS, keys, Redis), print ok, and "
                  "stop");
  }

  serve_cmd->add_option("--strict-readiness", serve.strict_readiness,
                        "Ready once every model is available and its configured instances "
                        "loaded (false: once the server is up)")->capture_default_str();
  for (auto [cmd, origins] : {std::pair{serve_cmd, &serve.cors_origins}, std::pair{router_cmd, &router.cors_origins}}) {
    cmd->add_option("--cors-origin", *origins,
                    "A browser origin (https://app.example) allowed to call the REST port "
                    "cross-origin (repeatable; '*' = any); none = CORS off");
  }

  for (auto [cmd, limits] : {std::pair{serve_cmd, &serve.connections}, std::pair{router_cmd, &router.connections}}) {
    cmd->add_option("--header-timeout-s", limits->header_timeout_s,
                    "A request's head must arrive within this many seconds of its first byte")
        ->capture_default_str()->check(CLI::Range(1, 3600));
    cmd->add_option("--body-timeout-s", limits->body_timeout_s,
                    "A body must arrive within this many seconds, plus 1 s per MiB it declares")
        ->capture_default_str()->check(CLI::Range(1, 3600));
    cmd->add_option("--max-connections-per-address", limits->max_connections_per_address,
                    "Open REST connections from one client address (0 = no cap)")
        ->capture_default_str()->check(CLI::NonNegativeNumber);
  }

  // Registration's confined child (docs/hostile-input.md, "Registration runs in
  // a confined child"): the router probes, the controller runs variant jobs.
  for (auto [cmd, limits] : {std::pair{serve_cmd, &serve.registration},
                             std::pair{router_cmd, &router.registration},
                             std::pair{controller_cmd, &ctl.registration}}) {
    cmd->add_option("--registration-cpu-s", limits->cpu_s,
                    "CPU seconds a registration's probe (load, one run) may use")
        ->capture_default_str()->check(CLI::Range(1.0, 86400.0));
    cmd->add_option("--registration-timeout-s", limits->timeout_s,
                    "Seconds a registration's probe may take")
        ->capture_default_str()->check(CLI::Range(1.0, 86400.0));
    cmd->add_option("--registration-memory-mb", limits->memory_mb,
                    "Memory (heap and maps, MiB) a registration's probe and variant job may use")
        ->capture_default_str()->check(CLI::Range(int64_t{64}, int64_t{1} << 30));
    cmd->add_option("--variants-cpu-s", limits->variants_cpu_s,
                    "CPU seconds a variant job (build, profile, int8) may use")
        ->capture_default_str()->check(CLI::Range(1.0, 864000.0));
    cmd->add_option("--variants-timeout-s", limits->variants_timeout_s,
                    "Seconds a variant job may take")
        ->capture_default_str()->check(CLI::Range(1.0, 864000.0));
  }

  // Batch jobs' folders (docs/lifecycle.md, "Batch jobs").
  for (auto [cmd, flags] : {std::pair{serve_cmd, &serve.batch}, std::pair{router_cmd, &router.batch}}) {
    cmd->add_option("--batch-root", flags->root,
                    "Batch jobs read and write only in <root>/<tenant>/ (default "
                    "<state dir>/batch-files)");
    cmd->add_option("--batch-admin-root", flags->admin_roots,
                    "More folders admin keys' batch jobs may use (repeatable)")
        ->check(CLI::ExistingDirectory);
  }

  // TLS (docs/security.md): the servers' ports, and the clients toward them.
  auto add_tls_server_flags = [](CLI::App* cmd, somm::crypto::TlsServerFiles* tls) {
    cmd->add_option("--tls-cert", tls->cert_file,
                    "TLS on every port: certificate chain (PEM); plaintext without it")
        ->check(CLI::ExistingFile);
    cmd->add_option("--tls-key", tls->key_file, "Private key (PEM) of --tls-cert")
        ->check(CLI::ExistingFile);
    cmd->add_option("--tls-client-ca", tls->client_ca_file,
                    "Mutual TLS: clients must present a certificate this CA (PEM) signed; in a "
                    "cluster, also the CA the processes check each other's certificates against")
        ->check(CLI::ExistingFile);
  };
  for (auto [cmd, tls] : {std::pair{serve_cmd, &serve.tls}, std::pair{worker_cmd, &worker.tls},
                          std::pair{router_cmd, &router.tls}, std::pair{controller_cmd, &ctl.tls}}) {
    add_tls_server_flags(cmd, tls);
  }
  for (auto [cmd, tls] : {std::pair{infer_cmd, &infer.client.tls},
                          std::pair{register_cmd, &reg.client.tls},
                          std::pair{variants_cmd, &variants.client.tls},
                          std::pair{decisions_cmd, &decisions.client.tls},
                          std::pair{tasks_cmd, &tasks.client.tls},
                          std::pair{rollout_cmd, &rollout.client.tls},
                          std::pair{bench_cmd, &bench.tls},
                          std::pair{models_cmd, &models.tls}}) {
    cmd->add_option("--tls-ca", tls->ca_file, "gRPC over TLS: the CA (PEM) of the server's certificate")
        ->check(CLI::ExistingFile);
    cmd->add_option("--tls-cert", tls->cert_file, "Mutual TLS: client certificate (PEM)")
        ->check(CLI::ExistingFile);
    cmd->add_option("--tls-key", tls->key_file, "Mutual TLS: its private key (PEM)")
        ->check(CLI::ExistingFile);
  }

  CLI11_PARSE(app, argc, argv);
  if (serve_cmd->parsed()) return somm::RunServe(serve);
  if (worker_cmd->parsed()) return somm::RunWorker(worker);
  if (router_cmd->parsed()) return somm::RunRouter(router);
  if (controller_cmd->parsed()) return somm::RunController(ctl);
  if (infer_cmd->parsed()) {
    if (infer.input.empty()) std::swap(infer.input, infer.model);
    if (infer.input.empty() || (infer.model.empty() == infer.task.empty())) {
      std::fprintf(stderr, "error: give MODEL FILE, or --task TASK FILE\n");
      return 2;
    }
    if (!std::filesystem::is_regular_file(infer.input)) {
      std::fprintf(stderr, "error: input file '%s' does not exist\n", infer.input.c_str());
      return 2;
    }
    return somm::RunInfer(infer);
  }
  if (register_cmd->parsed()) return somm::RunRegister(reg);
  if (variants_cmd->parsed()) return somm::RunVariants(variants);
  if (decisions_cmd->parsed()) return somm::RunDecisions(decisions);
  if (tasks_cmd->parsed()) return somm::RunTasks(tasks);
  if (rollout_cmd->parsed()) return somm::RunRollout(rollout);
  if (batch_cmd->parsed()) {
    batch.action = batch_submit->parsed() ? "submit" : batch_cancel->parsed() ? "cancel" : "status";
    return somm::RunBatch(batch);
  }
  if (status_cmd->parsed()) return somm::RunStatus(status);
  if (models_cmd->parsed()) return somm::RunModels(models);
  if (keys_cmd->parsed()) return somm::RunKeys(*keys_cmd, keys);
  if (bench_cmd->parsed()) return somm::loadgen::RunBench(bench);
  if (simulate_cmd->parsed()) return somm::sim::RunSimulate(simulate);
  return 1;
}
