// PipelineServer: the pipelines of a repository (pipeline_config.h), each
// served as a model, in front of the server that serves the models. It is
// an InferenceServer that answers for a pipeline's name itself and passes
// every other call to `inner` unchanged, so the REST and gRPC frontends
// (and batch jobs) serve pipelines without knowing of them: metadata,
// readiness, infer, the repository index, load and unload.
//
// A pipeline's model and task steps are queries to `inner` through
// InferenceApi::Infer, with the query's caller, so authentication,
// selection, batching and the explanation apply per step as to any query;
// a cascade step's stages are such queries, each on the samples the one
// before was not confident in (cascade_step.h), and so are a switch's
// case and a fan-out's branches, the latter at once (branch_step.h); the
// built-in steps run in this process on the thread that reaches them
// (the caller's for a first preprocess step, the answering model's after
// a model step). A value read by one step only is moved to it, not copied.
// The answer's `somm` parameter lists each step's choice, and each step's
// own explanation comes as `somm_step_<step>`. A query's `min_accuracy`,
// `max_cost` and `best_effort` go to every model and task step; its
// `latency_slo_ms` is the whole pipeline's: it is split across the steps
// by slo_split.h's PlanSplit, from each model step's variants as the
// selector predicts them now and the built-in steps' recent times, and each
// model or task step gets its share plus what earlier steps left unspent
// (when no plan fits, what is left of the budget) (docs/pipelines.md).
//
// Errors name the pipeline and the step. A caller that may not see a
// step's model gets what it would get for a pipeline that does not exist:
// the pipeline belongs to the tenant of the private models its steps use
// (OwnerOf, which the frontends' guard asks), and a step's NOT_FOUND
// answers such a caller as an unknown model.
//
// Lifecycle: LoadAll() after `inner` has loaded its models (a pipeline is
// bound to their signatures when it loads). Thread-safety: every method may
// be called concurrently after LoadAll; `inner` must outlive this.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "api/inference_server.h"
#include "cluster/cluster_state.h"
#include "common/mutex.h"
#include "pipeline/pipeline_plan.h"
#include "pipeline/slo_split.h"

namespace somm::pipeline {

struct PipelineServerOptions {
  std::string repository_path;
  // The owner tenant of a model ("" = public; nullopt = no such model).
  // Null: every model is public.
  std::function<std::optional<std::string>(const std::string& model)> model_owner;
  // Load only these folders' pipelines (--load-model); nullopt = all.
  std::optional<std::vector<std::string>> only;
  // The variants (with their profiles) a model step (`model`) or a task
  // step (`task`, model "") may run on, for the SLO split; their loaded
  // groups come from the inner server's ClusterView. Null: no split, each
  // step gets what is left of the budget.
  std::function<std::vector<cluster::VariantOption>(const std::string& model,
                                                    const std::string& task)>
      variant_options;
};

class PipelineServer : public InferenceServer {
 public:
  PipelineServer(PipelineServerOptions options, InferenceServer& inner);

  // Reads and binds every pipeline folder of the repository; one that fails
  // is listed UNAVAILABLE with the reason and does not stop the others.
  void LoadAll();
  bool IsPipeline(const std::string& name) const;
  // How many pipelines it holds (serving or UNAVAILABLE).
  size_t Count() const;
  // Reads and binds again every pipeline that is UNAVAILABLE but was not
  // unloaded: a router's catalog fills after its pipelines are first read,
  // so a step's model may be known only now.
  void RebindUnavailable();
  // A pipeline's owner tenant ("" = public); nullopt = not a pipeline.
  std::optional<std::string> OwnerOf(const std::string& name) const;

  bool IsLive() const override { return inner_.IsLive(); }
  bool IsReady() const override { return inner_.IsReady(); }
  ServerMetadata GetServerMetadata() const override { return inner_.GetServerMetadata(); }
  StatusOr<ModelMetadata> GetModelMetadata(const std::string& name,
                                           const std::string& version) const override;
  StatusOr<bool> IsModelReady(const std::string& name, const std::string& version) const override;
  void Infer(InferenceRequest request, InferCallback done) override;
  // Kept per model: a pipeline has none of its own yet (each step's model
  // has its own).
  StatusOr<std::vector<ModelStatistics>> GetModelStatistics(
      const std::string& name, const std::string& version) const override {
    if (IsPipeline(name)) return Unimplemented("statistics are not kept for pipelines yet");
    return inner_.GetModelStatistics(name, version);
  }
  StatusOr<ModelConfiguration> GetModelConfiguration(const std::string& name,
                                                     const std::string& version) const override {
    if (IsPipeline(name)) return Unimplemented("a pipeline's configuration is its pipeline.yaml");
    return inner_.GetModelConfiguration(name, version);
  }

  std::vector<RepositoryEntry> RepositoryIndex(bool ready_only) const override;
  Status LoadModel(const std::string& name) override;
  Status UnloadModel(const std::string& name) override;
  Status RegisterModel(RegistrationRequest request) override;
  StatusOr<RegistrationStatus> GetRegistrationStatus(const std::string& name) const override {
    return inner_.GetRegistrationStatus(name);
  }
  std::vector<TaskDescription> ListTasks(const Caller& caller) const override {
    return inner_.ListTasks(caller);
  }
  StatusOr<TaskDescription> DescribeTask(const std::string& task,
                                         const Caller& caller) const override {
    return inner_.DescribeTask(task, caller);
  }
  StatusOr<RolloutView> ChangeRollout(const RolloutChange& change, const Caller& caller) override {
    return inner_.ChangeRollout(change, caller);
  }
  StatusOr<RolloutView> GetRollout(const std::string& model, const Caller& caller) const override {
    return inner_.GetRollout(model, caller);
  }
  std::vector<DecisionRecord> RecentDecisions(size_t limit) const override {
    return inner_.RecentDecisions(limit);
  }
  std::shared_ptr<const cluster::ClusterState> ClusterView() const override {
    return inner_.ClusterView();
  }
  PriceList Prices() const override { return inner_.Prices(); }
  std::vector<DecisionRecord> RecentActions(size_t limit) const override {
    return inner_.RecentActions(limit);
  }
  std::map<std::string, int64_t> ControlActionTotals() const override {
    return inner_.ControlActionTotals();
  }

 private:
  // Each built-in step's recent time (an average, in us), which the SLO
  // split expects the next query's to take.
  struct StepTimes {
    explicit StepTimes(size_t steps) : us(steps) {}
    std::vector<std::atomic<int64_t>> us;
  };
  struct Entry {
    std::shared_ptr<const PipelinePlan> plan;  // null: UNAVAILABLE
    std::shared_ptr<StepTimes> times;
    std::string problem;
    bool unloaded = false;  // by the repository API: stays so until loaded
  };
  struct Run;

  Entry Load(const std::string& name) const;
  std::shared_ptr<const PipelinePlan> Plan(const std::string& name) const;
  std::shared_ptr<StepTimes> TimesOf(const std::string& name) const;
  // Splits a query's latency_slo_ms across its steps (slo_split.h).
  void SplitBudget(Run& run) const;
  StatusOr<StepSignature> Signature(const StepConfig& step) const;
  // Runs the steps from `index` on; a model or task step continues in its
  // answer's callback.
  static void RunFrom(const std::shared_ptr<Run>& run, size_t index);
  // A cascade step (cascade_step.h); continues with RunFrom(index + 1).
  static void RunCascadeStep(const std::shared_ptr<Run>& run, size_t index);
  // A switch or fan-out step (branch_step.h); continues with RunFrom(index + 1).
  static void RunBranchStep(const std::shared_ptr<Run>& run, size_t index);
  // What a cascade, switch or fan-out step's model queries share: the
  // query's caller and requirements, the step's inputs, the SLO budget.
  static Status TakeModelInputs(Run& run, size_t index, InferenceRequest* base,
                                std::vector<Tensor>* inputs,
                                std::function<StatusOr<double>()>* budget_ms);
  // The pipeline's outputs and what each step did.
  static StatusOr<InferenceResponse> Answer(Run& run);

  const PipelineServerOptions options_;
  InferenceServer& inner_;
  mutable Mutex mu_;
  std::map<std::string, Entry> pipelines_ SOMM_GUARDED_BY(mu_);
};

}  // namespace somm::pipeline
