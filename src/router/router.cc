#include "router/router.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <random>
#include <string_view>

#include "registry/task_catalog.h"
#include "router/requirements.h"
#include "router/router_query.h"
#include "runtime/backend_registry.h"
#include "worker/input_check.h"

namespace somm {

Router::Router(RouterOptions options, ModelCatalog& catalog, Registrar* registrar,
               cluster::ClusterStateStore& store,
               WorkerDirectory& workers, ControlClient& controller, ServingMetrics& metrics,
               DecisionLog& log)
    : options_(std::move(options)),
      where_{options_.zone, options_.cross_zone_rtt_ms},
      clock_(options_.clock != nullptr ? *options_.clock : Clock::Real()),
      routing_(options_.routing_policy != nullptr ? options_.routing_policy
                                                  : std::make_shared<PowerOfTwoChoices>()),
      catalog_(catalog),
      registrar_(registrar),
      store_(store),
      workers_(workers),
      controller_(controller),
      metrics_(metrics),
      log_(log) {}

Router::~Router() = default;

ServerMetadata Router::GetServerMetadata() const {
  // Triton's names for what the frontends serve from this router: the
  // statistics and model configuration extensions (router_statistics.cc).
  return ServerMetadata{options_.server_name,
                        options_.server_version,
                        {"binary_tensor_data", "model_repository", "parameters", "statistics",
                         "model_configuration"}};
}

StatusOr<ModelMetadata> Router::GetModelMetadata(const std::string& name,
                                                 const std::string& version) const {
  SOMM_ASSIGN_OR_RETURN(VersionPtr v, catalog_.Resolve(name, version));
  ModelMetadata md;
  md.name = name;
  md.versions = catalog_.VersionsOf(name);
  const ModelConfig& c = v->config;
  const BackendRegistration* runtime = FindBackend(c.platform);
  md.platform = runtime != nullptr ? runtime->metadata_platform : c.platform;
  for (const auto& s : c.inputs) md.inputs.push_back({s.name, DataTypeName(s.datatype), FullShape(c, s)});
  for (const auto& s : c.outputs) md.outputs.push_back({s.name, DataTypeName(s.datatype), FullShape(c, s)});
  if (!c.task.empty()) md.parameters["task"] = c.task;
  md.parameters["max_batch_size"] = c.max_batch_size;
  if (c.accuracy.value) md.parameters["accuracy"] = *c.accuracy.value;
  if (!c.accuracy.source.empty()) md.parameters["accuracy_source"] = c.accuracy.source;
  if (!c.description.empty()) md.parameters["description"] = c.description;
  if (c.image_preprocessing) md.parameters["preprocessing"] = PreprocessingToJson(*c.image_preprocessing);
  return md;
}

StatusOr<bool> Router::IsModelReady(const std::string& name, const std::string& version) const {
  auto v = catalog_.Resolve(name, version);
  if (v.ok()) return !shutting_down_.load();
  if (v.status().code() == StatusCode::kUnavailable) return false;
  return v.status();
}

std::vector<RepositoryEntry> Router::RepositoryIndex(bool ready_only) const {
  return catalog_.Index(ready_only);
}

Status Router::ModelControlAllowed(const char* what) const {
  if (options_.model_control_mode == "explicit") return Status::Ok();
  return FailedPrecondition(std::string(what) +
                            " is refused: the server runs with --model-control-mode " +
                            options_.model_control_mode +
                            "; the repository API's load and unload need "
                            "--model-control-mode explicit");
}

Status Router::LoadModel(const std::string& name) {
  if (shutting_down_) return Unavailable("server is shutting down");
  SOMM_RETURN_IF_ERROR(ModelControlAllowed("load"));
  return controller_.LoadModel(name);
}

Status Router::UnloadModel(const std::string& name) {
  SOMM_RETURN_IF_ERROR(ModelControlAllowed("unload"));
  return controller_.UnloadModel(name);
}

Status Router::RegisterModel(RegistrationRequest request) {
  if (shutting_down_) return Unavailable("server is shutting down");
  // A router started without a repository (deploy/'s) has nowhere to write
  // the model, and so no registrar.
  if (registrar_ == nullptr) {
    return FailedPrecondition(
        "this router has no model repository (--model-repository), so it cannot register "
        "models; register through a server or router that mounts the repository");
  }
  SOMM_ASSIGN_OR_RETURN(ModelConfig config, registrar_->Register(request));
  SOMM_RETURN_IF_ERROR(controller_.LoadModel(config.name));
  // The controller profiles (a cluster's leader, where the catalog that
  // carries the profiles to every router is written).
  return controller_.StartVariantJob(config.name, 1);
}

StatusOr<RegistrationStatus> Router::GetRegistrationStatus(const std::string& name) const {
  return controller_.GetRegistrationStatus(name);
}

std::vector<DecisionRecord> Router::RecentDecisions(size_t limit) const {
  return log_.Recent(limit);
}

uint64_t Router::LogDecision(DecisionRecord record) {
  metrics_.RecordDecision(record.outcome);
  spdlog::debug("decision {} [{}]: {} -> {} on {}: {}", record.target, record.requirements,
                record.outcome, record.variant, record.hardware, record.reason);
  return log_.Add(std::move(record));
}

Router::VersionStats& Router::StatsFor(const VersionRecord& v) {
  {
    ReaderLock lock(&stats_mu_);
    auto m = stats_by_model_.find(v.config.name);
    if (m != stats_by_model_.end()) {
      auto it = m->second->find(v.version);
      if (it != m->second->end()) return *it->second;
    }
  }
  WriterLock lock(&stats_mu_);
  auto& versions = stats_[v.config.name];
  stats_by_model_[v.config.name] = &versions;
  auto& row = versions[v.version];
  if (!row) {
    row = std::make_unique<VersionStats>();
    row->model = v.config.name;
    row->version = v.version;
    row->metrics = metrics_.ForModel(v.config.name, v.version_str);
    row->inference = std::make_unique<InferenceStatistics>(v.config.max_batch_size);
  }
  return *row;
}

void Router::SetVersion(Query& q, VersionPtr version) {
  q.stats = &StatsFor(*version);
  q.version = std::move(version);
}

void Router::Fail(const std::shared_ptr<Query>& q, Status status) {
  // Counted per model once the query reached one, as a query the model
  // refused or failed (bad inputs, a full queue, an error while it ran).
  q->stats->metrics->RecordFailure(StatusCodeName(status.code()));
  // The version's failures as the rollout policy counts them: the server's,
  // not a caller's bad input (which any version refuses alike).
  const StatusCode code = status.code();
  if (code != StatusCode::kInvalidArgument && code != StatusCode::kNotFound &&
      code != StatusCode::kUnauthenticated && code != StatusCode::kPermissionDenied) {
    q->stats->failed.fetch_add(1, std::memory_order_relaxed);
  }
  if (q->latency_slo_ms) q->stats->metrics->RecordSlo(false);
  if (q->log_number != 0) log_.Complete(q->log_number, -1, StatusCodeName(status.code()));
  q->done(std::move(status));
}

void Router::RecordDemand(VersionStats& d, const Requirements& req) {
  d.arrivals.fetch_add(1, std::memory_order_relaxed);
  if (req.latency_slo_ms) {
    const auto us = static_cast<int64_t>(*req.latency_slo_ms * 1000.0);
    int64_t cur = d.tightest_slo_us.load(std::memory_order_relaxed);
    while (us < cur && !d.tightest_slo_us.compare_exchange_weak(cur, us)) {
    }
  }
  if (req.min_accuracy) {
    const auto ppm = static_cast<int64_t>(*req.min_accuracy * 1e6);
    int64_t cur = d.strictest_accuracy_ppm.load(std::memory_order_relaxed);
    while (ppm > cur && !d.strictest_accuracy_ppm.compare_exchange_weak(cur, ppm)) {
    }
  }
}

void Router::PublishDemand() {
  std::vector<cluster::ModelDemand> rows;
  {
    ReaderLock lock(&stats_mu_);
    for (const auto& [_, versions] : stats_) {
      for (const auto& [__, d] : versions) {
        cluster::ModelDemand m;
        m.model = d->model;
        m.version = d->version;
        m.arrivals_total = d->arrivals.load(std::memory_order_relaxed);
        m.answered_total = d->answered.load(std::memory_order_relaxed);
        m.failed_total = d->failed.load(std::memory_order_relaxed);
        m.latency_ms_total =
            static_cast<double>(d->latency_us_total.load(std::memory_order_relaxed)) / 1000.0;
        m.compared_total = d->compared.load(std::memory_order_relaxed);
        m.disagreed_total = d->disagreed.load(std::memory_order_relaxed);
        // The tightest requirements since the last publication: this router
        // starts a new window each time it publishes; readers only read.
        const int64_t slo_us = d->tightest_slo_us.exchange(INT64_MAX);
        if (slo_us != INT64_MAX) m.latency_slo_ms = static_cast<double>(slo_us) / 1000.0;
        const int64_t acc = d->strictest_accuracy_ppm.exchange(0);
        if (acc > 0) m.min_accuracy = static_cast<double>(acc) / 1e6;
        rows.push_back(std::move(m));
      }
    }
  }
  store_.PutDemand(options_.id, std::move(rows));
}

Status Router::Prepare(Query& q, InferenceRequest& request) {
  const ModelConfig& c = q.version->config;
  const std::string label = c.name + ":" + q.version->version_str;
  SOMM_RETURN_IF_ERROR(PrepareInputs(c, label, std::move(request.inputs), &q.inputs));
  SOMM_ASSIGN_OR_RETURN(q.keep, SelectOutputs(c, label, request.outputs));
  q.samples = c.max_batch_size > 0 && !q.inputs.empty() ? q.inputs[0].shape[0] : 1;
  q.prepared = true;
  return Status::Ok();
}

void Router::Infer(InferenceRequest request, InferCallback done) {
  auto q = std::make_shared<Query>();
  q->start = clock_.Now();
  // In flight from here until answered, whatever path answers it (refused
  // at once, failed, or run after a load): every path calls q->done once.
  // The metrics, not the router: they outlive it (its contract), and an
  // answer may come from a worker after the router has begun to go.
  metrics_.AddInflightQueries(1);
  inflight_->fetch_add(1, std::memory_order_relaxed);
  // A failure of a query that reached a model version, whichever path
  // failed it (refused inputs, no variant fit, a failed load, the worker's
  // error), counts in that version's statistics. done is q's own and only
  // ever called through q, so q is alive while it runs.
  q->done = [metrics = &metrics_, inflight = inflight_, clock = &clock_, self = q.get(),
             done = std::move(done)](StatusOr<InferenceResponse> result) {
    if (!result.ok() && self->stats != nullptr) {
      self->stats->inference->RecordFailure(NanosBetween(self->start, clock->Now()), NowUnixMs());
    }
    metrics->AddInflightQueries(-1);
    inflight->fetch_sub(1, std::memory_order_relaxed);
    done(std::move(result));
  };
  q->id = std::move(request.id);
  q->decision.tenant = request.caller.tenant;
  if (shutting_down_) return q->done(Unavailable("server is shutting down"));
  std::string task = request.task;
  if (task.empty()) {
    auto it = request.parameters.find("task");
    if (it != request.parameters.end()) {
      const auto* s = std::get_if<std::string>(&it->second);
      if (!s) return q->done(InvalidArgument("parameter 'task' must be a string"));
      task = *s;
    }
  }
  q->compact = options_.compact_explanation;
  if (auto it = request.parameters.find("somm_explain"); it != request.parameters.end()) {
    const auto* s = std::get_if<std::string>(&it->second);
    if (!s || (*s != "full" && *s != "compact")) {
      return q->done(InvalidArgument("parameter 'somm_explain' must be \"full\" or \"compact\""));
    }
    q->compact = *s == "compact";
  }
  bool has_slo = false;
  auto req = ParseRequirements(request.parameters, &has_slo);
  if (!req.ok()) return q->done(req.status());
  if (!task.empty()) {
    std::vector<VersionPtr> versions = catalog_.ForTask(task);
    // The candidates are the models the caller may use: another tenant's
    // private model is never chosen, nor hinted at.
    std::erase_if(versions, [&](const VersionPtr& v) {
      return !request.caller.MayUse(v->config.owner_tenant);
    });
    if (versions.empty()) return q->done(NotFound("no loaded model serves task '" + task + "'"));
    // Checked against the task's signature first, so that a wrong input is
    // told what the task takes, whichever model the selector would pick.
    Status fits = CheckTaskInputs(TaskSignatureOf(task, versions), request.inputs);
    if (!fits.ok()) return q->done(std::move(fits));
    // The model is not known yet: inputs are checked against the chosen
    // one's signature, after selection and before anything loads.
    q->raw_inputs = std::move(request.inputs);
    q->requested_outputs = std::move(request.outputs);
    Requirements r = *req;
    r.task = task;
    r.batch = QuerySamples(q->raw_inputs);
    RouteSelected(q, std::move(versions), "task:" + task, r);
    return;
  }
  if (request.model_name.find(':') != std::string::npos) {
    RouteExplicit(q, request, *req);
    return;
  }
  auto v = catalog_.Resolve(request.model_name, request.model_version);
  if (!v.ok()) return q->done(v.status());
  if (!request.caller.MayUse((*v)->config.owner_tenant)) {
    return q->done(ModelCatalog::UnknownModel(request.model_name));
  }
  if (request.model_version.empty()) {
    if (auto rollout = catalog_.RolloutOf(request.model_name); rollout && rollout->Active()) {
      ApplyRollout(*q, *rollout, request, v);
    }
  }
  SetVersion(*q, *v);
  Status prepared = Prepare(*q, request);
  if (!prepared.ok()) return Fail(q, std::move(prepared));
  RecordDemand(*q->stats, *req);
  if (has_slo || req->best_effort) {
    Requirements r = *req;
    r.model = request.model_name;
    r.batch = q->samples;
    RouteSelected(q, {*v}, request.model_name, r);
    return;
  }
  q->decision.target = request.model_name;
  RouteDefault(std::move(q));
}

StatusOr<RolloutView> Router::ChangeRollout(const RolloutChange& change, const Caller& caller) {
  SOMM_ASSIGN_OR_RETURN(VersionPtr v, catalog_.Resolve(change.model, ""));
  if (!caller.MayUse(v->config.owner_tenant)) return ModelCatalog::UnknownModel(change.model);
  return controller_.ChangeRollout(change);
}

StatusOr<RolloutView> Router::GetRollout(const std::string& model, const Caller& caller) const {
  SOMM_ASSIGN_OR_RETURN(VersionPtr v, catalog_.Resolve(model, ""));
  if (!caller.MayUse(v->config.owner_tenant)) return ModelCatalog::UnknownModel(model);
  return controller_.GetRollout(model);
}

void Router::ApplyRollout(Query& q, const Rollout& rollout, const InferenceRequest& request,
                          StatusOr<VersionPtr>& version) {
  // A uniform draw per query: the canary's share holds for any client mix.
  thread_local std::mt19937_64 rng{std::random_device{}()};
  const double draw = std::uniform_real_distribution<double>(0.0, 100.0)(rng);
  const std::string canary = std::to_string(rollout.canary_version);
  const std::string stable = std::to_string(rollout.stable_version);
  const std::string share = std::to_string(rollout.percent) + "%";
  if (!rollout.DrawsCanary(draw)) {
    q.rollout_note = "stable v" + stable + " (" + ModeName(rollout.mode) + " canary v" + canary +
                     " draws " + share + ")";
    return;
  }
  auto canary_version = catalog_.Resolve(request.model_name, canary);
  if (!canary_version.ok()) {
    q.rollout_note = "stable v" + stable + " (canary v" + canary + " is not served)";
    return;
  }
  if (rollout.mode == Rollout::Mode::kSplit) {
    version = std::move(canary_version);
    q.rollout_note = "canary v" + canary + " (drew the canary's " + share + ")";
    return;
  }
  // Shadow: the same query to the canary, whose answer only is compared;
  // the client's comes from the stable version. The copy is made before
  // Prepare() takes the inputs.
  q.rollout_note = "stable v" + stable + "; mirrored to shadow v" + canary + " (" + share + ")";
  InferenceRequest copy = request;
  copy.model_version = canary;
  copy.parameters.erase("somm_explain");
  auto pair = std::make_shared<ShadowPair>();
  VersionStats* shadow_stats = &StatsFor(**canary_version);
  q.done = [pair, shadow_stats, done = std::move(q.done)](StatusOr<InferenceResponse> r) {
    pair->Offer(r, /*is_shadow=*/false, *shadow_stats);
    done(std::move(r));
  };
  Infer(std::move(copy), [pair, shadow_stats](StatusOr<InferenceResponse> r) {
    pair->Offer(r, /*is_shadow=*/true, *shadow_stats);
  });
}

void Router::RouteDefault(std::shared_ptr<Query> q) {
  const VersionRecord& v = *q->version;
  HardwareConfig hw = controller_.BaseHardware(v);
  q->decision.requirements = "none";
  q->decision.outcome = "default";
  q->decision.reason = "model named without SLOs: its configured instances run it as registered";
  const std::string as_registered = AsRegisteredVariant(v);
  q->variant = as_registered;
  q->hardware = hw;
  const auto state = store_.Read();
  bool found = PickWorker(*q, state->groups);
  if (!found && options_.managed) {
    // The controller replaced the as-registered instances (an upgrade under
    // load): the replicas it keeps serve the model's plain queries too.
    const cluster::GroupState* best = nullptr;
    for (const auto& g : state->groups) {
      if (g.loading || g.model != v.config.name || g.version != v.version) continue;
      if (!best || g.replicas > best->replicas) best = &g;
    }
    if (best) {
      q->variant = best->variant;
      hw = best->hardware;
      q->hardware = hw;
      // That group may have a share on several workers: choose among them
      // as for any group (zone first, then the power of two choices).
      found = PickWorker(*q, state->groups);
      q->decision.outcome = "managed";
      q->decision.reason = "model named without SLOs; the controller replaced its as-registered "
                           "instances with " + v.config.name + ":" + v.version_str + ":" +
                           best->variant + "@" + hw.Name();
    }
  }
  q->hardware = hw;
  q->price_per_s = options_.prices.PerSecond(hw);
  q->decision.variant = v.config.name + ":" + v.version_str + ":" + q->variant;
  q->decision.hardware = hw.Name();
  metrics_.RecordDecision(q->decision.outcome);
  if (found) return Dispatch(std::move(q), true);
  q->decision.reason += " (loaded on demand: cold start)";
  LoadThenDispatch(std::move(q), as_registered, hw, v.config.instance_count,
                   "a query for a model with no instance loaded");
}

void Router::RouteExplicit(std::shared_ptr<Query> q, InferenceRequest& request,
                           const Requirements& req) {
  // "model:version:variant[@hardware]"
  const std::string& name = request.model_name;
  const auto first = name.find(':');
  const auto second = name.find(':', first + 1);
  if (second == std::string::npos) {
    return q->done(InvalidArgument("variant '" + name + "' must be model:version:variant[@hardware]"));
  }
  const std::string model = name.substr(0, first);
  const std::string ver = name.substr(first + 1, second - first - 1);
  std::string variant = name.substr(second + 1);
  std::string hw_name;
  if (const auto at = variant.find('@'); at != std::string::npos) {
    hw_name = variant.substr(at + 1);
    variant = variant.substr(0, at);
  }
  if (!request.model_version.empty() && request.model_version != ver) {
    return q->done(InvalidArgument("variant '" + name + "' names version " + ver +
                                   " but the request names " + request.model_version));
  }
  auto v = catalog_.Resolve(model, ver);
  if (!v.ok()) return q->done(v.status());
  if (!request.caller.MayUse((*v)->config.owner_tenant)) {
    return q->done(ModelCatalog::UnknownModel(model));
  }
  SetVersion(*q, *v);
  Status prepared = Prepare(*q, request);
  if (!prepared.ok()) return Fail(q, std::move(prepared));
  // The query's SLO still holds: the batcher admits, batches and drops by it.
  q->latency_slo_ms = req.latency_slo_ms;
  q->best_effort = req.best_effort;
  q->decision.unix_ms = NowUnixMs();
  q->decision.target = name;
  q->decision.requirements = "explicit variant";
  q->decision.outcome = "explicit";
  const VersionRecord& rec = **v;
  const VariantProfile* profile = nullptr;
  for (const auto& p : rec.profiles) {
    if (p.variant == variant) profile = &p;
  }
  HardwareConfig hw = controller_.BaseHardware(rec);
  std::string reason = "variant named explicitly";
  if (!profile) {
    const std::string as_registered = AsRegisteredVariant(rec);
    if (!(variant == as_registered && (hw_name.empty() || hw_name == hw.Name()))) {
      std::string known = as_registered;
      for (const auto& p : rec.profiles) {
        if (p.variant != as_registered) known += ", " + p.variant;
      }
      return q->done(NotFound("model '" + model + "' version " + ver + " has no variant '" +
                              variant + "' (available: " + known + ")"));
    }
    q->decision.variant = model + ":" + ver + ":" + variant;
  } else {
    const HardwareProfile* chosen = nullptr;
    for (const auto& hp : profile->hardware) {
      if (hw_name.empty() || hp.hardware.Name() == hw_name) {
        chosen = &hp;
        break;
      }
    }
    if (!chosen) {
      return q->done(NotFound("variant '" + profile->Id() + "' was not profiled on hardware '" +
                              hw_name + "'"));
    }
    hw = chosen->hardware;
    q->decision.variant = profile->Id();
    q->decision.predicted_latency_ms = chosen->latency.Predict(1);
    if (!profile->usable) reason += " (marked unusable: " + profile->unusable_reason + ")";
  }
  q->variant = variant;
  q->hardware = hw;
  q->price_per_s = options_.prices.PerSecond(hw);
  q->decision.hardware = hw.Name();
  q->decision.reason = reason;
  const auto snapshot = store_.Read();
  const bool held = PickWorker(*q, snapshot->groups);
  DecisionRecord logged = q->decision;
  if (held && !options_.zone.empty()) logged.reason += "; " + ZoneReason(*q);
  q->log_number = LogDecision(std::move(logged));
  if (held) return Dispatch(std::move(q), true);
  LoadThenDispatch(std::move(q), variant, hw, 1, "variant named explicitly");
}

void Router::RouteSelected(std::shared_ptr<Query> q, std::vector<VersionPtr> versions,
                           const std::string& target, const Requirements& req) {
  // The one cluster model: this worker's groups as they are now, and the
  // profiled options of the versions in question (one version's are its
  // shared rows, not a copy).
  const std::vector<cluster::GroupState> groups = Groups(versions);
  std::shared_ptr<const std::vector<cluster::VariantOption>> options;
  if (versions.size() == 1) {
    options = version_options_.Of(versions[0]);
  } else {
    auto all = std::make_shared<std::vector<cluster::VariantOption>>();
    for (const VersionPtr& v : versions) version_options_.Append(v, all.get());
    options = std::move(all);
  }
  std::vector<size_t> origins;
  SelectorState candidates =
      CandidatesFrom(groups, *options, req, !options_.managed, &origins, where_);
  const auto now = clock_.Now();
  // A variant's options on several thread counts come one after another and
  // share their overhead (learnt per variant and device): one lookup each.
  // One whose instances have idled runs its next batch cold: predicted at
  // what cold batches cost, when that is more.
  const Candidate* previous = nullptr;
  std::vector<bool> cold(candidates.candidates.size(), false);
  const auto cold_after = cost_calibration_.options().cold_after;
  for (size_t i = 0; i < candidates.candidates.size(); ++i) {
    Candidate& c = candidates.candidates[i];
    if (previous != nullptr && previous->variant_id == c.variant_id &&
        previous->hardware.device == c.hardware.device &&
        previous->hardware.device_index == c.hardware.device_index) {
      c.batch_overhead_ms = previous->batch_overhead_ms;
      cold[i] = cold[i - 1];
    } else {
      const CostCalibration::Learnt learnt = cost_calibration_.Lookup(
          Device{c.hardware.device, c.hardware.device_index}.ToString(), c.variant_id, now);
      c.batch_overhead_ms = CandidateOverheadMs(learnt, c, groups);
      cold[i] = CandidateIsCold(c, groups, now, cold_after);
      if (cold[i] && learnt.cold_ms) {
        c.batch_overhead_ms = std::max(c.batch_overhead_ms, *learnt.cold_ms);
      }
    }
    previous = &c;
  }
  DecisionRecord record;
  record.unix_ms = NowUnixMs();
  record.tenant = q->decision.tenant;
  record.target = target;
  record.requirements = DescribeRequirements(req);
  if (candidates.candidates.empty()) {
    record.outcome = "rejected";
    record.reason = "no profiled variants yet for " + target + " (variant generation in progress?)";
    LogDecision(record);
    return q->done(Unavailable(record.reason));
  }
  auto decision = SelectVariant(req, candidates, options_.prices, now);
  if (!decision.ok()) {
    record.outcome = "rejected";
    record.reason = decision.status().message();
    LogDecision(record);
    return q->done(decision.status());
  }
  const cluster::VariantOption& o = (*options)[origins[decision->candidate]];
  for (const VersionPtr& v : versions) {
    if (v->config.name == o.model && v->version == o.version && v != q->version) SetVersion(*q, v);
  }
  if (!q->prepared) {
    // A task query: check its inputs against the chosen model now, before
    // any load and before it counts as demand.
    InferenceRequest r;
    r.inputs = std::move(q->raw_inputs);
    r.outputs = std::move(q->requested_outputs);
    Status prepared = Prepare(*q, r);
    if (!prepared.ok()) return Fail(q, std::move(prepared));
    RecordDemand(*q->stats, req);
  }
  q->variant = o.variant;
  q->hardware = o.hardware;
  q->latency_slo_ms = req.latency_slo_ms;
  q->best_effort = req.best_effort;
  q->price_per_s = options_.prices.PerSecond(o.hardware);
  if (decision->outcome != DecisionOutcome::kBestEffort) q->max_cost_usd = req.max_cost_usd;
  q->predicted_charge_usd = decision->charge_usd;
  q->profiled = o.latency;
  q->calibration_device = Device{o.hardware.device, o.hardware.device_index}.ToString();
  q->cold_batch = decision->instance_id >= 0 && cold[decision->candidate];
  record.outcome = DecisionOutcomeName(decision->outcome);
  record.variant = o.model + ":" + std::to_string(o.version) + ":" + o.variant;
  record.hardware = o.hardware.Name();
  record.predicted_latency_ms = decision->predicted_latency_ms;
  record.cost_usd = decision->cost_usd;
  record.reason = decision->reason;
  q->decision = record;
  const bool held = decision->instance_id >= 0 && PickWorker(*q, groups, decision->instance_id);
  if (held && !options_.zone.empty()) record.reason += "; " + ZoneReason(*q);
  q->log_number = LogDecision(std::move(record));
  if (held) return Dispatch(std::move(q), true);
  LoadThenDispatch(std::move(q), o.variant, o.hardware, 1, "chosen by the selector for " + target);
}

bool Router::AnsweredFromCache(const std::shared_ptr<Query>& q) {
  if (q->cache_checked) return false;
  q->cache_checked = true;
  const VersionRecord& v = *q->version;
  if (!v.config.response_cache.enable) return false;
  // The outputs asked for are part of the answer, so of the key.
  std::vector<RequestedOutput> outputs;
  for (size_t i = 0; i < v.config.outputs.size() && i < q->keep.size(); ++i) {
    if (q->keep[i]) outputs.push_back({v.config.outputs[i].name, {}});
  }
  std::string key = ResponseCache::KeyFor(v.config.name, v.version, v.generation, q->inputs, outputs);
  std::optional<InferenceResponse> kept = response_cache_.Lookup(v.config.name, key);
  metrics_.RecordResponseCache(v.config.name, kept.has_value());
  if (!kept) {
    q->cache_key = std::move(key);
    return false;
  }
  InferenceResponse response = std::move(*kept);
  response.id = q->id;
  response.parameters.clear();
  const int64_t total_us = MicrosBetween(q->start, clock_.Now());
  const std::string reason = "answered from the response cache of " + v.config.name + ":" +
                             v.version_str + " (the same inputs; the model did not run)";
  if (q->compact) {
    response.parameters["somm"] = "decision=cache cache_hit=true server_us=" +
                                  std::to_string(total_us) + " cost_usd=0 reason=" + reason;
  } else {
    auto& p = response.parameters;
    p["somm_cache_hit"] = true;
    p["somm_decision"] = std::string("cache");
    p["somm_server_us"] = total_us;
    p["somm_latency_ms"] = static_cast<double>(total_us) / 1000.0;
    p["somm_cost_usd"] = 0.0;
    p["somm_reason"] = reason;
  }
  q->stats->metrics->RecordSuccess(0, 0, static_cast<double>(total_us));
  q->stats->inference->RecordCacheHit(NanosBetween(q->start, clock_.Now()), NowUnixMs());
  if (q->latency_slo_ms) {
    q->stats->metrics->RecordSlo(static_cast<double>(total_us) <= *q->latency_slo_ms * 1000.0);
  }
  if (q->log_number != 0) log_.Complete(q->log_number, static_cast<double>(total_us) / 1000.0, "OK");
  q->done(std::move(response));
  return true;
}

void Router::LoadThenDispatch(std::shared_ptr<Query> q, const std::string& variant,
                              const HardwareConfig& hw, int replicas, const std::string& reason) {
  if (AnsweredFromCache(q)) return;
  VersionPtr v = q->version;
  controller_.EnsureLoaded(v, variant, hw, replicas, reason, /*urgent=*/true,
                           [this, q = std::move(q)](const Status& s, const std::string& worker) mutable {
                             // A load that failed is a routing error, not
                             // one the model made: not counted as its failure.
                             if (!s.ok()) return q->done(s);
                             q->worker = worker;  // before this router's view shows it
                             q->zone_choice = Query::ZoneChoice::kLoaded;
                             q->zone.clear();
                             const auto view = store_.Read();
                             for (const auto& g : view->groups) {
                               if (g.worker == worker) q->zone = g.zone;
                             }
                             Dispatch(std::move(q), false);
                           });
}

std::vector<cluster::GroupState> Router::Groups(const std::vector<VersionPtr>& versions) {
  const auto snapshot = store_.Read();
  // Only a view of one worker (or of none yet) may be the embedded server's
  // local one: listing the Ids() of a large cluster per query cost more than
  // routing the query.
  const auto& devices = snapshot->devices;
  if (std::all_of(devices.begin(), devices.end(),
                  [&devices](const auto& d) { return d.worker == devices.front().worker; })) {
    const std::vector<std::string> ids = workers_.Ids();
    if (ids.size() == 1) {
      std::shared_ptr<WorkerStub> stub = workers_.Find(ids[0]);
      if (stub && stub->local()) return stub->Report().groups;
    }
  }
  std::vector<std::string> models;
  for (const VersionPtr& v : versions) models.push_back(v->config.name);
  return groups_by_model_.Of(snapshot, models);
}

}  // namespace somm
