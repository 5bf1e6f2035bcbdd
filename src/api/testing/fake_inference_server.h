// FakeInferenceServer: an in-memory InferenceServer for the tests of the
// protocol frontends (REST, gRPC), their clients and the CLI. Test-only;
// never linked into somm itself.
//
// Its world is data (Config): the models it serves (their metadata), the
// names it knows but has not loaded, the repository index, registrations and
// decisions. Out of the box it serves "echo" (versions 1 and 2, input IN0
// FP32 [-1,4], task "test/echo") and knows "cold", which is not loaded.
//
// Infer echoes: every input comes back as an output (only those asked for
// when the request names outputs), renamed "IN<k>" -> "OUT<k>" and any other
// name -> "<name>_out", or keeping its name with `keep_output_names`; the
// response carries `response_parameters`. The model is checked as metadata
// is (unknown: NOT_FOUND, not loaded: FAILED_PRECONDITION, unknown version:
// NOT_FOUND), and the version answered is the one asked for, else the
// model's latest. A task-form query (a task, no model name) goes to
// `task_model`, else to the model whose "task" parameter names the task
// (NOT_FOUND when none). The callback runs, after `infer_delay`, inside
// Infer, or, with `inline_callback` off, on a thread of the fake's own (as a
// batcher thread would).
//
// Repository: the index is `index` as given, else one row per model (READY,
// latest version) and per not-loaded name (UNAVAILABLE "not loaded"), sorted
// and filtered by `ready_only`. LoadModel and UnloadModel answer
// `load_status` / `unload_status` when set, else by what the fake knows.
// Registration: RegisterModel answers `register_status` when set,
// ALREADY_EXISTS for a served or already registered name, else records the
// model as GENERATING 0/3 ("queued"), which GetRegistrationStatus reports
// until a test replaces it. RecentDecisions answers the first `limit` of
// `decisions`.
//
// Every call is recorded (Calls) for assertions.
//
// Thread-safety: every method may be called concurrently; Configure() and
// the health flags may change while a frontend runs.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "api/inference_server.h"

namespace somm::testing {

class FakeInferenceServer : public InferenceServer {
 public:
  struct Config {
    ServerMetadata server{"somm", "0.1.0-test", {}};
    std::map<std::string, ModelMetadata> models = {{"echo", EchoModel()}};  // served, by name
    std::set<std::string> not_loaded = {"cold"};  // known to the repository, not loaded
    std::string task_model;  // answers every task-form query ("" = by the models' "task")
    Status infer_status;     // non-OK: every Infer fails with it
    std::chrono::milliseconds infer_delay{0};  // before the callback runs
    bool inline_callback = true;               // false: the callback runs on a thread
    bool keep_output_names = false;            // outputs keep their input's name
    bool corrupt_output = false;               // answer with a malformed tensor
    Parameters response_parameters = {{"somm_device", std::string("cpu")},
                                      {"somm_batch_size", int64_t{1}}};
    std::optional<std::vector<RepositoryEntry>> index;  // unset: from the models
    Status load_status;                                 // non-OK: every LoadModel fails with it
    Status unload_status;                               // non-OK: every UnloadModel fails with it
    Status register_status;                             // non-OK: every RegisterModel fails with it
    std::map<std::string, RegistrationStatus> registrations;  // by name
    std::vector<DecisionRecord> decisions;
  };

  // What the fake was asked.
  struct Calls {
    InferenceRequest last_request;
    int infer_count = 0;
    std::string last_metadata_version = "<none>";
    std::vector<std::string> loaded;
    std::vector<std::string> unloaded;
    std::vector<std::string> repository;  // "load <name>" / "unload <name>", in order
    bool last_index_ready_only = false;
    RegistrationRequest last_registration;
    size_t last_decision_limit = 0;
  };

  // "echo" as the default Config serves it.
  static ModelMetadata EchoModel() {
    ModelMetadata m;
    m.name = "echo";
    m.versions = {"1", "2"};
    m.platform = "fake";
    m.inputs = {{"IN0", "FP32", {-1, 4}}};
    m.outputs = {{"OUT0", "FP32", {-1, 4}}};
    m.parameters["task"] = std::string("test/echo");
    return m;
  }

  FakeInferenceServer() = default;
  explicit FakeInferenceServer(Config config) : config_(std::move(config)) {}
  ~FakeInferenceServer() override {
    std::vector<std::thread> threads;
    {
      std::lock_guard lock(mu_);
      threads.swap(threads_);
    }
    for (std::thread& t : threads) t.join();
  }

  // The health answers; flip them at any time.
  std::atomic<bool> live{true};
  std::atomic<bool> ready{true};

  template <typename F>
  void Configure(F&& change) {
    std::lock_guard lock(mu_);
    change(config_);
  }
  Calls calls() const {
    std::lock_guard lock(mu_);
    return calls_;
  }

  // Shorthands for what tests flip and read most.
  void set_infer_status(Status status) {
    Configure([&](Config& c) { c.infer_status = std::move(status); });
  }
  void set_async(bool async) {
    Configure([&](Config& c) { c.inline_callback = !async; });
  }
  InferenceRequest last_request() const { return calls().last_request; }
  std::vector<std::string> load_calls() const { return calls().repository; }

  bool IsLive() const override { return live; }
  bool IsReady() const override { return ready; }
  ServerMetadata GetServerMetadata() const override {
    std::lock_guard lock(mu_);
    return config_.server;
  }

  StatusOr<ModelMetadata> GetModelMetadata(const std::string& name,
                                           const std::string& version) const override {
    std::lock_guard lock(mu_);
    calls_.last_metadata_version = version;
    SOMM_ASSIGN_OR_RETURN(const ModelMetadata* m, Find(config_, name, version));
    return *m;
  }

  StatusOr<bool> IsModelReady(const std::string& name, const std::string& version) const override {
    std::lock_guard lock(mu_);
    calls_.last_metadata_version = version;
    if (config_.not_loaded.count(name)) return false;
    auto it = config_.models.find(name);
    if (it == config_.models.end()) return NotFound("unknown model '" + name + "'");
    const auto& versions = it->second.versions;
    return version.empty() ||
           std::find(versions.begin(), versions.end(), version) != versions.end();
  }

  void Infer(InferenceRequest request, InferCallback done) override {
    Config config;
    {
      std::lock_guard lock(mu_);
      calls_.last_request = request;
      ++calls_.infer_count;
      config = config_;
    }
    const bool inline_callback = config.inline_callback;
    auto answer = [config = std::move(config), request = std::move(request),
                   done = std::move(done)]() mutable {
      if (config.infer_delay.count() > 0) std::this_thread::sleep_for(config.infer_delay);
      done(Echo(config, std::move(request)));
    };
    if (inline_callback) {
      answer();
      return;
    }
    std::lock_guard lock(mu_);
    threads_.emplace_back(std::move(answer));
  }

  std::vector<RepositoryEntry> RepositoryIndex(bool ready_only) const override {
    std::lock_guard lock(mu_);
    calls_.last_index_ready_only = ready_only;
    if (config_.index) return *config_.index;
    std::map<std::string, RepositoryEntry> rows;
    for (const std::string& name : config_.not_loaded) {
      if (!ready_only) rows[name] = {name, "", "UNAVAILABLE", "not loaded"};
    }
    for (const auto& [name, m] : config_.models) {
      rows[name] = {name, m.versions.empty() ? "" : m.versions.back(), "READY", ""};
    }
    std::vector<RepositoryEntry> out;
    for (auto& [_, row] : rows) out.push_back(std::move(row));
    return out;
  }

  Status LoadModel(const std::string& name) override {
    std::lock_guard lock(mu_);
    calls_.loaded.push_back(name);
    calls_.repository.push_back("load " + name);
    if (!config_.load_status.ok()) return config_.load_status;
    if (config_.models.count(name) || config_.not_loaded.count(name)) return Status::Ok();
    return NotFound("no model '" + name + "' in the repository");
  }

  Status UnloadModel(const std::string& name) override {
    std::lock_guard lock(mu_);
    calls_.unloaded.push_back(name);
    calls_.repository.push_back("unload " + name);
    if (!config_.unload_status.ok()) return config_.unload_status;
    if (config_.models.count(name)) return Status::Ok();
    if (config_.not_loaded.count(name)) {
      return FailedPrecondition("model '" + name + "' is not loaded");
    }
    return NotFound("no model '" + name + "'");
  }

  Status RegisterModel(RegistrationRequest request) override {
    std::lock_guard lock(mu_);
    calls_.last_registration = request;
    if (!config_.register_status.ok()) return config_.register_status;
    if (config_.models.count(request.name) || config_.registrations.count(request.name)) {
      return AlreadyExists("model '" + request.name + "' already exists");
    }
    RegistrationStatus status;
    status.name = request.name;
    status.state = "GENERATING";
    status.phase = "queued";
    status.total = 3;
    config_.registrations[request.name] = std::move(status);
    return Status::Ok();
  }

  StatusOr<RegistrationStatus> GetRegistrationStatus(const std::string& name) const override {
    std::lock_guard lock(mu_);
    const auto it = config_.registrations.find(name);
    if (it == config_.registrations.end()) return NotFound("no registered model '" + name + "'");
    return it->second;
  }

  std::vector<DecisionRecord> RecentDecisions(size_t limit) const override {
    std::lock_guard lock(mu_);
    calls_.last_decision_limit = limit;
    const auto& all = config_.decisions;
    return {all.begin(), all.begin() + static_cast<std::ptrdiff_t>(std::min(limit, all.size()))};
  }

 private:
  // The served model `name` at `version` ("" = any), or why not.
  static StatusOr<const ModelMetadata*> Find(const Config& config, const std::string& name,
                                             const std::string& version) {
    if (config.not_loaded.count(name)) {
      return FailedPrecondition("model '" + name + "' is not ready");
    }
    auto it = config.models.find(name);
    if (it == config.models.end()) return NotFound("unknown model '" + name + "'");
    const auto& versions = it->second.versions;
    if (!version.empty() &&
        std::find(versions.begin(), versions.end(), version) == versions.end()) {
      return NotFound("model '" + name + "' has no version '" + version + "'");
    }
    return &it->second;
  }

  static std::string OutputName(const Config& config, const std::string& input) {
    if (config.keep_output_names) return input;
    if (input.rfind("IN", 0) == 0) return "OUT" + input.substr(2);
    return input + "_out";
  }

  static StatusOr<InferenceResponse> Echo(const Config& config, InferenceRequest request) {
    if (!config.infer_status.ok()) return config.infer_status;
    std::string model = request.model_name;
    if (model.empty() && !request.task.empty()) {
      model = config.task_model;
      for (const auto& [name, m] : config.models) {
        auto task = m.parameters.find("task");
        if (model.empty() && task != m.parameters.end() &&
            std::get_if<std::string>(&task->second) &&
            std::get<std::string>(task->second) == request.task) {
          model = name;
        }
      }
      if (model.empty()) return NotFound("no loaded model serves task '" + request.task + "'");
    }
    SOMM_ASSIGN_OR_RETURN(const ModelMetadata* m, Find(config, model, request.model_version));
    InferenceResponse r;
    r.model_name = model;
    r.model_version = !request.model_version.empty() ? request.model_version
                      : m->versions.empty()          ? "1"
                                                     : m->versions.back();
    r.id = request.id;
    r.parameters = config.response_parameters;
    for (Tensor& t : request.inputs) {
      t.name = OutputName(config, t.name);
      bool wanted = request.outputs.empty();
      for (const RequestedOutput& o : request.outputs) wanted |= o.name == t.name;
      if (wanted) r.outputs.push_back(std::move(t));
    }
    if (config.corrupt_output && !r.outputs.empty()) r.outputs.front().data.push_back('x');
    return r;
  }

  mutable std::mutex mu_;
  Config config_;                     // guarded by mu_
  mutable Calls calls_;               // guarded by mu_
  std::vector<std::thread> threads_;  // guarded by mu_
};

}  // namespace somm::testing
