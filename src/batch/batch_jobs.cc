#include "batch/batch_jobs.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "frontend/http/oip_json.h"

namespace somm {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

int64_t UnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// One item of the input: its id (its output's file name) and where its
// request body is.
struct Item {
  std::string id;
  std::string path;
  uint64_t offset = 0;
  uint64_t length = 0;  // 0 = the whole file
};

bool IsItemId(const std::string& s) {
  return !s.empty() && s.size() <= 128 && s[0] != '.' &&
         std::all_of(s.begin(), s.end(), [](char c) {
           return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
         });
}

// The items of a folder of *.json (by name) or of a JSONL file (by line).
// `input` is resolved; messages quote `given`, the caller's name for it.
// `inside` says whether an entry of a folder (resolved, so a link is
// followed) still lies in the caller's batch folders.
StatusOr<std::vector<Item>> ListItems(const std::string& input, const std::string& given,
                                      const std::function<bool(const std::string&)>& inside) {
  std::vector<Item> items;
  std::error_code ec;
  if (fs::is_directory(input, ec)) {
    for (const auto& e : fs::directory_iterator(input, ec)) {
      const fs::path p = e.path();
      if (!e.is_regular_file() || p.extension() != ".json") continue;
      const std::string id = p.stem().string();
      if (!inside(p.string())) {
        return PermissionDenied("batch input '" + given + "': item '" + p.filename().string() +
                                "' links outside this key's batch folder");
      }
      if (!IsItemId(id)) {
        return InvalidArgument("batch input: file name '" + p.filename().string() +
                               "' is not a usable item id (letters, digits, '-', '_', '.')");
      }
      items.push_back({id, p.string(), 0, 0});
    }
    std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) { return a.id < b.id; });
  } else {
    std::ifstream in(input, std::ios::binary);
    if (!in) return InvalidArgument("batch input '" + given + "' is neither a folder nor a readable file");
    std::set<std::string> seen;
    std::string line;
    uint64_t offset = 0;
    for (int64_t n = 1; std::getline(in, line); ++n) {
      const uint64_t length = line.size();
      const uint64_t at = offset;
      offset += length + 1;
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      std::string id;
      // An "id" at the top level names the item; the body is parsed again
      // when it runs (a line that does not parse fails as that item).
      const json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (j.is_object() && j.contains("id") && j["id"].is_string()) id = j["id"].get<std::string>();
      if (!IsItemId(id)) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "line-%08lld", static_cast<long long>(n));
        id = buf;
      }
      if (!seen.insert(id).second) {
        return InvalidArgument("batch input '" + given + "': item id '" + id + "' appears twice");
      }
      items.push_back({id, input, at, length});
    }
  }
  if (items.empty()) return InvalidArgument("batch input '" + given + "' holds no items");
  return items;
}

StatusOr<std::string> ReadBody(const Item& item) {
  std::ifstream in(item.path, std::ios::binary);
  if (!in) return Unavailable("cannot read " + item.path);
  if (item.length == 0) {
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  std::string body(item.length, '\0');
  in.seekg(static_cast<std::streamoff>(item.offset));
  in.read(body.data(), static_cast<std::streamsize>(item.length));
  if (!in) return Unavailable("cannot read item " + item.id + " of " + item.path);
  return body;
}

// Writes `bytes` as `final` unless it exists: a temporary file hard-linked
// to its name (link fails when the name is taken). False when it existed.
StatusOr<bool> WriteOnce(const fs::path& final, const std::string& bytes) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  const fs::path tmp = final.parent_path() / (".tmp-" + std::to_string(rng()));
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << bytes;
    if (!out.flush()) return Internal("cannot write " + tmp.string());
  }
  const int rc = ::link(tmp.c_str(), final.c_str());
  const int err = errno;
  ::unlink(tmp.c_str());
  if (rc == 0) return true;
  if (err == EEXIST) return false;
  return Internal("cannot write " + final.string() + ": " + std::strerror(err));
}

Caller CallerOf(const BatchJobSpec& spec) {
  Caller caller;
  caller.authenticated = spec.authenticated;
  caller.key_id = spec.key_id;
  caller.tenant = spec.tenant;
  caller.admin = spec.admin;
  return caller;
}

std::string TargetOf(const BatchJobSpec& spec) {
  return spec.model.empty() ? "task " + spec.task : "model " + spec.model;
}

json SpecToJson(const BatchJobSpec& s) {
  json j = {{"input", s.input}, {"output", s.output}, {"concurrency", s.concurrency},
            {"key_id", s.key_id}, {"tenant", s.tenant}, {"authenticated", s.authenticated},
            {"admin", s.admin}};
  if (!s.model.empty()) j["model"] = s.model;
  if (!s.version.empty()) j["version"] = s.version;
  if (!s.task.empty()) j["task"] = s.task;
  json p = json::object();
  if (s.min_accuracy) p["min_accuracy"] = *s.min_accuracy;
  if (s.max_cost_usd) p["max_cost"] = *s.max_cost_usd;
  j["parameters"] = p;
  return j;
}

}  // namespace

StatusOr<BatchJobSpec> BatchJobSpecFromJson(const std::string& text) {
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return InvalidArgument("batch job: the body must be a JSON object");
  static const std::set<std::string> kKnown = {"model", "version", "task", "parameters",
                                               "input", "output", "concurrency"};
  for (const auto& [key, _] : j.items()) {
    if (kKnown.count(key) == 0) return InvalidArgument("batch job: unknown field '" + key + "'");
  }
  BatchJobSpec s;
  auto str = [&j](const char* key, std::string* out) -> Status {
    if (!j.contains(key)) return Status::Ok();
    if (!j[key].is_string()) return InvalidArgument(std::string("batch job: '") + key + "' must be a string");
    *out = j[key].get<std::string>();
    return Status::Ok();
  };
  SOMM_RETURN_IF_ERROR(str("model", &s.model));
  SOMM_RETURN_IF_ERROR(str("version", &s.version));
  SOMM_RETURN_IF_ERROR(str("task", &s.task));
  SOMM_RETURN_IF_ERROR(str("input", &s.input));
  SOMM_RETURN_IF_ERROR(str("output", &s.output));
  if (s.model.empty() == s.task.empty()) {
    return InvalidArgument("batch job: give one of 'model' and 'task'");
  }
  if (s.input.empty()) {
    return InvalidArgument("batch job: 'input' is required: a path in the caller's batch folder");
  }
  if (s.output.empty()) {
    return InvalidArgument("batch job: 'output' is required: a path in the caller's batch folder");
  }
  if (j.contains("concurrency")) {
    if (!j["concurrency"].is_number_integer() || j["concurrency"].get<int64_t>() < 1 ||
        j["concurrency"].get<int64_t>() > 1024) {
      return InvalidArgument("batch job: 'concurrency' must be an integer of at least 1");
    }
    s.concurrency = j["concurrency"].get<int>();
  }
  if (j.contains("parameters")) {
    const json& p = j["parameters"];
    if (!p.is_object()) return InvalidArgument("batch job: 'parameters' must be an object");
    for (const auto& [key, v] : p.items()) {
      if (key != "min_accuracy" && key != "max_cost") {
        return InvalidArgument("batch job: parameter '" + key +
                               "' is not one a batch job takes (min_accuracy, max_cost: jobs have "
                               "no latency SLO)");
      }
      if (!v.is_number()) return InvalidArgument("batch job: parameter '" + key + "' must be a number");
    }
    if (p.contains("min_accuracy")) s.min_accuracy = p["min_accuracy"].get<double>();
    if (p.contains("max_cost")) s.max_cost_usd = p["max_cost"].get<double>();
    if (s.min_accuracy && !(*s.min_accuracy >= 0 && *s.min_accuracy <= 1)) {
      return InvalidArgument("batch job: min_accuracy must be within [0, 1]");
    }
    if (s.max_cost_usd && !(*s.max_cost_usd > 0)) {
      return InvalidArgument("batch job: max_cost must be positive");
    }
  }
  return s;
}

std::string BatchJobStatusToJson(const BatchJobStatus& s) {
  return json{{"id", s.id},
              {"spec", SpecToJson(s.spec)},
              {"state", s.state},
              {"message", s.message},
              {"total", s.total},
              {"succeeded", s.succeeded},
              {"failed", s.failed},
              {"done", s.Done()},
              {"in_flight", s.in_flight},
              {"resumed_from", s.resumed_from},
              {"items_per_s", s.items_per_s},
              {"created_unix_ms", s.created_unix_ms},
              {"updated_unix_ms", s.updated_unix_ms}}
      .dump();
}

StatusOr<BatchJobStatus> BatchJobStatusFromJson(const std::string& text) {
  try {
    const json j = json::parse(text);
    BatchJobStatus s;
    s.id = j.at("id").get<std::string>();
    const json& spec = j.at("spec");
    BatchJobSpec& p = s.spec;
    p.model = spec.value("model", "");
    p.version = spec.value("version", "");
    p.task = spec.value("task", "");
    p.input = spec.at("input").get<std::string>();
    p.output = spec.at("output").get<std::string>();
    p.concurrency = spec.at("concurrency").get<int>();
    p.key_id = spec.value("key_id", "");
    p.tenant = spec.value("tenant", "");
    p.authenticated = spec.value("authenticated", false);
    p.admin = spec.value("admin", false);
    const json& params = spec.at("parameters");
    if (params.contains("min_accuracy")) p.min_accuracy = params["min_accuracy"].get<double>();
    if (params.contains("max_cost")) p.max_cost_usd = params["max_cost"].get<double>();
    s.state = j.at("state").get<std::string>();
    s.message = j.at("message").get<std::string>();
    s.total = j.at("total").get<int64_t>();
    s.succeeded = j.at("succeeded").get<int64_t>();
    s.failed = j.at("failed").get<int64_t>();
    s.in_flight = j.at("in_flight").get<int64_t>();
    s.resumed_from = j.at("resumed_from").get<int64_t>();
    s.items_per_s = j.at("items_per_s").get<double>();
    s.created_unix_ms = j.at("created_unix_ms").get<int64_t>();
    s.updated_unix_ms = j.at("updated_unix_ms").get<int64_t>();
    return s;
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("batch job status: ") + e.what());
  }
}

struct BatchJobs::Job {
  // An item's answer, handed from the server's thread to the job's.
  struct Answer {
    size_t index;  // into the run's list of items to do
    StatusOr<InferenceResponse> result;
  };
  mutable std::mutex mu;
  std::condition_variable cv;
  BatchJobStatus status;  // guarded by mu; in_flight counts items sent and not yet written
  int64_t in_server = 0;  // guarded by mu: sent and not yet answered
  std::deque<Answer> answered;  // guarded by mu: answered, not yet written
  std::atomic<bool> cancel{false};
  std::thread thread;
  std::string output_path;  // guarded by mu: the output folder, resolved
  std::string OutputPath() const {
    std::lock_guard lock(mu);
    return output_path;
  }
  BatchJobStatus Snapshot() const {
    std::lock_guard lock(mu);
    BatchJobStatus s = status;
    s.updated_unix_ms = UnixMs();
    return s;
  }
};

BatchJobs::BatchJobs(Options options, InferenceApi& server)
    : options_(std::move(options)), server_(server) {}

BatchJobs::~BatchJobs() { Shutdown(); }

void BatchJobs::Shutdown() {
  stopping_ = true;
  std::vector<std::shared_ptr<Job>> jobs;
  {
    MutexLock lock(&mu_);
    for (auto& [_, j] : jobs_) jobs.push_back(j);
  }
  for (auto& j : jobs) {
    j->cv.notify_all();
    if (j->thread.joinable()) j->thread.join();
  }
}

void BatchJobs::Save(const Job& job) {
  const BatchJobStatus s = job.Snapshot();
  std::error_code ec;
  fs::create_directories(options_.state_dir, ec);
  const fs::path path = fs::path(options_.state_dir) / (s.id + ".json");
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << BatchJobStatusToJson(s);
    if (!out.flush()) {
      spdlog::error("batch job {}: cannot write {}", s.id, tmp.string());
      return;
    }
  }
  fs::rename(tmp, path, ec);
  if (ec) spdlog::error("batch job {}: cannot write {}: {}", s.id, path.string(), ec.message());
}

StatusOr<BatchJobStatus> BatchJobs::Submit(BatchJobSpec spec, const Caller& caller) {
  spec.key_id = caller.key_id;
  spec.tenant = caller.tenant;
  spec.authenticated = caller.authenticated;
  spec.admin = caller.admin;
  const BatchJobSpec asked = spec;
  StatusOr<BatchJobStatus> status = SubmitChecked(std::move(spec), caller);
  if (status.ok()) {
    Audit(asked, "batch_submit", status->id, "ok", TargetOf(asked));
  } else {
    Audit(asked, "batch_submit", "", StatusCodeName(status.status().code()),
          status.status().message());
  }
  return status;
}

StatusOr<BatchJobStatus> BatchJobs::SubmitChecked(BatchJobSpec spec, const Caller& caller) {
  if (stopping_) return Unavailable("server is shutting down");
  if (!options_.paths) return FailedPrecondition("batch jobs have no batch root on this server");
  spec.concurrency = std::clamp(spec.concurrency, 1, options_.max_concurrency);
  SOMM_ASSIGN_OR_RETURN(std::string input, options_.paths->Input(caller, spec.input));
  SOMM_ASSIGN_OR_RETURN(std::vector<Item> items, ListItems(input, spec.input, Inside(caller)));
  SOMM_ASSIGN_OR_RETURN(std::string output, options_.paths->Output(caller, spec.output));
  if (::access(output.c_str(), W_OK) != 0) {
    return InvalidArgument("batch output '" + spec.output + "' is not writable by the server");
  }
  if (!spec.model.empty()) {
    auto metadata = server_.GetModelMetadata(spec.model, spec.version);
    if (!metadata.ok()) return metadata.status();
  }
  auto job = std::make_shared<Job>();
  thread_local std::mt19937_64 rng{std::random_device{}()};
  char id[32];
  std::snprintf(id, sizeof id, "job-%012llx",
                static_cast<unsigned long long>(rng() & 0xffffffffffffULL));
  {
    MutexLock lock(&mu_);
    for (const auto& [_, other] : jobs_) {
      const BatchJobStatus o = other->Snapshot();
      if ((o.state == "RUNNING" || o.state == "QUEUED") && other->OutputPath() == output) {
        return FailedPrecondition("batch output '" + spec.output + "' belongs to job " + o.id +
                                  ", still " + o.state);
      }
    }
    job->status.id = id;
    job->status.spec = std::move(spec);
    job->output_path = output;
    job->status.state = "QUEUED";
    job->status.total = static_cast<int64_t>(items.size());
    job->status.created_unix_ms = UnixMs();
    jobs_[id] = job;
  }
  Save(*job);
  spdlog::info("batch job {}: {} items of {} to {} (tenant '{}')", id, items.size(),
               job->status.spec.input, job->status.spec.output, job->status.spec.tenant);
  job->thread = std::thread([this, job] { Run(job); });
  return job->Snapshot();
}

void BatchJobs::Run(std::shared_ptr<Job> job) {
  // The job's own work (reading items, decoding them, encoding and writing
  // answers) runs at the lowest CPU priority, nice 19, so that it takes only
  // what online queries leave of the cores. Not SCHED_IDLE: this thread takes
  // the router's and the batchers' locks inside Infer, and a holder starved
  // outright by a busy machine would stall the online queries behind them.
  if (::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), 19) != 0) {
    spdlog::debug("batch job: cannot lower the job thread's priority: {}", std::strerror(errno));
  }
  BatchJobSpec spec;
  {
    std::lock_guard lock(job->mu);
    spec = job->status.spec;
    job->status.state = "RUNNING";
  }
  const Caller caller = CallerOf(spec);
  // Resolved again: a resumed job is held to the folders as they are now.
  StatusOr<std::vector<Item>> items = FailedPrecondition("batch jobs have no batch root");
  StatusOr<std::string> output = items.status();
  if (options_.paths) {
    StatusOr<std::string> input = options_.paths->Input(caller, spec.input);
    items = input.ok() ? ListItems(*input, spec.input, Inside(caller)) : input.status();
    output = options_.paths->Output(caller, spec.output);
  }
  const Status usable = !items.ok() ? items.status() : output.status();
  if (!usable.ok()) {
    std::lock_guard lock(job->mu);
    job->status.state = "FAILED";
    job->status.message = usable.message();
  }
  if (!usable.ok()) Ended(*job, "FAILED");
  Save(*job);
  if (!usable.ok()) return;
  const fs::path out(*output);
  {
    std::lock_guard lock(job->mu);
    job->output_path = *output;
  }
  // What an earlier run wrote is done: counted, and skipped below.
  std::vector<const Item*> todo;
  int64_t succeeded = 0;
  int64_t failed = 0;
  std::error_code ec;
  for (const Item& item : *items) {
    if (fs::exists(out / (item.id + ".json"), ec)) {
      ++succeeded;
    } else if (fs::exists(out / (item.id + ".error.json"), ec)) {
      ++failed;
    } else {
      todo.push_back(&item);
    }
  }
  {
    std::lock_guard lock(job->mu);
    job->status.total = static_cast<int64_t>(items->size());
    job->status.succeeded = succeeded;
    job->status.failed = failed;
    job->status.resumed_from = succeeded + failed;
  }
  const auto started = std::chrono::steady_clock::now();
  auto last_save = started;
  // Rates and progress are this run's.
  auto update_rate = [&] {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    job->status.items_per_s =
        s > 0 ? static_cast<double>(job->status.Done() - job->status.resumed_from) / s : 0;
  };
  // The answer of one item, written once, on the job's thread.
  auto write = [job, out](const Item& item, const StatusOr<InferenceResponse>& r) {
    std::string bytes;
    bool ok = r.ok();
    if (ok) {
      auto encoded = oip::EncodeInferResponse(r.value(), oip::BinaryOutputs());
      ok = encoded.ok();
      bytes = ok ? encoded->body
                 : json{{"error", encoded.status().message()}, {"code", "INTERNAL"}}.dump();
    } else {
      bytes = json{{"error", r.status().message()}, {"code", StatusCodeName(r.status().code())}}.dump();
    }
    auto written = WriteOnce(out / (item.id + (ok ? ".json" : ".error.json")), bytes);
    if (!written.ok()) spdlog::error("batch job {}: {}", job->status.id, written.status().message());
    std::lock_guard lock(job->mu);
    if (written.ok() && *written) ++(ok ? job->status.succeeded : job->status.failed);
    --job->status.in_flight;
  };
  // Writes the answers the server has handed over so far.
  auto drain = [&] {
    std::deque<Job::Answer> ready;
    {
      std::lock_guard lock(job->mu);
      ready.swap(job->answered);
    }
    for (const Job::Answer& a : ready) write(*todo[a.index], a.result);
  };
  // The server's callback runs on the thread that answered the item (a
  // batcher's, which online queries wait on): it only hands the answer over.
  // Encoding it and writing its file happen on the job's thread.
  auto answered = [job, this](size_t index, StatusOr<InferenceResponse> r) {
    std::lock_guard lock(job->mu);
    --job->in_server;
    if (!r.ok() && r.status().code() == StatusCode::kUnavailable && (stopping_ || job->cancel)) {
      // Refused because the server or the job is stopping: not the item's
      // fault, and not its answer. A resumed run sends it again.
      --job->status.in_flight;
    } else {
      job->answered.push_back({index, std::move(r)});
    }
    job->cv.notify_all();
  };
  for (size_t next = 0; next < todo.size();) {
    drain();
    {
      std::unique_lock lock(job->mu);
      if (job->cancel || stopping_) break;
      // At most `concurrency` items unwritten, and only while the server's
      // other queries leave room: online traffic goes first.
      const int64_t others = options_.inflight ? options_.inflight() - job->in_server : 0;
      if (job->status.in_flight >= spec.concurrency || others >= options_.busy_inflight) {
        job->cv.wait_for(lock, std::chrono::milliseconds(2), [&] {
          return !job->answered.empty() || job->cancel || stopping_;
        });
        continue;
      }
      ++job->status.in_flight;
      ++job->in_server;
      update_rate();
    }
    const size_t index = next++;
    const Item& item = *todo[index];
    // Resolved just before it is read: a link swapped in since the listing
    // is refused.
    StatusOr<std::string> body = options_.paths->Contains(caller, item.path)
                                     ? ReadBody(item)
                                     : PermissionDenied("item '" + item.id +
                                                        "' links outside this key's batch folder");
    StatusOr<InferenceRequest> request =
        body.ok() ? oip::DecodeInferRequest(*body, std::nullopt) : StatusOr<InferenceRequest>(body.status());
    if (!request.ok()) {
      {
        std::lock_guard lock(job->mu);
        --job->in_server;
      }
      write(item, request.status());
    } else {
      request->caller = caller;
      request->id = item.id;
      if (!spec.model.empty()) {
        request->model_name = spec.model;
        request->model_version = spec.version;
      } else {
        request->task = spec.task;
      }
      if (spec.min_accuracy) request->parameters["min_accuracy"] = *spec.min_accuracy;
      if (spec.max_cost_usd) request->parameters["max_cost"] = *spec.max_cost_usd;
      server_.Infer(std::move(*request),
                    [answered, index](StatusOr<InferenceResponse> r) { answered(index, std::move(r)); });
    }
    if (std::chrono::steady_clock::now() - last_save > std::chrono::seconds(2)) {
      Save(*job);
      last_save = std::chrono::steady_clock::now();
    }
  }
  // The items in flight finish (a cancel or a stop included) and are written.
  for (;;) {
    drain();
    std::unique_lock lock(job->mu);
    if (job->status.in_flight == 0 && job->answered.empty()) break;
    job->cv.wait_for(lock, std::chrono::milliseconds(50),
                     [&] { return !job->answered.empty() || job->status.in_flight == 0; });
  }
  // Stopping: it stays RUNNING on disk, and the next start resumes it.
  // Otherwise its end is audited before anyone can see it ended.
  const char* final_state = job->cancel ? "CANCELLED" : stopping_ ? nullptr : "DONE";
  if (final_state != nullptr) Ended(*job, final_state);
  {
    std::unique_lock lock(job->mu);
    update_rate();
    if (final_state != nullptr) job->status.state = final_state;
  }
  Save(*job);
  const BatchJobStatus s = job->Snapshot();
  spdlog::info("batch job {}: {} ({} succeeded, {} failed of {}, {:.1f} items/s)", s.id, s.state,
               s.succeeded, s.failed, s.total, s.items_per_s);
}

void BatchJobs::Ended(const Job& job, const std::string& state) const {
  BatchJobStatus s = job.Snapshot();
  s.state = state;
  Audit(s.spec, "batch_end", s.id, s.state,
        TargetOf(s.spec) + ": " + std::to_string(s.succeeded) + " succeeded, " +
            std::to_string(s.failed) + " failed of " + std::to_string(s.total) +
            (s.message.empty() ? "" : "; " + s.message));
}

void BatchJobs::Audit(const BatchJobSpec& spec, const char* action, const std::string& job,
                      const std::string& outcome, const std::string& detail) const {
  if (options_.audit) options_.audit({spec.key_id, spec.tenant, action, job, outcome, detail});
}

std::function<bool(const std::string&)> BatchJobs::Inside(const Caller& caller) const {
  return [this, caller](const std::string& path) {
    return options_.paths && options_.paths->Contains(caller, path);
  };
}


StatusOr<std::shared_ptr<BatchJobs::Job>> BatchJobs::Visible(const std::string& id,
                                                              const Caller& caller) const {
  MutexLock lock(&mu_);
  auto it = jobs_.find(id);
  if (it != jobs_.end()) {
    const BatchJobStatus s = it->second->Snapshot();
    if (!caller.authenticated || caller.admin || caller.tenant == s.spec.tenant) return it->second;
  }
  return NotFound("no batch job '" + id + "'");
}

StatusOr<BatchJobStatus> BatchJobs::Get(const std::string& id, const Caller& caller) const {
  SOMM_ASSIGN_OR_RETURN(std::shared_ptr<Job> job, Visible(id, caller));
  return job->Snapshot();
}

std::vector<BatchJobStatus> BatchJobs::List(const Caller& caller) const {
  std::vector<BatchJobStatus> out;
  MutexLock lock(&mu_);
  for (const auto& [_, job] : jobs_) {
    BatchJobStatus s = job->Snapshot();
    if (!caller.authenticated || caller.admin || caller.tenant == s.spec.tenant) out.push_back(s);
  }
  std::sort(out.begin(), out.end(), [](const BatchJobStatus& a, const BatchJobStatus& b) {
    return a.created_unix_ms > b.created_unix_ms;
  });
  return out;
}

StatusOr<BatchJobStatus> BatchJobs::Cancel(const std::string& id, const Caller& caller) {
  BatchJobSpec who;
  who.key_id = caller.key_id;
  who.tenant = caller.tenant;
  StatusOr<std::shared_ptr<Job>> job = Visible(id, caller);
  if (!job.ok()) {
    Audit(who, "batch_cancel", id, StatusCodeName(job.status().code()), job.status().message());
    return job.status();
  }
  {
    std::lock_guard lock((*job)->mu);
    if ((*job)->status.state != "RUNNING" && (*job)->status.state != "QUEUED") {
      const Status refused =
          FailedPrecondition("batch job " + id + " is " + (*job)->status.state + ", not running");
      Audit(who, "batch_cancel", id, StatusCodeName(refused.code()), refused.message());
      return refused;
    }
  }
  Audit(who, "batch_cancel", id, "ok", "");
  (*job)->cancel = true;
  (*job)->cv.notify_all();
  if ((*job)->thread.joinable()) (*job)->thread.join();
  return (*job)->Snapshot();
}

void BatchJobs::ResumeAll() {
  std::error_code ec;
  if (!fs::is_directory(options_.state_dir, ec)) return;
  for (const auto& e : fs::directory_iterator(options_.state_dir, ec)) {
    if (e.path().extension() != ".json") continue;
    std::ifstream in(e.path());
    std::stringstream text;
    text << in.rdbuf();
    auto status = BatchJobStatusFromJson(text.str());
    if (!status.ok()) {
      spdlog::warn("batch: {}: {}", e.path().string(), status.status().message());
      continue;
    }
    auto job = std::make_shared<Job>();
    job->status = std::move(status).value();
    job->status.in_flight = 0;
    const bool resume = job->status.state == "RUNNING" || job->status.state == "QUEUED";
    {
      MutexLock lock(&mu_);
      jobs_[job->status.id] = job;
    }
    if (resume) {
      spdlog::info("batch job {}: resuming ({} of {} done before)", job->status.id,
                   job->status.Done(), job->status.total);
      job->thread = std::thread([this, job] { Run(job); });
    }
  }
}

}  // namespace somm
