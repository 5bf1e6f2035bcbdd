// FakeInferenceServer: an InferenceServer for protocol tests (gRPC frontend,
// gRPC client). Test-only; never linked into somm itself.
//
// Infer echoes each input back as an output of the same name (only the
// requested ones when the request names outputs), with fixed response
// parameters, unless a failure Status is configured. The callback runs on a
// thread of the fake's own, as a batcher thread would, unless `inline_callback`
// is set. Configuration and recorded calls are guarded by one mutex, so tests
// may read and change them while the frontend runs.
//
// Model-less extension: a task-form query (no model name) is answered as if
// `task_model` served it. RegisterModel records the request and answers
// `register_status`; on success the model appears in `registrations` as
// GENERATING 0/3, which GetRegistrationStatus reports (NOT_FOUND for names
// not there). RecentDecisions answers the first `limit` of `decisions`.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "serving/inference_server.h"

namespace somm::testing {

class FakeInferenceServer : public InferenceServer {
 public:
  struct Config {
    bool live = true;
    bool ready = true;
    ServerMetadata server{"somm", "0.1.0-test", {"model_repository"}};
    std::map<std::string, ModelMetadata> models;  // by name
    Status infer_status;                          // non-OK: every Infer fails with it
    std::chrono::milliseconds infer_delay{0};     // before the callback runs
    bool inline_callback = false;                 // run the callback inside Infer
    bool corrupt_output = false;                  // answer with a malformed tensor
    std::vector<RepositoryEntry> index;
    Status load_status;
    Status unload_status;
    std::string task_model = "digits";  // answers task-form queries
    Status register_status;
    std::map<std::string, RegistrationStatus> registrations;  // by name
    std::vector<DecisionRecord> decisions;
  };

  // What the fake was asked, for assertions.
  struct Calls {
    InferenceRequest last_request;
    int infer_count = 0;
    std::string last_metadata_version = "<none>";
    std::vector<std::string> loaded;
    std::vector<std::string> unloaded;
    bool last_index_ready_only = false;
    RegistrationRequest last_registration;
    size_t last_decision_limit = 0;
  };

  ~FakeInferenceServer() override {
    std::vector<std::thread> threads;
    {
      std::lock_guard lock(mu_);
      threads.swap(threads_);
    }
    for (std::thread& t : threads) t.join();
  }

  template <typename F>
  void Configure(F&& change) {
    std::lock_guard lock(mu_);
    change(config_);
  }
  Calls calls() const {
    std::lock_guard lock(mu_);
    return calls_;
  }

  bool IsLive() const override {
    std::lock_guard lock(mu_);
    return config_.live;
  }
  bool IsReady() const override {
    std::lock_guard lock(mu_);
    return config_.ready;
  }
  ServerMetadata GetServerMetadata() const override {
    std::lock_guard lock(mu_);
    return config_.server;
  }
  StatusOr<ModelMetadata> GetModelMetadata(const std::string& name,
                                           const std::string& version) const override {
    std::lock_guard lock(mu_);
    calls_.last_metadata_version = version;
    auto it = config_.models.find(name);
    if (it == config_.models.end()) return NotFound("unknown model '" + name + "'");
    return it->second;
  }
  StatusOr<bool> IsModelReady(const std::string& name, const std::string& version) const override {
    std::lock_guard lock(mu_);
    calls_.last_metadata_version = version;
    if (!config_.models.count(name)) return NotFound("unknown model '" + name + "'");
    return version.empty() || version == "1";
  }

  void Infer(InferenceRequest request, InferCallback done) override {
    Config config;
    {
      std::lock_guard lock(mu_);
      calls_.last_request = request;
      ++calls_.infer_count;
      config = config_;
    }
    auto answer = [config, request = std::move(request), done = std::move(done)]() mutable {
      if (config.infer_delay.count() > 0) std::this_thread::sleep_for(config.infer_delay);
      if (!config.infer_status.ok()) {
        done(config.infer_status);
        return;
      }
      if (request.model_name.empty() && !request.task.empty()) {
        request.model_name = config.task_model;
      }
      done(Echo(std::move(request), config.corrupt_output));
    };
    if (config.inline_callback) {
      answer();
      return;
    }
    std::lock_guard lock(mu_);
    threads_.emplace_back(std::move(answer));
  }

  std::vector<RepositoryEntry> RepositoryIndex(bool ready_only) const override {
    std::lock_guard lock(mu_);
    calls_.last_index_ready_only = ready_only;
    return config_.index;
  }
  Status LoadModel(const std::string& name) override {
    std::lock_guard lock(mu_);
    calls_.loaded.push_back(name);
    return config_.load_status;
  }
  Status UnloadModel(const std::string& name) override {
    std::lock_guard lock(mu_);
    calls_.unloaded.push_back(name);
    return config_.unload_status;
  }
  Status RegisterModel(RegistrationRequest request) override {
    std::lock_guard lock(mu_);
    calls_.last_registration = request;
    if (!config_.register_status.ok()) return config_.register_status;
    RegistrationStatus status;
    status.name = request.name;
    status.state = "GENERATING";
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
  static InferenceResponse Echo(InferenceRequest request, bool corrupt) {
    InferenceResponse r;
    r.model_name = request.model_name;
    r.model_version = request.model_version.empty() ? "1" : request.model_version;
    r.id = request.id;
    r.parameters = {{"somm_device", std::string("cpu")},
                    {"somm_batch_size", int64_t{1}},
                    {"somm_fake", true},
                    {"somm_compute_ms", 0.25}};
    for (Tensor& t : request.inputs) {
      bool wanted = request.outputs.empty();
      for (const RequestedOutput& o : request.outputs) wanted |= o.name == t.name;
      if (wanted) r.outputs.push_back(std::move(t));
    }
    if (corrupt && !r.outputs.empty()) r.outputs.front().data.push_back('x');
    return r;
  }

  mutable std::mutex mu_;
  Config config_;                     // guarded by mu_
  mutable Calls calls_;               // guarded by mu_
  std::vector<std::thread> threads_;  // guarded by mu_
};

}  // namespace somm::testing
