// RepositoryPoller: `--model-control-mode poll` (Triton's name). Every
// period it scans the model repository and tells its owner what changed
// since the last scan: a model folder that appeared (with a model.yaml) is
// loaded, one that went is unloaded, one whose model.yaml or version
// folders changed is loaded again (docs/lifecycle.md).
//
// ScanRepository and DiffRepository are pure (a scan is a fingerprint per
// model folder: model.yaml's size and time, and those of the files in each
// version folder, the model file among them); the poller is the mechanism
// around them. The owner's load keeps what serves when a change is broken
// (the registry publishes only versions that load: Controller::LoadModel),
// so a bad model.yaml or a half-copied model file is logged and tried again
// at its next change.
//
// The first scan is the baseline (the server loaded those models itself).
// Thread-safety: one thread of its own; Stop() (and the destructor) joins it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"

namespace somm {

using RepositorySnapshot = std::map<std::string, std::string>;  // model -> fingerprint

RepositorySnapshot ScanRepository(const std::string& repository);

struct RepositoryChanges {
  std::vector<std::string> added, removed, changed;  // sorted
  bool empty() const { return added.empty() && removed.empty() && changed.empty(); }
};
RepositoryChanges DiffRepository(const RepositorySnapshot& before, const RepositorySnapshot& after);

struct RepositoryPollerOptions {
  std::string repository;
  std::chrono::milliseconds period{5000};  // --repository-poll-secs
  // Load (or reload) and unload a model; whether this process acts now (a
  // cluster's standby controller does not: null = always).
  std::function<Status(const std::string& model)> load;
  std::function<Status(const std::string& model)> unload;
  std::function<bool()> active;
};

class RepositoryPoller {
 public:
  explicit RepositoryPoller(RepositoryPollerOptions options);  // scans the baseline, starts
  ~RepositoryPoller();
  RepositoryPoller(const RepositoryPoller&) = delete;
  RepositoryPoller& operator=(const RepositoryPoller&) = delete;

  // One scan and its actions, now (the thread calls it every period).
  void PollOnce();
  void Stop();

 private:
  void Run();

  const RepositoryPollerOptions options_;
  RepositorySnapshot last_;  // the poller thread's
  std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;  // guarded by mu_
  std::thread thread_;
};

}  // namespace somm
