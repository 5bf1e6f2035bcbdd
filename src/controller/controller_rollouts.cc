// The controller's rollouts (controller.h, rollout/rollout.h): starting,
// changing and ticking a model's canary.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <future>

#include "controller/controller.h"
#include "rollout/rollout_policy.h"

namespace somm {

namespace {

int64_t UnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// What the catalog knows of a version for the policy: whether it is
// profiled, and the held-out top-1 of its as-registered variant.
void Describe(const ModelCatalog& catalog, const std::string& model, int64_t version,
              VersionWindow* w) {
  w->accuracy.reset();
  auto v = catalog.Resolve(model, std::to_string(version));
  w->profiled = v.ok() && !(*v)->profiles.empty();
  if (!v.ok()) return;
  const std::string as_registered = AsRegisteredVariant(**v);
  for (const VariantProfile& p : (*v)->profiles) {
    if (p.variant == as_registered) w->accuracy = p.accuracy;
  }
}

// What `totals` holds beyond `base`: the current step's outcomes.
VersionWindow Since(const cluster::ModelDemand& totals, const cluster::ModelDemand& base) {
  VersionWindow w;
  w.answered = std::max<int64_t>(0, totals.answered_total - base.answered_total);
  w.failed = std::max<int64_t>(0, totals.failed_total - base.failed_total);
  w.latency_ms_sum = std::max(0.0, totals.latency_ms_total - base.latency_ms_total);
  w.compared = std::max<int64_t>(0, totals.compared_total - base.compared_total);
  w.disagreed = std::max<int64_t>(0, totals.disagreed_total - base.disagreed_total);
  return w;
}

std::string StepOf(const Rollout& r) {
  return std::to_string(r.step_started_unix_ms) + "/" + std::to_string(r.percent) + "/" +
         ModeName(r.mode) + "/" + StateName(r.state);
}

}  // namespace

Status Controller::ServeRolloutVersions(const std::string& name) {
  std::vector<RepositoryEntry> problems;
  std::vector<VersionPtr> wanted = catalog_.Read(name, &problems);
  std::vector<VersionPtr> served;
  for (const VersionPtr& v : wanted) {
    // A version already served keeps its record (its generation, profiles).
    auto current = catalog_.Resolve(name, v->version_str);
    if (current.ok()) {
      served.push_back(*current);
      continue;
    }
    std::promise<Status> p;
    auto f = p.get_future();
    EnsureLoaded(v, AsRegisteredVariant(*v), BaseHardware(*v), v->config.instance_count,
                 "rollout: version " + v->version_str + " serves beside the stable one", true,
                 [&p](const Status& s, const std::string&) { p.set_value(s); },
                 /*query_waits=*/false);
    Status s = f.get();
    if (!s.ok()) {
      return FailedPrecondition("rollout of model '" + name + "': version " + v->version_str +
                                " failed to load: " + s.message());
    }
    spdlog::info("rollout: loaded model {} version {}", name, v->version);
    served.push_back(v);
  }
  // Versions still served by the model's policy stay; Publish keeps the
  // rollout already set.
  for (const std::string& version : catalog_.VersionsOf(name)) {
    if (std::none_of(served.begin(), served.end(),
                     [&version](const VersionPtr& v) { return v->version_str == version; })) {
      if (auto v = catalog_.Resolve(name, version); v.ok()) served.push_back(*v);
    }
  }
  std::sort(served.begin(), served.end(),
            [](const VersionPtr& a, const VersionPtr& b) { return a->version < b->version; });
  catalog_.Publish(name, std::move(served), std::move(problems));
  return Status::Ok();
}

StatusOr<RolloutView> Controller::ChangeRollout(const RolloutChange& change) {
  if (!IsValidModelName(change.model)) {
    return InvalidArgument("invalid model name '" + change.model + "'");
  }
  if (stopping_) return Unavailable("server is shutting down");
  MutexLock lifecycle(&lifecycle_mu_);
  const std::string& name = change.model;
  const std::string& repo = catalog_.repository_path();
  SOMM_ASSIGN_OR_RETURN(VersionPtr serving, catalog_.Resolve(name, ""));
  std::shared_ptr<const Rollout> current = catalog_.RolloutOf(name);
  const int64_t now_ms = UnixMs();
  if (change.kind != RolloutChange::Kind::kStart) {
    if (!current || !current->Active()) {
      return FailedPrecondition("model '" + name + "' has no canary running" +
                                (current ? std::string(" (its rollout of version ") +
                                               std::to_string(current->canary_version) + " was " +
                                               StateName(current->state) + ")"
                                         : std::string()));
    }
    if (change.version && *change.version != current->canary_version) {
      return FailedPrecondition("model '" + name + "': the canary is version " +
                                std::to_string(current->canary_version) + ", not " +
                                std::to_string(*change.version));
    }
    Rollout r = *current;
    const std::string who = change.reason.empty() ? "by an operator" : "by an operator: " + change.reason;
    std::string event;
    if (change.kind == RolloutChange::Kind::kSetPercent) {
      r.percent = *change.percent;
      if (change.automatic) r.automatic = *change.automatic;
      event = "set";
      r.Record(now_ms, event, "share set to " + std::to_string(r.percent) + "% " + who);
    } else if (change.kind == RolloutChange::Kind::kPromote) {
      r.state = Rollout::State::kPromoted;
      r.percent = 100;
      event = "promoted";
      r.Record(now_ms, event, "version " + std::to_string(r.canary_version) + " promoted " + who);
    } else {
      r.state = Rollout::State::kRolledBack;
      r.percent = 0;
      event = "rolled_back";
      r.Record(now_ms, event, "version " + std::to_string(r.canary_version) + " rolled back " + who);
    }
    r.step_started_unix_ms = now_ms;
    MutexLock lock(&rollout_mu_);
    SOMM_RETURN_IF_ERROR(CommitRollout(r, event));
    return ViewOf(r);
  }
  // Start.
  const int64_t canary = *change.version;
  if (current && current->Active() && current->canary_version != canary) {
    return FailedPrecondition("model '" + name + "' has a canary running (version " +
                              std::to_string(current->canary_version) + " at " +
                              std::to_string(current->percent) +
                              "%): promote or roll it back first");
  }
  const int64_t stable = current && current->Active() ? current->stable_version : serving->version;
  if (canary == stable) {
    return InvalidArgument("model '" + name + "': version " + std::to_string(canary) +
                           " already serves its unversioned queries");
  }
  std::error_code ec;
  const auto folder = std::filesystem::path(repo) / name / std::to_string(canary);
  if (!std::filesystem::is_directory(folder, ec)) {
    return NotFound("model '" + name + "' has no version " + std::to_string(canary) + " (" + name +
                    "/" + std::to_string(canary) + " is missing)");
  }
  Rollout r;
  r.model = name;
  r.stable_version = stable;
  r.canary_version = canary;
  r.mode = change.mode;
  if (change.steps) r.steps = *change.steps;
  r.automatic = change.automatic.value_or(true);
  r.bounds = change.bounds;
  r.percent = change.percent.value_or(r.mode == Rollout::Mode::kShadow ? 100 : r.steps.front());
  r.started_unix_ms = now_ms;
  r.step_started_unix_ms = now_ms;
  r.Record(now_ms, "started",
           std::string(ModeName(r.mode)) + " canary of version " + std::to_string(canary) +
               " against version " + std::to_string(stable) + " at " +
               std::to_string(r.percent) + "%" +
               (r.automatic ? ", steps" : ", held there (manual)") +
               [&r] {
                 if (!r.automatic) return std::string();
                 std::string steps;
                 for (int s : r.steps) steps += " " + std::to_string(s);
                 return steps;
               }() +
               (change.reason.empty() ? "" : ": " + change.reason));
  // Saved first: Read() serves the versions the saved rollout pins. A
  // canary that cannot load leaves the previous record (or none) in place.
  auto previous = LoadRollout(repo, name);
  SOMM_RETURN_IF_ERROR(SaveRollout(repo, r));
  Status served = ServeRolloutVersions(name);
  if (!served.ok()) {
    if (previous.ok() && previous->has_value()) {
      (void)SaveRollout(repo, **previous);
    } else {
      std::filesystem::remove(std::filesystem::path(repo) / ".somm" / "rollouts" / (name + ".json"), ec);
    }
    return served;
  }
  // Its accuracy on held-out data, for the policy: profiled as any version.
  for (int64_t version : {stable, canary}) {
    auto v = catalog_.Resolve(name, std::to_string(version));
    if (registrar_ != nullptr && v.ok() && (*v)->profiles.empty()) {
      registrar_->StartVariantJob((*v)->config, version);
    }
  }
  MutexLock lock(&rollout_mu_);
  SOMM_RETURN_IF_ERROR(CommitRollout(r, "started"));
  return ViewOf(r);
}

StatusOr<RolloutView> Controller::GetRollout(const std::string& model) {
  SOMM_ASSIGN_OR_RETURN(VersionPtr serving, catalog_.Resolve(model, ""));
  (void)serving;
  std::shared_ptr<const Rollout> r = catalog_.RolloutOf(model);
  if (!r) return NotFound("model '" + model + "' has no rollout");
  MutexLock lock(&rollout_mu_);
  return ViewOf(*r);
}

RolloutView Controller::ViewOf(const Rollout& rollout) {
  RolloutView view;
  view.rollout = rollout;
  auto m = rollout_memory_.find(rollout.model);
  if (m != rollout_memory_.end() && m->second.step == StepOf(rollout)) {
    view.stable = m->second.stable;
    view.canary = m->second.canary;
  }
  Describe(catalog_, rollout.model, rollout.stable_version, &view.stable);
  Describe(catalog_, rollout.model, rollout.canary_version, &view.canary);
  return view;
}

Status Controller::CommitRollout(Rollout rollout, const std::string& event) {
  SOMM_RETURN_IF_ERROR(SaveRollout(catalog_.repository_path(), rollout));
  const std::string model = rollout.model;
  const int percent = rollout.percent;
  const std::string label = model + ":" + std::to_string(rollout.canary_version);
  const std::string reason = rollout.reason;
  catalog_.SetRollout(model, std::move(rollout));
  metrics_.RecordRollout(model, event, percent);
  RecordControl("canary_" + event, model, label, "", reason);
  if (options_.on_rollout_change) options_.on_rollout_change(model);
  return Status::Ok();
}

void Controller::TickRollouts(const std::vector<cluster::ModelDemand>& demand,
                              cluster::TimePoint now) {
  MutexLock lock(&rollout_mu_);
  // Only models with a rollout: listing every version and looking up each
  // one's rollout cost a tick more than its decisions at thousands of models.
  for (const auto& [model, r] : catalog_.Rollouts()) {
    // Only running canaries, whose canary version is registered.
    if (!r->Active() || !catalog_.Resolve(model, std::to_string(r->canary_version)).ok()) {
      continue;
    }
    cluster::ModelDemand stable_now;
    cluster::ModelDemand canary_now;
    for (const cluster::ModelDemand& d : demand) {
      if (d.model != model) continue;
      if (d.version == r->stable_version) stable_now = d;
      if (d.version == r->canary_version) canary_now = d;
    }
    RolloutMemory& m = rollout_memory_[model];
    const std::string step = StepOf(*r);
    if (m.step != step) {
      // A new step (or a record this controller has not seen): its window
      // starts now.
      m = RolloutMemory{};
      m.step = step;
      m.stable_base = stable_now;
      m.canary_base = canary_now;
      m.step_start = now;
    }
    m.stable = Since(stable_now, m.stable_base);
    m.canary = Since(canary_now, m.canary_base);
    // Unprofiled versions get their variant job (the policy waits for it).
    for (int64_t version : {r->stable_version, r->canary_version}) {
      auto record = catalog_.Resolve(model, std::to_string(version));
      if (!record.ok() || !(*record)->profiles.empty() || m.jobs_started.count(version) > 0) {
        continue;
      }
      auto job = GetRegistrationStatus(model);
      if (job.ok() && job->state == "GENERATING") continue;
      if (registrar_ != nullptr) registrar_->StartVariantJob((*record)->config, version);
      m.jobs_started.insert(version);
    }
    Describe(catalog_, model, r->stable_version, &m.stable);
    Describe(catalog_, model, r->canary_version, &m.canary);
    const double age_s = std::chrono::duration<double>(now - m.step_start).count();
    const RolloutDecision d = DecideRollout(*r, m.stable, m.canary, age_s);
    if (d.kind == RolloutDecision::Kind::kHold) continue;
    Rollout next = *r;
    next.percent = d.percent;
    next.mode = d.mode;
    next.step_started_unix_ms = UnixMs();
    std::string event = "advanced";
    if (d.kind == RolloutDecision::Kind::kPromote) {
      next.state = Rollout::State::kPromoted;
      event = "promoted";
    } else if (d.kind == RolloutDecision::Kind::kRollBack) {
      next.state = Rollout::State::kRolledBack;
      event = "rolled_back";
    }
    next.Record(next.step_started_unix_ms, event, d.reason);
    Status s = CommitRollout(std::move(next), event);
    if (!s.ok()) spdlog::error("rollout of {}: {}", model, s.message());
  }
}

}  // namespace somm
