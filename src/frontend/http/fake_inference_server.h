// FakeInferenceServer: an in-memory InferenceServer for frontend and client
// tests. Not for production code.
//
// It serves one model, "echo" (versions "1" and "2"), whose outputs copy its
// inputs: input "IN<k>" comes back as "OUT<k>" (any other name as
// "<name>_out"), honouring the requested-outputs list. Model "cold" exists but
// is not ready. Tests steer it through the public knobs, which are safe to
// change while a frontend is running:
//   * set_infer_status(s) makes every Infer fail with s (e.g. 429's
//     RESOURCE_EXHAUSTED);
//   * set_async(true) runs callbacks on a separate thread, as a batcher does;
//   * live / ready flip the health answers.
// It records the last request it saw so tests can check what a frontend
// decoded.
//
// Model-less extension: task-form queries (request.task set, no model name)
// for task "test/echo" are served by "echo"; other tasks are NOT_FOUND.
// RegisterModel records the request and answers ALREADY_EXISTS for "echo" or a
// name registered before (or set_register_status's Status); a registered model
// then reports GENERATING 0/3 until set_registration_status replaces it.
// RecentDecisions answers the first `limit` of set_decisions's records.
//
// Thread-safety: every method may be called concurrently.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "serving/inference_server.h"

namespace somm {

class FakeInferenceServer : public InferenceServer {
 public:
  ~FakeInferenceServer() override {
    std::lock_guard<std::mutex> lock(mu_);
    for (std::thread& t : threads_) t.join();
  }

  std::atomic<bool> live{true};
  std::atomic<bool> ready{true};

  void set_infer_status(Status status) {
    std::lock_guard<std::mutex> lock(mu_);
    infer_status_ = std::move(status);
  }
  void set_async(bool async) { async_ = async; }
  InferenceRequest last_request() const {
    std::lock_guard<std::mutex> lock(mu_);
    return last_request_;
  }
  std::vector<std::string> load_calls() const {
    std::lock_guard<std::mutex> lock(mu_);
    return load_calls_;
  }

  void set_register_status(Status status) {
    std::lock_guard<std::mutex> lock(mu_);
    register_status_ = std::move(status);
  }
  void set_registration_status(RegistrationStatus status) {
    std::lock_guard<std::mutex> lock(mu_);
    registrations_[status.name] = std::move(status);
  }
  void set_decisions(std::vector<DecisionRecord> decisions) {
    std::lock_guard<std::mutex> lock(mu_);
    decisions_ = std::move(decisions);
  }
  RegistrationRequest last_registration() const {
    std::lock_guard<std::mutex> lock(mu_);
    return last_registration_;
  }
  size_t last_decision_limit() const {
    std::lock_guard<std::mutex> lock(mu_);
    return last_decision_limit_;
  }

  bool IsLive() const override { return live; }
  bool IsReady() const override { return ready; }

  ServerMetadata GetServerMetadata() const override { return {"somm", "0.1.0-test", {}}; }

  StatusOr<ModelMetadata> GetModelMetadata(const std::string& name,
                                           const std::string& version) const override {
    SOMM_RETURN_IF_ERROR(CheckModel(name, version));
    ModelMetadata m;
    m.name = name;
    m.versions = {"1", "2"};
    m.platform = "fake";
    m.inputs = {{"IN0", "FP32", {-1, 4}}};
    m.outputs = {{"OUT0", "FP32", {-1, 4}}};
    m.parameters["task"] = std::string("test/echo");
    return m;
  }

  StatusOr<bool> IsModelReady(const std::string& name, const std::string& version) const override {
    if (name == "cold") return false;
    SOMM_RETURN_IF_ERROR(CheckModel(name, version));
    return true;
  }

  void Infer(InferenceRequest request, InferCallback done) override {
    StatusOr<InferenceResponse> result = Run(request);
    std::lock_guard<std::mutex> lock(mu_);
    last_request_ = std::move(request);
    if (!async_) {
      done(std::move(result));
      return;
    }
    threads_.emplace_back([done = std::move(done), result = std::move(result)]() mutable {
      done(std::move(result));
    });
  }

  std::vector<RepositoryEntry> RepositoryIndex(bool ready_only) const override {
    std::vector<RepositoryEntry> all = {{"cold", "", "UNAVAILABLE", "not loaded"},
                                        {"echo", "2", "READY", ""}};
    if (!ready_only) return all;
    return {all[1]};
  }

  Status LoadModel(const std::string& name) override {
    std::lock_guard<std::mutex> lock(mu_);
    load_calls_.push_back("load " + name);
    if (name == "echo" || name == "cold") return Status::Ok();
    return NotFound("no model '" + name + "' in the repository");
  }

  Status RegisterModel(RegistrationRequest request) override {
    std::lock_guard<std::mutex> lock(mu_);
    last_registration_ = request;
    if (!register_status_.ok()) return register_status_;
    if (request.name == "echo" || registrations_.count(request.name) > 0) {
      return AlreadyExists("model '" + request.name + "' already exists");
    }
    RegistrationStatus status;
    status.name = request.name;
    status.state = "GENERATING";
    status.phase = "queued";
    status.total = 3;
    registrations_[request.name] = std::move(status);
    return Status::Ok();
  }

  StatusOr<RegistrationStatus> GetRegistrationStatus(const std::string& name) const override {
    std::lock_guard<std::mutex> lock(mu_);
    const auto it = registrations_.find(name);
    if (it == registrations_.end()) return NotFound("no registered model '" + name + "'");
    return it->second;
  }

  std::vector<DecisionRecord> RecentDecisions(size_t limit) const override {
    std::lock_guard<std::mutex> lock(mu_);
    last_decision_limit_ = limit;
    return std::vector<DecisionRecord>(
        decisions_.begin(), decisions_.begin() + static_cast<std::ptrdiff_t>(
                                                      std::min(limit, decisions_.size())));
  }

  Status UnloadModel(const std::string& name) override {
    std::lock_guard<std::mutex> lock(mu_);
    load_calls_.push_back("unload " + name);
    if (name == "echo") return Status::Ok();
    if (name == "cold") return FailedPrecondition("model 'cold' is not loaded");
    return NotFound("no model '" + name + "'");
  }

 private:
  static Status CheckModel(const std::string& name, const std::string& version) {
    if (name == "cold") return FailedPrecondition("model 'cold' is not ready");
    if (name != "echo") return NotFound("unknown model '" + name + "'");
    if (!version.empty() && version != "1" && version != "2") {
      return NotFound("model 'echo' has no version '" + version + "'");
    }
    return Status::Ok();
  }

  static std::string OutputName(const std::string& input) {
    if (input.rfind("IN", 0) == 0) return "OUT" + input.substr(2);
    return input + "_out";
  }

  StatusOr<InferenceResponse> Run(const InferenceRequest& request) const {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!infer_status_.ok()) return infer_status_;
    }
    std::string model = request.model_name;
    if (!request.task.empty() && model.empty()) {
      if (request.task != "test/echo") {
        return NotFound("no loaded model serves task '" + request.task + "'");
      }
      model = "echo";
    }
    SOMM_RETURN_IF_ERROR(CheckModel(model, request.model_version));
    InferenceResponse response;
    response.model_name = model;
    response.model_version = request.model_version.empty() ? "2" : request.model_version;
    response.id = request.id;
    response.parameters["somm_device"] = std::string("cpu");
    response.parameters["somm_batch_size"] = int64_t{1};
    for (const Tensor& input : request.inputs) {
      Tensor out = input;
      out.name = OutputName(input.name);
      bool wanted = request.outputs.empty();
      for (const RequestedOutput& r : request.outputs) wanted |= r.name == out.name;
      if (wanted) response.outputs.push_back(std::move(out));
    }
    return response;
  }

  mutable std::mutex mu_;
  Status infer_status_;
  std::atomic<bool> async_{false};
  InferenceRequest last_request_;
  std::vector<std::string> load_calls_;
  Status register_status_;
  RegistrationRequest last_registration_;
  std::map<std::string, RegistrationStatus> registrations_;
  std::vector<DecisionRecord> decisions_;
  mutable size_t last_decision_limit_ = 0;
  std::vector<std::thread> threads_;
};

}  // namespace somm
