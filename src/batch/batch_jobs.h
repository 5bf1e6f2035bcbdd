// BatchJobs: offline batch jobs, as INFaaS's offline queries were. A job
// runs every item of an input (a folder of OIP request bodies, *.json, or a
// JSONL file of them, one per line) through the server's own Infer, against
// a model or a task with SLO-free requirements (an accuracy floor, a cost
// ceiling), and writes each item's answer, or its error, to a file of its
// own in the output folder: <output>/<item>.json or <item>.error.json.
//
// Low priority: a job keeps at most `concurrency` items in flight, and sends
// the next only while the server's other queries in flight are fewer than
// Options::busy_inflight, so online queries find the batchers as they would
// without it; the job takes what capacity is spare. Its thread runs at nice
// 19, and answers are encoded and written there, not on the batcher thread
// that ran the item.
//
// Restarts: a job's spec and state are kept in <state_dir>/<id>.json. At
// start, ResumeAll() runs again every job that was running; an item whose
// output exists is skipped. An output is written to a temporary file and
// hard-linked to its name, which fails when the name exists: no item's
// output is ever written twice, whatever was killed when.
//
// Thread-safety: every method may be called concurrently. Lock: mu_ (the
// jobs table); each job runs on a thread of its own.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "batch/batch_paths.h"
#include "common/mutex.h"
#include "common/status.h"
#include "api/caller.h"
#include "api/inference_api.h"

namespace somm {

struct BatchJobSpec {
  std::string model;    // one of model and task
  std::string version;  // "" = the model's default
  std::string task;
  std::optional<double> min_accuracy;
  std::optional<double> max_cost_usd;
  // As the caller named them: relative to its batch folder, or absolute
  // inside it (batch/batch_paths.h); resolved again at every run.
  std::string input;   // a folder of *.json or a .jsonl file
  std::string output;  // a folder (created)
  int concurrency = 2;
  // Who submitted it: its items run as this caller (its tenant's models).
  std::string key_id;
  std::string tenant;
  bool authenticated = false;
  bool admin = false;
};

struct BatchJobStatus {
  std::string id;
  BatchJobSpec spec;
  std::string state;  // QUEUED, RUNNING, DONE, CANCELLED, FAILED
  std::string message;
  int64_t total = 0;      // items in the input
  int64_t succeeded = 0;  // outputs written
  int64_t failed = 0;     // error files written
  int64_t in_flight = 0;
  int64_t resumed_from = 0;  // items already done when this run began
  double items_per_s = 0;    // this run's
  int64_t created_unix_ms = 0;
  int64_t updated_unix_ms = 0;
  int64_t Done() const { return succeeded + failed; }
};

// JSON: the REST body of a submission, and a status (GET /v2/somm/batch/{id}).
// INVALID_ARGUMENT names the field.
StatusOr<BatchJobSpec> BatchJobSpecFromJson(const std::string& text);
std::string BatchJobStatusToJson(const BatchJobStatus& status);
StatusOr<BatchJobStatus> BatchJobStatusFromJson(const std::string& text);

// One audit record's worth: who, what, which job, and how it went.
struct BatchEvent {
  std::string key_id;
  std::string tenant;
  std::string action;  // batch_submit, batch_cancel, batch_end
  std::string job;     // "" for a refused submission
  std::string outcome;  // "ok", a status code's name, or the job's final state
  std::string detail;   // the error, or "<model or task>: <done> of <total>"
};

class BatchJobs {
 public:
  struct Options {
    std::string state_dir;  // <repo>/.somm/batch
    // Where jobs may read and write; required (null: every submission is
    // refused).
    std::shared_ptr<const BatchPaths> paths;
    // Called for every submission (refused ones too), cancellation and end:
    // the audit log's feed. Null = none.
    std::function<void(const BatchEvent&)> audit;
    // The server's queries in flight now (the router's count, this job's
    // own included); a job waits while the others reach busy_inflight.
    std::function<int64_t()> inflight;
    int64_t busy_inflight = 4;
    int max_concurrency = 16;
  };
  BatchJobs(Options options, InferenceApi& server);
  ~BatchJobs();  // Shutdown()

  // Checks the spec (the input and output inside the caller's batch folder,
  // the input readable, the output writable, the target known to the
  // caller) and starts the job.
  StatusOr<BatchJobStatus> Submit(BatchJobSpec spec, const Caller& caller);
  // NOT_FOUND for a job the caller may not see (another tenant's).
  StatusOr<BatchJobStatus> Get(const std::string& id, const Caller& caller) const;
  std::vector<BatchJobStatus> List(const Caller& caller) const;
  StatusOr<BatchJobStatus> Cancel(const std::string& id, const Caller& caller);
  // Where jobs may read and write; null when none is configured.
  const BatchPaths* paths() const { return options_.paths.get(); }
  // Runs again every job the state folder says was running.
  void ResumeAll();
  // Stops every job after its items in flight; they stay RUNNING on disk,
  // so the next start resumes them.
  void Shutdown();

 private:
  struct Job;
  void Run(std::shared_ptr<Job> job);
  void Save(const Job& job);
  StatusOr<BatchJobStatus> SubmitChecked(BatchJobSpec spec, const Caller& caller);
  void Audit(const BatchJobSpec& spec, const char* action, const std::string& job,
             const std::string& outcome, const std::string& detail) const;
  // Audits the job's end, in `state`.
  void Ended(const Job& job, const std::string& state) const;
  // Whether a resolved path lies in `caller`'s batch folders.
  std::function<bool(const std::string&)> Inside(const Caller& caller) const;
  StatusOr<std::shared_ptr<Job>> Visible(const std::string& id, const Caller& caller) const;

  const Options options_;
  InferenceApi& server_;
  std::atomic<bool> stopping_{false};
  mutable Mutex mu_;
  std::map<std::string, std::shared_ptr<Job>> jobs_ SOMM_GUARDED_BY(mu_);
};

}  // namespace somm
