#include "cli/client_cli.h"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <filesystem>
#include <string>
#include <utility>

#include "cli/client_flags.h"

namespace somm {
namespace {

void AddInfer(CLI::App& app, ClientCommandLine* l) {
  InferOptions& o = l->infer;
  auto* cmd = l->infer_cmd = app.add_subcommand(
      "infer", "Send one query and print the result: `somm infer MODEL FILE`, or task form "
               "`somm infer --task TASK FILE` where somm picks the model");
  // Both positionals are optional to CLI11, which fills them in order: with
  // --task, the one given is the input (sorted out after parsing).
  cmd->add_option("model", o.model, "Model name (a variant id also works); omit with --task");
  cmd->add_option("input", o.input,
                  "A JSON request body (OIP v2) or an image (.png/.jpg) that is preprocessed per "
                  "the model's config");
  cmd->add_option("--task", o.task,
                  "Task-form query (e.g. classification/digits): somm picks the model that meets "
                  "the --param SLOs");
  cmd->add_option("--param", o.params,
                  "Request parameter key=value, repeatable: latency_slo_ms=5, min_accuracy=0.95, "
                  "max_cost=1e-6, best_effort=true (numbers become doubles, true/false booleans, "
                  "the rest strings)")
      ->allow_extra_args(false);
  cmd->add_option("--model-version", o.version, "Version (default: latest)");
  cmd->add_option("--top-k", o.top_k, "Classes to show for classifiers")->capture_default_str();
  cmd->add_flag("--binary", o.binary, "REST: use the binary tensor data extension");
  AddClientFlags(cmd, &o.client);
}

void AddRegister(CLI::App& app, ClientCommandLine* l) {
  RegisterOptions& o = l->reg;
  auto* cmd = l->register_cmd = app.add_subcommand(
      "register", "Register a TorchScript model for a task; somm then generates and profiles "
                  "its variants in the background");
  cmd->add_option("name", o.name, "Name of the new model")->required();
  // Not required to CLI11, so that the old spelling --model also counts;
  // RunClientCommands asks for one of them.
  cmd->add_option("--model-file", o.model_file, "The model file (TorchScript .pt)")
      ->check(CLI::ExistingFile);
  AddHiddenAlias(cmd, "--model", &o.model_file);
  cmd->add_option("--task", o.task, "Task it serves, task/dataset (e.g. classification/digits)")
      ->required();
  cmd->add_option("--input", o.inputs,
                  "An input as name:DATATYPE:dims, per sample (e.g. pixels:FP32:64, "
                  "image:FP32:3x224x224; -1 = variable); repeatable")
      ->required()
      ->allow_extra_args(false);
  cmd->add_option("--output", o.outputs,
                  "An output as name:DATATYPE:dims (e.g. logits:FP32:10); repeatable")
      ->required()
      ->allow_extra_args(false);
  cmd->add_option("--max-batch-size", o.max_batch_size,
                  "Largest batch the model takes (0 = it does not batch)")
      ->required()
      ->check(CLI::Range(int64_t{0}, int64_t{65536}));
  cmd->add_option("--validation", o.validation_dir,
                  "Folder with meta.json (count), inputs.bin and labels.bin (INT64) to measure "
                  "each variant's accuracy on")
      ->check(CLI::ExistingDirectory);
  cmd->add_option("--preprocessing-from", o.preprocessing_from,
                  "A model.yaml whose preprocessing block (image input) is copied")
      ->check(CLI::ExistingFile);
  cmd->add_option("--platform", o.platform,
                  "The runtime the model file is for (model.yaml's platform); the server refuses "
                  "one it does not support, listing those it does")
      ->capture_default_str();
  cmd->add_option("--description", o.description, "Free text shown in metadata");
  cmd->add_flag("--private", o.private_model,
                "Private to the tenant of the caller's key (--api-key or SOMM_API_KEY)");
  cmd->add_flag("--wait", o.wait,
                "Show progress until the variants are READY (or FAILED), then print them");
  AddClientFlags(cmd, &o.client);
}

void AddModelLess(CLI::App& app, ClientCommandLine* l) {
  l->variants_cmd = app.add_subcommand(
      "variants", "Show a registered model's variants: precision, accuracy, latency at batch 1 "
                  "per hardware, load time, memory; or the progress of their generation");
  l->variants_cmd->add_option("name", l->variants.name, "Model name")->required();
  AddClientFlags(l->variants_cmd, &l->variants.client);

  l->decisions_cmd = app.add_subcommand(
      "decisions", "Show the selector's recent decisions: which variant and hardware served "
                   "each query, and why");
  l->decisions_cmd->add_option("--limit,-n", l->decisions.limit, "How many, newest first")
      ->capture_default_str()
      ->check(CLI::Range(1, 10000));
  AddClientFlags(l->decisions_cmd, &l->decisions.client);

  l->tasks_cmd = app.add_subcommand(
      "tasks", "List the tasks a model-less query may name (or describe one): signature, "
               "models, accuracy and batch-1 latency ranges");
  l->tasks_cmd->add_option("task", l->tasks.task,
                           "One task to describe, e.g. classification/digits");
  AddClientFlags(l->tasks_cmd, &l->tasks.client);

  l->models_cmd = app.add_subcommand("models", "List the server's model repository and status");
  AddClientFlags(l->models_cmd, &l->models);
}

void AddRollout(CLI::App& app, ClientCommandLine* l) {
  RolloutOptions& o = l->rollout;
  auto* cmd = l->rollout_cmd = app.add_subcommand(
      "rollout", "Start, step, promote or roll back a model's canary version, or show it: the "
                 "canary takes a share of the model's unversioned queries (or shadows them) and "
                 "somm promotes it step by step, or rolls it back when it is worse");
  cmd->add_option("model", o.model, "The model")->required();
  cmd->add_option("--model-version", o.version, "Start a canary of this version");
  AddHiddenAlias(cmd, "--version", &o.version);
  cmd->add_option("--percent", o.percent,
                  "With --model-version: its first share (default: the first step; shadow 100)")
      ->check(CLI::Range(0, 100));
  cmd->add_flag("--shadow", o.shadow,
                "With --model-version: mirror queries to it and compare, clients get the stable "
                "answers; goes live at the first step once it agrees");
  cmd->add_option("--steps", o.steps,
                  "With --model-version: shares to advance through, ending at 100 (default "
                  "10,25,50,100)");
  cmd->add_flag("--manual", o.manual,
                "With --model-version: hold at --percent until told (still rolled back when "
                "worse)");
  cmd->add_option("--bounds", o.bounds,
                  "With --model-version: what rolls it back, as JSON (max_accuracy_drop, "
                  "max_error_rate_increase, max_latency_ratio, latency_floor_ms, ...; those left "
                  "out keep their defaults)");
  cmd->add_flag("--promote", o.promote, "Promote the canary to 100% now");
  cmd->add_flag("--rollback", o.rollback, "Roll the canary back now");
  cmd->add_option("--set-percent", o.set_percent, "Set the canary's share now")
      ->check(CLI::Range(0, 100));
  cmd->add_option("--reason", o.reason, "Words kept in the rollout's history");
  cmd->add_flag("--json", o.json, "Print the rollout as JSON");
  AddClientFlags(cmd, &o.client);
}

void AddBatch(CLI::App& app, ClientCommandLine* l) {
  BatchOptions& o = l->batch;
  auto* cmd = l->batch_cmd = app.add_subcommand(
      "batch", "Offline batch jobs: run every item of a folder or a JSONL file through a model "
               "or a task at low priority, one output file per item (submit, status, cancel)");
  cmd->require_subcommand(1);
  auto* submit = l->batch_submit =
      cmd->add_subcommand("submit", "Submit a job; prints its id last");
  submit->add_option("--model,-m", o.model, "The model (or --task)");
  submit->add_option("--model-version", o.version, "The model's version (default: its default)");
  AddHiddenAlias(submit, "--version", &o.version);
  submit->add_option("--task,-t", o.task, "The task: somm picks the model per item");
  submit->add_option("--min-accuracy", o.min_accuracy, "Accuracy floor")
      ->check(CLI::Range(0.0, 1.0));
  submit->add_option("--max-cost", o.max_cost, "Cost ceiling per item, USD");
  submit->add_option("--input", o.input,
                     "A folder of OIP request bodies (*.json) or a JSONL file of them, in this "
                     "key's batch folder on the server (relative to it)")
      ->required();
  submit->add_option("--output", o.output,
                     "The folder for the answers, in this key's batch folder on the server")
      ->required();
  submit->add_option("--concurrency", o.concurrency, "Items in flight at most")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  submit->add_flag("--wait", o.wait, "Then show its progress until it ends");
  auto* status = cmd->add_subcommand("status", "Show one job, or every job");
  status->add_option("id", o.id, "The job (default: every job)");
  status->add_flag("--watch,-w", o.watch, "Refresh with a progress bar until it ends");
  auto* cancel = l->batch_cancel =
      cmd->add_subcommand("cancel", "Cancel a job (what it wrote stays)");
  cancel->add_option("id", o.id, "The job")->required();
  for (auto* sub : {submit, status, cancel}) {
    sub->add_flag("--json", o.json, "Print the server's JSON");
    AddClientFlags(sub, &o.client);
  }
}

void AddStatus(CLI::App& app, ClientCommandLine* l) {
  StatusOptions& o = l->status;
  auto* cmd = l->status_cmd = app.add_subcommand(
      "status", "Show models, instances per worker, load, SLO attainment and recent control "
                "actions (the dashboard's overview as a table)");
  cmd->add_flag("--watch,-w", o.watch, "Refresh until interrupted");
  AddDurationFlag(cmd, "--interval", &o.interval_ms, 1e-3, "--watch: time between refreshes",
                  0.2, 3600);
  AddHiddenAlias(cmd, "--interval-ms", &o.interval_ms);
  cmd->add_option("--actions", o.actions, "Newest control actions listed")
      ->capture_default_str()
      ->check(CLI::Range(0, 20));
  AddClientFlags(cmd, &o.client);
}

void AddBench(CLI::App& app, ClientCommandLine* l) {
  loadgen::BenchOptions& o = l->bench;
  auto* cmd = l->bench_cmd = app.add_subcommand(
      "bench", "Generate load against an OIP server (REST or gRPC) and report throughput, "
               "latency percentiles, SLO attainment and the server-side split");
  cmd->add_option("model", o.model, "Model name")->required();
  auto* conc = cmd->add_option("--concurrency", o.concurrency,
                               "Closed loop: N senders, each sends, waits, sends (the default "
                               "load is 1)")
                   ->check(CLI::PositiveNumber);
  auto* range = cmd->add_option(
      "--concurrency-range", o.concurrency_range,
      "Closed-loop sweep START:END[:STEP]; STEP multiplies (1:16:2 = 1 2 4 8 16, default 2), "
      "+STEP adds (1:16:+5 = 1 6 11 16)");
  auto* rate = cmd->add_option("--request-rate", o.request_rate,
                               "Open loop: Poisson arrivals at R queries/s")
                   ->check(CLI::PositiveNumber);
  auto* trace = cmd->add_option(
      "--trace", o.trace,
      "Replay a CSV trace once: header row, timestamp_ms required; model, task, latency_slo_ms, "
      "min_accuracy, max_cost optional")->check(CLI::ExistingFile);
  conc->excludes(range, rate, trace);
  range->excludes(rate, trace);
  rate->excludes(trace);
  AddDurationFlag(cmd, "--duration", &o.duration_s, 1,
                  "Poisson: measure exactly this long instead of until stable");
  AddHiddenAlias(cmd, "--duration-s", &o.duration_s);
  AddDurationFlag(cmd, "--warmup", &o.warmup_s, 1, "Load before measuring (discarded)");
  AddHiddenAlias(cmd, "--warmup-s", &o.warmup_s);
  AddDurationFlag(cmd, "--window", &o.window_s, 1, "Length of one measurement window", 1e-3);
  AddHiddenAlias(cmd, "--window-s", &o.window_s);
  cmd->add_option("--stability-pct", o.stability_pct,
                  "Stop when the last 3 windows' throughput and p99 are each within this % of "
                  "their mean")->capture_default_str();
  cmd->add_option("--max-windows", o.max_windows, "Stop after this many windows")
      ->capture_default_str();
  AddDurationFlag(cmd, "--slo", &o.slo_ms, 1e-3,
                  "Latency SLO of every query (e.g. 50ms); attained = succeeded within it");
  AddHiddenAlias(cmd, "--slo-ms", &o.slo_ms);
  cmd->add_flag("--send-slo", o.send_slo,
                "Also send --slo with every query (parameter latency_slo_ms), so the server "
                "selects, admits and sheds by it; without it the SLO only judges the answers");
  cmd->add_option("--input", o.input,
                  "OIP REST request body (.json) to send; default: random inputs built from the "
                  "model's metadata")->check(CLI::ExistingFile);
  cmd->add_option("--input-bytes", o.input_bytes,
                  "A file (e.g. a PNG or JPEG for a pipeline) whose bytes fill the model's one "
                  "BYTES input, one element per sample; sent binary over REST")
      ->check(CLI::ExistingFile);
  cmd->add_option("--batch-size,-b", o.batch_size, "Samples per query")->capture_default_str();
  cmd->add_flag("--binary", o.binary, "REST: use the binary tensor data extension");
  cmd->add_option("--senders", o.senders, "Open loop / trace: sender threads")
      ->capture_default_str();
  cmd->add_option("--seed", o.seed, "Seed of the Poisson schedule and random inputs")
      ->capture_default_str();
  cmd->add_option("--time-scale", o.time_scale,
                  "Trace: replay X times faster (arrival offsets divided by X)")
      ->capture_default_str();
  cmd->add_option("--label", o.label, "Name of the target in the report (default: url)");
  cmd->add_option("--json-file", o.json_path, "Also write the report as JSON to this file");
  AddHiddenAlias(cmd, "--json", &o.json_path);
  cmd->add_option("--query-log-file", o.query_log_path,
                  "Trace: write every query (due/sent/done ms, model, SLO, status code, server "
                  "timing) as CSV to this file");
  AddHiddenAlias(cmd, "--query-log", &o.query_log_path);
  cmd->add_option("--timeline-file", o.timeline_path,
                  "Trace: write per (second, model) counts (sent, ok, SLO met, late, rejected, "
                  "expired, failed, p50, p99) as CSV to this file");
  AddHiddenAlias(cmd, "--timeline", &o.timeline_path);
  AddClientFlags(cmd, &l->bench_client);
}

int RunInferCommand(InferOptions& o) {
  if (o.input.empty()) std::swap(o.input, o.model);
  if (o.input.empty() || (o.model.empty() == o.task.empty())) {
    std::fprintf(stderr, "error: give MODEL FILE, or --task TASK FILE\n");
    return 2;
  }
  if (!std::filesystem::is_regular_file(o.input)) {
    std::fprintf(stderr, "error: input file '%s' does not exist\n", o.input.c_str());
    return 2;
  }
  return RunInfer(o);
}

int RunBenchCommand(ClientCommandLine& l) {
  const StatusOr<ClientTarget> target = ResolveClientTarget(l.bench_client);
  if (!target.ok()) {
    std::fprintf(stderr, "error: %s\n", target.status().message().c_str());
    return 2;
  }
  loadgen::BenchOptions& b = l.bench;
  // REST over TLS: HTTPS through HttpClient (loadgen/bench_client.h).
  b.url = (target->tls && l.bench_client.protocol == "http" ? "https://" : "") + target->host_port;
  b.protocol = l.bench_client.protocol;
  b.api_key = l.bench_client.api_key;
  b.tls = l.bench_client.tls;
  return loadgen::RunBench(b);
}

}  // namespace

void AddClientCommands(CLI::App& app, ClientCommandLine* line) {
  AddInfer(app, line);
  AddRegister(app, line);
  AddModelLess(app, line);
  AddRollout(app, line);
  AddBatch(app, line);
  AddStatus(app, line);
  AddBench(app, line);
}

int RunClientCommands(ClientCommandLine& l) {
  if (l.infer_cmd->parsed()) return RunInferCommand(l.infer);
  if (l.register_cmd->parsed()) {
    if (l.reg.model_file.empty()) {
      std::fprintf(stderr, "error: --model-file is required\n");
      return 2;
    }
    if (!std::filesystem::is_regular_file(l.reg.model_file)) {
      std::fprintf(stderr, "error: model file '%s' does not exist\n", l.reg.model_file.c_str());
      return 2;
    }
    return RunRegister(l.reg);
  }
  if (l.variants_cmd->parsed()) return RunVariants(l.variants);
  if (l.decisions_cmd->parsed()) return RunDecisions(l.decisions);
  if (l.tasks_cmd->parsed()) return RunTasks(l.tasks);
  if (l.rollout_cmd->parsed()) return RunRollout(l.rollout);
  if (l.batch_cmd->parsed()) {
    l.batch.action = l.batch_submit->parsed()   ? "submit"
                     : l.batch_cancel->parsed() ? "cancel"
                                                : "status";
    return RunBatch(l.batch);
  }
  if (l.status_cmd->parsed()) return RunStatus(l.status);
  if (l.models_cmd->parsed()) return RunModels(l.models);
  if (l.bench_cmd->parsed()) return RunBenchCommand(l);
  return -1;
}

}  // namespace somm
