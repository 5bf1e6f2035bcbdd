#include "pipeline/pipeline_server.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>

#include "common/clock.h"
#include "pipeline/branch_step.h"
#include "pipeline/builtin_steps.h"
#include "pipeline/cascade_step.h"
#include "selector/selector.h"

namespace somm::pipeline {
namespace {

namespace fs = std::filesystem;
using SteadyClock = std::chrono::steady_clock;

constexpr char kVersion[] = "1";

// The text the catalog and the guard answer for a model that does not
// exist (ModelCatalog::UnknownModel): a hidden pipeline answers the same.
Status UnknownModel(const std::string& name) { return NotFound("unknown model '" + name + "'"); }

bool FullyKnown(const Shape& shape) {
  return std::none_of(shape.begin(), shape.end(), [](int64_t d) { return d < 0; });
}

std::string FormatMs(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", ms);
  return buf;
}

std::string FormatFraction(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4f", v);
  return buf;
}

std::optional<double> NumberParameter(const Parameters& p, const std::string& key) {
  auto it = p.find(key);
  if (it == p.end()) return std::nullopt;
  if (const auto* d = std::get_if<double>(&it->second)) return *d;
  if (const auto* i = std::get_if<int64_t>(&it->second)) return static_cast<double>(*i);
  return std::nullopt;
}

}  // namespace

struct PipelineServer::Run {
  InferenceServer* inner = nullptr;
  std::shared_ptr<const PipelinePlan> plan;
  Caller caller;
  std::string id;
  Parameters pass;  // min_accuracy, max_cost, best_effort: to every model and task step
  Parameters asked;  // every parameter of the query (a switch may read one)
  std::optional<double> slo_ms;
  SteadyClock::time_point start = SteadyClock::now();
  int64_t batch = 0;
  std::map<std::string, Tensor> values;
  std::map<std::string, int> readers_left;
  std::vector<size_t> answer;  // indices of plan->outputs to answer with
  std::vector<std::pair<std::string, std::string>> explained;  // step, what it did
  InferCallback done;
  std::shared_ptr<StepTimes> times;
  // The SLO split (SplitBudget): whether a plan fits, what each step must
  // leave to the steps after it, and the variant planned for each.
  bool planned = false;
  std::vector<double> reserved_after;
  std::vector<std::string> planned_option;
  std::string split_note;

  Status StepError(const std::string& step, const Status& s) const {
    if (s.code() == StatusCode::kNotFound && caller.authenticated && !caller.admin) {
      return UnknownModel(plan->name);
    }
    return Status(s.code(), "pipeline '" + plan->name + "' step '" + step + "': " + s.message());
  }

  // Keeps the outputs of `step` that something reads.
  void Keep(const std::string& step, std::vector<Tensor> outputs) {
    for (Tensor& t : outputs) {
      std::string key = step + "." + t.name;
      if (readers_left.count(key)) values[std::move(key)] = std::move(t);
    }
  }

  // The value `source` as `name` with the per-sample shape `shape` (when
  // fully known): moved out when this is its last reader.
  StatusOr<Tensor> Take(const std::string& source, const std::string& name, const Shape& shape) {
    Tensor t;
    auto it = values.find(source);
    if (it == values.end()) {
      const auto [step, output] = SplitSource(source);
      return Internal("step '" + step + "' gave no output '" + output + "'");
    }
    if (--readers_left[source] <= 0) {
      t = std::move(it->second);
      values.erase(it);
    } else {
      t = it->second;
    }
    t.name = name;
    if (FullyKnown(shape) && ElementCount(Batched(batch, shape)) == ElementCount(t.shape)) {
      t.shape = Batched(batch, shape);
    }
    return t;
  }
};

PipelineServer::PipelineServer(PipelineServerOptions options, InferenceServer& inner)
    : options_(std::move(options)), inner_(inner) {}

StatusOr<StepSignature> PipelineServer::Signature(const StepConfig& step) const {
  StepSignature sig;
  if (step.kind == StepKind::kTask) {
    // Every model of the task, whoever owns it: the caller's own view is
    // applied per query.
    SOMM_ASSIGN_OR_RETURN(TaskDescription task, inner_.DescribeTask(step.task, Caller{}));
    sig.inputs = task.signature.inputs;
    sig.outputs = task.signature.outputs;
    sig.batched = task.signature.batched;
    return sig;
  }
  SOMM_ASSIGN_OR_RETURN(ModelMetadata md, inner_.GetModelMetadata(step.model, step.version));
  auto batch = md.parameters.find("max_batch_size");
  sig.batched = batch != md.parameters.end() && std::holds_alternative<int64_t>(batch->second) &&
                std::get<int64_t>(batch->second) > 0;
  if (sig.batched) sig.max_batch_size = std::get<int64_t>(batch->second);
  sig.versions = md.versions;
  auto per_sample = [&](const std::vector<TensorMetadata>& specs, std::vector<TensorSpec>* out) {
    for (const auto& m : specs) {
      Shape shape = m.shape;
      if (sig.batched && !shape.empty()) shape.erase(shape.begin());
      out->push_back({m.name, DataTypeFromString(m.datatype), shape});
    }
  };
  per_sample(md.inputs, &sig.inputs);
  per_sample(md.outputs, &sig.outputs);
  if (options_.model_owner) sig.owner_tenant = options_.model_owner(step.model).value_or("");
  return sig;
}

PipelineServer::Entry PipelineServer::Load(const std::string& name) const {
  Entry e;
  const std::string dir = (fs::path(options_.repository_path) / name).string();
  auto config = LoadPipelineConfig(dir);
  if (!config.ok()) {
    e.problem = config.status().message();
  } else {
    auto plan = BindPipeline(*config, [this](const StepConfig& s) { return Signature(s); });
    // A cascade's threshold is set now, on its validation data (its registration).
    for (size_t i = 0; plan.ok() && i < plan->steps.size(); ++i) {
      BoundStep& step = plan->steps[i];
      if (step.config.kind != StepKind::kCascade) continue;
      auto calibrated = CalibrateCascade(inner_, options_.repository_path, &step);
      if (!calibrated.ok()) {
        plan = Status(calibrated.status().code(),
                      "pipeline '" + config->name + "': " + calibrated.status().message());
        break;
      }
      step.calibration = std::move(calibrated).value();
      spdlog::info("pipeline {} step {}: {}", config->name, step.config.name, step.calibration);
    }
    if (plan.ok()) {
      e.times = std::make_shared<StepTimes>(plan->steps.size());
      e.plan = std::make_shared<const PipelinePlan>(std::move(plan).value());
    } else {
      e.problem = plan.status().message();
    }
  }
  // Messages name the file relative to the repository, never its path here.
  const std::string prefix = options_.repository_path + "/";
  for (size_t at = e.problem.find(prefix); at != std::string::npos; at = e.problem.find(prefix)) {
    e.problem.erase(at, prefix.size());
  }
  return e;
}

void PipelineServer::LoadAll() {
  std::error_code ec;
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(options_.repository_path, ec)) {
    const std::string name = e.path().filename().string();
    if (name.empty() || name[0] == '.' || !IsPipelineFolder(e.path().string())) continue;
    if (options_.only &&
        std::find(options_.only->begin(), options_.only->end(), name) == options_.only->end()) {
      continue;
    }
    names.push_back(name);
  }
  for (const std::string& name : names) {
    Entry e = Load(name);
    if (e.plan) {
      spdlog::info("pipeline {}: {} steps", name, e.plan->steps.size());
    } else {
      spdlog::error("pipeline {}: {}", name, e.problem);
    }
    MutexLock lock(&mu_);
    pipelines_[name] = std::move(e);
  }
}

void PipelineServer::RebindUnavailable() {
  std::vector<std::pair<std::string, std::string>> unavailable;  // name, problem
  {
    MutexLock lock(&mu_);
    for (const auto& [name, e] : pipelines_) {
      if (!e.plan && !e.unloaded) unavailable.emplace_back(name, e.problem);
    }
  }
  for (const auto& [name, problem] : unavailable) {
    Entry e = Load(name);
    if (!e.plan && e.problem == problem) continue;  // nothing new to say
    if (e.plan) {
      spdlog::info("pipeline {}: {} steps (bound once its models were known)", name,
                   e.plan->steps.size());
    } else {
      spdlog::error("pipeline {}: {}", name, e.problem);
    }
    MutexLock lock(&mu_);
    auto it = pipelines_.find(name);
    // Loaded or unloaded by the repository API meanwhile: that wins.
    if (it == pipelines_.end() || it->second.plan || it->second.unloaded) continue;
    it->second = std::move(e);
  }
}

size_t PipelineServer::Count() const {
  MutexLock lock(&mu_);
  return pipelines_.size();
}

bool PipelineServer::IsPipeline(const std::string& name) const {
  MutexLock lock(&mu_);
  return pipelines_.count(name) > 0;
}

std::optional<std::string> PipelineServer::OwnerOf(const std::string& name) const {
  MutexLock lock(&mu_);
  auto it = pipelines_.find(name);
  if (it == pipelines_.end()) return std::nullopt;
  return it->second.plan ? it->second.plan->owner_tenant : "";
}

std::shared_ptr<PipelineServer::StepTimes> PipelineServer::TimesOf(const std::string& name) const {
  MutexLock lock(&mu_);
  auto it = pipelines_.find(name);
  return it == pipelines_.end() ? nullptr : it->second.times;
}

std::shared_ptr<const PipelinePlan> PipelineServer::Plan(const std::string& name) const {
  MutexLock lock(&mu_);
  auto it = pipelines_.find(name);
  return it == pipelines_.end() ? nullptr : it->second.plan;
}

StatusOr<ModelMetadata> PipelineServer::GetModelMetadata(const std::string& name,
                                                         const std::string& version) const {
  if (!IsPipeline(name)) return inner_.GetModelMetadata(name, version);
  const auto plan = Plan(name);
  if (!plan) return Unavailable("pipeline '" + name + "' is not ready");
  if (!version.empty() && version != kVersion) {
    return NotFound("pipeline '" + name + "' has no version " + version);
  }
  ModelMetadata md;
  md.name = name;
  md.versions = {kVersion};
  md.platform = "somm_pipeline";
  for (const auto& s : plan->inputs) {
    md.inputs.push_back({s.name, DataTypeName(s.datatype), Batched(-1, s.shape)});
  }
  for (const auto& o : plan->outputs) {
    md.outputs.push_back({o.spec.name, DataTypeName(o.spec.datatype), Batched(-1, o.spec.shape)});
  }
  md.parameters["max_batch_size"] = plan->max_batch_size;
  if (!plan->description.empty()) md.parameters["description"] = plan->description;
  std::string steps;
  for (const auto& s : plan->steps) {
    const StepConfig& c = s.config;
    steps += (steps.empty() ? "" : " ") + c.name + "=" + StepKindName(c.kind);
    if (c.kind == StepKind::kModel) steps += ":" + c.model;
    if (c.kind == StepKind::kTask) steps += ":" + c.task;
    for (size_t k = 0; k < s.models.size(); ++k) steps += (k ? "," : ":") + s.models[k];
    if (c.kind == StepKind::kCascade) md.parameters["cascade_" + c.name] = s.calibration;
    if (c.kind == StepKind::kSwitch) {
      const SwitchOptions& sw = c.switch_;
      std::string text = sw.parameter.empty() ? "input=" + sw.input : "parameter=" + sw.parameter;
      for (const auto& [value, model] : sw.cases) text += " " + value + "->" + model;
      if (!sw.default_model.empty()) text += " default->" + sw.default_model;
      md.parameters["switch_" + c.name] = text;
    }
  }
  md.parameters["pipeline_steps"] = steps;
  return md;
}

StatusOr<bool> PipelineServer::IsModelReady(const std::string& name,
                                            const std::string& version) const {
  if (!IsPipeline(name)) return inner_.IsModelReady(name, version);
  const auto plan = Plan(name);
  if (!plan) return false;
  if (!version.empty() && version != kVersion) {
    return NotFound("pipeline '" + name + "' has no version " + version);
  }
  for (const auto& s : plan->steps) {
    std::vector<std::pair<std::string, std::string>> models;
    if (s.config.kind == StepKind::kModel) models.emplace_back(s.config.model, s.config.version);
    for (const auto& m : s.models) models.emplace_back(m, "");
    for (const auto& [model, version] : models) {
      auto ready = inner_.IsModelReady(model, version);
      if (!ready.ok() || !*ready) return false;
    }
  }
  return true;
}

std::vector<RepositoryEntry> PipelineServer::RepositoryIndex(bool ready_only) const {
  std::vector<RepositoryEntry> rows = inner_.RepositoryIndex(ready_only);
  {
    MutexLock lock(&mu_);
    for (const auto& [name, e] : pipelines_) {
      if (e.plan) {
        rows.push_back({name, kVersion, "READY", ""});
      } else if (!ready_only) {
        rows.push_back({name, "", "UNAVAILABLE", e.problem});
      }
    }
  }
  std::stable_sort(rows.begin(), rows.end(),
                   [](const RepositoryEntry& a, const RepositoryEntry& b) { return a.name < b.name; });
  return rows;
}

Status PipelineServer::LoadModel(const std::string& name) {
  const std::string dir = (fs::path(options_.repository_path) / name).string();
  if (name.empty() || name[0] == '.' || name.find('/') != std::string::npos ||
      !IsPipelineFolder(dir)) {
    return inner_.LoadModel(name);
  }
  Entry e = Load(name);
  Status result = e.plan ? Status::Ok() : InvalidArgument(e.problem);
  MutexLock lock(&mu_);
  pipelines_[name] = std::move(e);
  return result;
}

Status PipelineServer::UnloadModel(const std::string& name) {
  {
    MutexLock lock(&mu_);
    auto it = pipelines_.find(name);
    if (it != pipelines_.end()) {
      it->second.plan = nullptr;
      it->second.problem = "unloaded";
      it->second.unloaded = true;
      return Status::Ok();
    }
  }
  return inner_.UnloadModel(name);
}

Status PipelineServer::RegisterModel(RegistrationRequest request) {
  if (IsPipeline(request.name)) {
    return AlreadyExists("'" + request.name + "' is a pipeline of the repository");
  }
  return inner_.RegisterModel(std::move(request));
}


void PipelineServer::Infer(InferenceRequest request, InferCallback done) {
  if (!request.task.empty() || !IsPipeline(request.model_name)) {
    return inner_.Infer(std::move(request), std::move(done));
  }
  const std::string& name = request.model_name;
  const auto plan = Plan(name);
  if (plan && !request.caller.MayUse(plan->owner_tenant)) return done(UnknownModel(name));
  if (!plan) return done(Unavailable("pipeline '" + name + "' is not ready"));
  if (!request.model_version.empty() && request.model_version != kVersion) {
    return done(NotFound("pipeline '" + name + "' has no version " + request.model_version));
  }
  auto run = std::make_shared<Run>();
  run->inner = &inner_;
  run->plan = plan;
  run->caller = request.caller;
  run->id = request.id;
  run->done = std::move(done);
  run->asked = request.parameters;
  for (const char* key : {"min_accuracy", "max_cost", "best_effort"}) {
    if (auto it = request.parameters.find(key); it != request.parameters.end()) {
      run->pass[key] = it->second;
    }
  }
  if (request.parameters.count("latency_slo_ms")) {
    run->slo_ms = NumberParameter(request.parameters, "latency_slo_ms");
    if (!run->slo_ms || !(*run->slo_ms > 0)) {
      return run->done(InvalidArgument("parameter 'latency_slo_ms' must be a positive number"));
    }
  }
  const std::string where = "pipeline '" + name + "': ";
  // The inputs, against the pipeline's own signature.
  for (Tensor& t : request.inputs) {
    const auto spec = std::find_if(plan->inputs.begin(), plan->inputs.end(),
                                   [&](const TensorSpec& s) { return s.name == t.name; });
    if (spec == plan->inputs.end()) {
      std::string names;
      for (const auto& s : plan->inputs) names += (names.empty() ? "" : ", ") + s.name;
      return run->done(InvalidArgument(where + "unknown input '" + t.name + "' (it takes " + names + ")"));
    }
    if (run->values.count(t.name)) return run->done(InvalidArgument(where + "input '" + t.name + "' given twice"));
    if (t.datatype != spec->datatype) {
      return run->done(InvalidArgument(where + "input '" + t.name + "' must be " +
                                       DataTypeName(spec->datatype) + ", not " + DataTypeName(t.datatype)));
    }
    // [batch, per-sample dims], or [batch] for a per-sample shape of [1].
    const Shape& per = spec->shape;
    bool fits = !t.shape.empty() && t.shape[0] >= 1 &&
                (t.shape.size() == per.size() + 1 || (t.shape.size() == 1 && per == Shape{1}));
    for (size_t d = 1; fits && d < t.shape.size(); ++d) {
      fits = per[d - 1] == -1 || per[d - 1] == t.shape[d];
    }
    if (!fits) {
      return run->done(InvalidArgument(where + "input '" + t.name + "' has shape " +
                                       ShapeToString(t.shape) + "; it takes " +
                                       ShapeToString(Batched(-1, per))));
    }
    if (run->batch != 0 && run->batch != t.shape[0]) {
      return run->done(InvalidArgument(where + "the inputs disagree on the batch size"));
    }
    run->batch = t.shape[0];
    if (run->batch > plan->max_batch_size) {
      return run->done(InvalidArgument(where + "a batch of " + std::to_string(run->batch) +
                                       " is over its max_batch_size of " +
                                       std::to_string(plan->max_batch_size)));
    }
    if (t.datatype == DataType::kBytes) {
      auto elements = SplitBytes(t);
      if (!elements.ok()) return run->done(InvalidArgument(where + elements.status().message()));
      if (static_cast<int64_t>(elements->size()) != ElementCount(t.shape)) {
        return run->done(InvalidArgument(where + "input '" + t.name + "' holds " +
                                         std::to_string(elements->size()) + " elements for shape " +
                                         ShapeToString(t.shape)));
      }
    } else if (Status s = t.CheckByteSize(); !s.ok()) {
      return run->done(InvalidArgument(where + s.message()));
    }
    run->values[t.name] = std::move(t);
  }
  for (const auto& spec : plan->inputs) {
    if (!run->values.count(spec.name)) {
      return run->done(InvalidArgument(where + "input '" + spec.name + "' is missing"));
    }
  }
  if (request.outputs.empty()) {
    for (size_t i = 0; i < plan->outputs.size(); ++i) run->answer.push_back(i);
  }
  for (const RequestedOutput& want : request.outputs) {
    size_t i = 0;
    while (i < plan->outputs.size() && plan->outputs[i].spec.name != want.name) ++i;
    if (i == plan->outputs.size()) {
      return run->done(InvalidArgument(where + "unknown output '" + want.name + "'"));
    }
    run->answer.push_back(i);
  }
  run->readers_left = plan->readers;
  run->times = TimesOf(name);
  if (run->slo_ms) SplitBudget(*run);
  RunFrom(run, 0);
}

void PipelineServer::RunFrom(const std::shared_ptr<Run>& run, size_t index) {
  const PipelinePlan& plan = *run->plan;
  for (size_t i = index; i < plan.steps.size(); ++i) {
    const BoundStep& step = plan.steps[i];
    const StepConfig& c = step.config;
    const auto t0 = SteadyClock::now();
    if (c.kind == StepKind::kPreprocess || c.kind == StepKind::kPostprocess) {
      auto in = run->Take(c.inputs[0].second, c.inputs[0].first, {});
      if (!in.ok()) return run->done(run->StepError(c.name, in.status()));
      std::vector<Tensor> produced;
      Status failed;
      if (c.kind == StepKind::kPreprocess) {
        auto pixels = RunPreprocess(c.preprocess, *in, run->batch);
        if (pixels.ok()) {
          produced.push_back(std::move(pixels).value());
        } else {
          failed = pixels.status();
        }
      } else {
        auto outs = RunPostprocess(c.postprocess, *in, run->batch);
        if (outs.ok()) {
          produced = std::move(outs).value();
        } else {
          failed = outs.status();
        }
      }
      if (!failed.ok()) return run->done(run->StepError(c.name, failed));
      run->Keep(c.name, std::move(produced));
      const int64_t took = MicrosecondsSince(t0);
      if (run->times) {
        // Down at once, up by an eighth: a cold first decode (OpenCV's first
        // use took 26-29 ms against 32 us after) or a rare stall must not
        // eat the budgets of the queries after it; a lasting rise still shows.
        std::atomic<int64_t>& avg = run->times->us[i];
        const int64_t before = avg.load(std::memory_order_relaxed);
        avg.store(before == 0 || took < before ? took : before + (took - before) / 8,
                  std::memory_order_relaxed);
      }
      run->explained.emplace_back(c.name,
                                  std::string(StepKindName(c.kind)) + " us=" + std::to_string(took));
      continue;
    }
    if (c.kind == StepKind::kCascade) return RunCascadeStep(run, i);
    if (c.kind == StepKind::kSwitch || c.kind == StepKind::kFanout) return RunBranchStep(run, i);
    InferenceRequest r;
    if (c.kind == StepKind::kTask) {
      r.task = c.task;
    } else {
      r.model_name = c.model;
      r.model_version = c.version;
    }
    r.id = run->id;
    r.caller = run->caller;
    r.parameters = run->pass;
    r.parameters["somm_explain"] = std::string("compact");
    if (c.min_accuracy) {
      const double asked = NumberParameter(run->pass, "min_accuracy").value_or(0);
      r.parameters["min_accuracy"] = std::max(*c.min_accuracy, asked);
    }
    std::string share;
    if (run->slo_ms) {
      // What is left, less what the planned steps after this one need: this
      // step's share plus whatever the steps before it left unspent.
      const double left = *run->slo_ms - static_cast<double>(MicrosecondsSince(run->start)) / 1000.0;
      const double budget = run->planned ? left - run->reserved_after[i] : left;
      if (budget <= 0) {
        return run->done(DeadlineExceeded("pipeline '" + plan.name + "': its latency_slo_ms of " +
                                          FormatMs(*run->slo_ms) +
                                          " ms leaves nothing for step '" + c.name + "'"));
      }
      r.parameters["latency_slo_ms"] = budget;
      share = " slo_share_ms=" + FormatMs(budget);
      if (run->planned) share += " planned=" + run->planned_option[i];
    }
    for (size_t k = 0; k < c.inputs.size(); ++k) {
      // Not a structured binding: clang before 16 cannot capture one in a lambda.
      const std::string& name = c.inputs[k].first;
      const std::string& source = c.inputs[k].second;
      const auto spec = std::find_if(step.inputs.begin(), step.inputs.end(),
                                     [&](const TensorSpec& s) { return s.name == name; });
      auto t = run->Take(source, name, spec->shape);
      if (!t.ok()) return run->done(run->StepError(c.name, t.status()));
      r.inputs.push_back(std::move(t).value());
    }
    for (const auto& out : step.outputs) {
      if (run->readers_left.count(c.name + "." + out.name)) r.outputs.push_back({out.name, {}});
    }
    run->inner->Infer(std::move(r), [run, i, t0, share](StatusOr<InferenceResponse> result) {
      const StepConfig& c = run->plan->steps[i].config;
      if (!result.ok()) return run->done(run->StepError(c.name, result.status()));
      std::string what = std::string(StepKindName(c.kind)) + "=" + result->model_name + ":" +
                         result->model_version + " us=" + std::to_string(MicrosecondsSince(t0)) + share;
      if (auto it = result->parameters.find("somm"); it != result->parameters.end()) {
        if (const auto* s = std::get_if<std::string>(&it->second)) what += " " + *s;
      }
      run->explained.emplace_back(c.name, std::move(what));
      run->Keep(c.name, std::move(result->outputs));
      RunFrom(run, i + 1);
    });
    return;
  }
  run->done(Answer(*run));
}

Status PipelineServer::TakeModelInputs(Run& run, size_t i, InferenceRequest* base,
                                       std::vector<Tensor>* inputs,
                                       std::function<StatusOr<double>()>* budget_ms) {
  const BoundStep& step = run.plan->steps[i];
  const StepConfig& c = step.config;
  base->id = run.id;
  base->caller = run.caller;
  base->parameters = run.pass;
  base->parameters["somm_explain"] = std::string("compact");
  for (size_t k = 0; k < c.inputs.size(); ++k) {
    const std::string& name = c.inputs[k].first;
    const auto spec = std::find_if(step.inputs.begin(), step.inputs.end(),
                                   [&](const TensorSpec& s) { return s.name == name; });
    SOMM_ASSIGN_OR_RETURN(Tensor t, run.Take(c.inputs[k].second, name, spec->shape));
    inputs->push_back(std::move(t));
  }
  if (run.slo_ms) {
    // Each model query gets what is left, less what the planned steps after
    // this one need.
    *budget_ms = [&run, i]() -> StatusOr<double> {
      const double left = *run.slo_ms - static_cast<double>(MicrosecondsSince(run.start)) / 1000.0;
      const double budget = run.planned ? left - run.reserved_after[i] : left;
      if (budget <= 0) {
        return DeadlineExceeded("its latency_slo_ms of " + FormatMs(*run.slo_ms) +
                                " ms leaves nothing for the next model");
      }
      return budget;
    };
  }
  return Status::Ok();
}

void PipelineServer::RunBranchStep(const std::shared_ptr<Run>& run, size_t i) {
  const BoundStep& step = run->plan->steps[i];
  const StepConfig& c = step.config;
  BranchQuery q;
  q.inner = run->inner;
  q.step = &step;
  q.batch = run->batch;
  if (Status s = TakeModelInputs(*run, i, &q.base, &q.inputs, &q.budget_ms); !s.ok()) {
    return run->done(run->StepError(c.name, s));
  }
  if (c.kind == StepKind::kSwitch && !c.switch_.parameter.empty()) {
    if (auto it = run->asked.find(c.switch_.parameter); it != run->asked.end()) q.parameter = it->second;
  } else if (c.kind == StepKind::kSwitch) {
    auto t = run->Take(c.switch_.input, c.switch_.input, {});
    if (!t.ok()) return run->done(run->StepError(c.name, t.status()));
    q.selector = std::move(t).value();
  }
  auto next = [run, i](StatusOr<BranchResult> result) {
    const StepConfig& c = run->plan->steps[i].config;
    if (!result.ok()) return run->done(run->StepError(c.name, result.status()));
    run->explained.emplace_back(c.name, std::move(result->explanation));
    run->Keep(c.name, std::move(result->outputs));
    RunFrom(run, i + 1);
  };
  if (c.kind == StepKind::kSwitch) return RunSwitch(std::move(q), std::move(next));
  RunFanout(std::move(q), std::move(next));
}

void PipelineServer::RunCascadeStep(const std::shared_ptr<Run>& run, size_t i) {
  const BoundStep& step = run->plan->steps[i];
  const StepConfig& c = step.config;
  CascadeQuery q;
  q.inner = run->inner;
  q.step = &step;
  q.batch = run->batch;
  if (Status s = TakeModelInputs(*run, i, &q.base, &q.inputs, &q.budget_ms); !s.ok()) {
    return run->done(run->StepError(c.name, s));
  }
  // A query's min_accuracy is the cascade's, met by its calibration: each
  // stage is asked only for a variant as accurate as it was calibrated at
  // (the cheap stage alone never meets it, which is the point).
  if (auto asked = NumberParameter(run->pass, "min_accuracy")) {
    if (step.validation_accuracy < 0 || *asked > step.validation_accuracy + 1e-9) {
      return run->done(run->StepError(
          c.name, InvalidArgument("cannot meet min_accuracy=" + FormatFraction(*asked) + ": the cascade " +
                                  (step.validation_accuracy < 0
                                       ? std::string("has no validation accuracy")
                                       : "reaches " + FormatFraction(step.validation_accuracy) +
                                             " on its validation data"))));
    }
    for (double a : step.stage_accuracy) q.stage_min_accuracy.push_back(std::max(0.0, a - 1e-6));
  }
  RunCascade(std::move(q), [run, i](StatusOr<CascadeResult> result) {
    const StepConfig& c = run->plan->steps[i].config;
    if (!result.ok()) return run->done(run->StepError(c.name, result.status()));
    run->explained.emplace_back(c.name, std::move(result->explanation));
    run->Keep(c.name, std::move(result->outputs));
    RunFrom(run, i + 1);
  });
}

StatusOr<InferenceResponse> PipelineServer::Answer(Run& run) {
  const PipelinePlan& plan = *run.plan;
  InferenceResponse response;
  response.model_name = plan.name;
  response.model_version = kVersion;
  response.id = run.id;
  for (size_t i : run.answer) {
    const PipelineOutput& out = plan.outputs[i];
    auto t = run.Take(out.from, out.spec.name, out.spec.shape);
    if (!t.ok()) return Internal("pipeline '" + plan.name + "': " + t.status().message());
    response.outputs.push_back(std::move(t).value());
  }
  std::string steps, details;
  for (const auto& [step, what] : run.explained) {
    steps += (steps.empty() ? "" : ",") + step;
    details += "; " + step + ": " + what;
    response.parameters["somm_step_" + step] = what;
  }
  response.parameters["somm"] = "decision=pipeline pipeline=" + plan.name +
                                " server_us=" + std::to_string(MicrosecondsSince(run.start)) +
                                " steps=" + steps +
                                (run.split_note.empty() ? "" : " " + run.split_note) + details;
  return response;
}

void PipelineServer::SplitBudget(Run& run) const {
  if (!options_.variant_options) return;
  const PipelinePlan& plan = *run.plan;
  const auto state = inner_.ClusterView();
  const PriceList prices = inner_.Prices();
  const auto now = Clock::Real().Now();
  const std::vector<cluster::GroupState> no_groups;
  std::vector<SplitStep> steps;
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const StepConfig& c = plan.steps[i].config;
    SplitStep s;
    if (c.kind == StepKind::kSwitch || c.kind == StepKind::kFanout) {
      // Planned as taking no time: its models get what is left when it runs.
      steps.push_back(std::move(s));
      continue;
    }
    if (c.kind == StepKind::kPreprocess || c.kind == StepKind::kPostprocess) {
      s.fixed_ms = run.times ? static_cast<double>(run.times->us[i].load()) / 1000.0 : 0;
      steps.push_back(std::move(s));
      continue;
    }
    s.model = true;
    Requirements req;
    // A cascade is planned as its first stage, which every sample takes;
    // later stages get what is left when they run.
    const std::string model = c.kind == StepKind::kCascade ? c.cascade.models.front() : c.model;
    if (c.kind == StepKind::kTask) {
      req.task = c.task;
    } else {
      req.model = model;
    }
    double floor = NumberParameter(run.pass, "min_accuracy").value_or(0);
    if (c.min_accuracy) floor = std::max(floor, *c.min_accuracy);
    if (floor > 0) req.min_accuracy = floor;
    req.batch = run.batch;
    const std::vector<cluster::VariantOption> options =
        options_.variant_options(c.kind == StepKind::kTask ? "" : model, c.task);
    const SelectorState all =
        CandidatesFrom(state ? state->groups : no_groups, options, req, /*loaded_only=*/false);
    for (const Candidate& candidate : all.candidates) {
      // Each candidate alone: the selector's prediction for it, queue and
      // load included.
      SelectorState one;
      one.candidates.push_back(candidate);
      auto d = SelectVariant(req, one, prices, now);
      if (!d.ok()) continue;
      s.options.push_back({candidate.variant_id + "@" + candidate.hardware.Name(),
                           d->predicted_latency_ms, d->cost_usd});
    }
    steps.push_back(std::move(s));
  }
  const SplitPlan split = PlanSplit(steps, *run.slo_ms);
  if (!split.feasible) {
    run.split_note = "split=remaining (" + split.reason + ")";
    return;
  }
  run.planned = true;
  run.reserved_after.assign(steps.size(), 0);
  double after = 0;
  for (size_t i = steps.size(); i-- > 0;) {
    run.reserved_after[i] = after;
    after += split.budget_ms[i];
  }
  run.planned_option.assign(steps.size(), "");
  for (size_t i = 0; i < steps.size(); ++i) {
    if (split.choice[i] >= 0) run.planned_option[i] = steps[i].options[static_cast<size_t>(split.choice[i])].name;
  }
  char cost[32];
  std::snprintf(cost, sizeof cost, "%.3g", split.cost_usd);
  run.split_note = "split=planned planned_ms=" + FormatMs(split.predicted_ms) +
                   " planned_cost_usd=" + cost + " (" + split.reason + ")";
}

}  // namespace somm::pipeline
