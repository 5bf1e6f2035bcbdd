// BatchJobs against an in-process fake InferenceApi (it echoes each
// request's first input, or refuses one with no inputs), on a temporary
// folder: items from JSONL and folders, per-item outputs and errors, resume
// without rewriting an output, cancel, restart from the state folder, one
// tenant's jobs hidden from another, and answers written on the job's own
// low-priority thread rather than the server's.
#include "batch/batch_jobs.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

namespace somm {
namespace {

namespace fs = std::filesystem;

class EchoServer : public InferenceApi {
 public:
  std::chrono::milliseconds delay{0};
  std::atomic<int> calls{0};
  std::mutex mu;
  InferenceRequest last;  // guarded by mu
  bool IsLive() const override { return true; }
  bool IsReady() const override { return true; }
  ServerMetadata GetServerMetadata() const override { return {}; }
  StatusOr<ModelMetadata> GetModelMetadata(const std::string& name,
                                           const std::string&) const override {
    if (name != "echo") return NotFound("unknown model '" + name + "'");
    return ModelMetadata{};
  }
  StatusOr<bool> IsModelReady(const std::string&, const std::string&) const override { return true; }
  void Infer(InferenceRequest request, InferCallback done) override {
    ++calls;
    {
      std::lock_guard lock(mu);
      last = request;
    }
    auto answer = [request = std::move(request), done = std::move(done)]() mutable {
      if (request.inputs.empty()) return done(InvalidArgument("no inputs"));
      InferenceResponse r;
      r.model_name = request.model_name;
      r.id = request.id;
      r.outputs.push_back(request.inputs[0]);
      done(std::move(r));
    };
    if (delay.count() == 0) return answer();
    std::thread([d = delay, a = std::move(answer)]() mutable {
      std::this_thread::sleep_for(d);
      a();
    }).detach();
  }
};

constexpr char kItem[] =
    R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1,2],"data":[1.5,2.5]}]})";

class BatchJobsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  BatchJobs::Options Options() {
    BatchJobs::Options o;
    o.state_dir = (dir_ / "state").string();
    auto paths = BatchPaths::Create({(dir_ / "root").string(), {}, ""});
    EXPECT_TRUE(paths.ok()) << paths.status().message();
    o.paths = std::make_shared<const BatchPaths>(std::move(paths).value());
    o.audit = [this](const BatchEvent& e) {
      std::lock_guard lock(audit_mu_);
      audit_.push_back(e);
    };
    return o;
  }
  // The batch folder of a tenant ("default": callers without a key).
  fs::path Home(const std::string& tenant = "default") const {
    fs::create_directories(dir_ / "root" / tenant);
    return dir_ / "root" / tenant;
  }
  // A JSONL input of `n` items in `tenant`'s folder; line `broken`
  // (1-based, 0 = none) is not JSON. Returns its name in that folder.
  std::string Jsonl(int n, int broken = 0, const std::string& tenant = "default") const {
    std::ofstream out(Home(tenant) / "in.jsonl");
    for (int i = 1; i <= n; ++i) out << (i == broken ? std::string("{not json") : std::string(kItem)) << "\n";
    return "in.jsonl";
  }
  BatchJobSpec Spec(const std::string& input) const {
    BatchJobSpec s;
    s.model = "echo";
    s.input = input;
    s.output = "out";
    return s;
  }
  std::vector<BatchEvent> Audited() {
    std::lock_guard lock(audit_mu_);
    return audit_;
  }
  // Up to 60 s: 400 items at 5 ms each take 2 s alone, and under a
  // sanitizer on a busy 2-core machine well over the 10 s once allowed.
  static BatchJobStatus WaitDone(BatchJobs& jobs, const std::string& id, const Caller& c = {}) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < deadline) {
      auto s = jobs.Get(id, c);
      if (s.ok() && s->state != "RUNNING" && s->state != "QUEUED") return *s;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ADD_FAILURE() << "job " << id << " did not finish";
    return {};
  }
  size_t Files(const std::string& suffix, const std::string& tenant = "default") const {
    size_t n = 0;
    for (const auto& e : fs::directory_iterator(Home(tenant) / "out")) {
      const std::string name = e.path().filename().string();
      if (name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) ++n;
    }
    return n;
  }

  const fs::path dir_ = fs::temp_directory_path() / ("batch_jobs_test_" + std::to_string(getpid()));
  EchoServer server_;
  std::mutex audit_mu_;
  std::vector<BatchEvent> audit_;  // guarded by audit_mu_
};

TEST_F(BatchJobsTest, EveryItemGetsItsAnswerOrItsErrorInAFileOfItsOwn) {
  BatchJobs jobs(Options(), server_);
  auto s = jobs.Submit(Spec(Jsonl(20, /*broken=*/7)), {});
  ASSERT_TRUE(s.ok()) << s.status().message();
  const BatchJobStatus done = WaitDone(jobs, s->id);
  EXPECT_EQ(done.state, "DONE");
  EXPECT_EQ(done.total, 20);
  EXPECT_EQ(done.succeeded, 19);
  EXPECT_EQ(done.failed, 1);
  EXPECT_TRUE(fs::exists(Home() / "out" / "line-00000007.error.json"));
  std::ifstream answer(Home() / "out" / "line-00000001.json");
  std::stringstream text;
  text << answer.rdbuf();
  EXPECT_NE(text.str().find("[1.5,2.5]"), std::string::npos) << text.str();
  EXPECT_EQ(Files(".error.json"), 1u);
  EXPECT_EQ(Files(".json"), 20u);
}

TEST_F(BatchJobsTest, AFolderOfRequestsNamesItsItemsByFile) {
  fs::create_directories(Home() / "in");
  for (const char* name : {"b", "a", "c"}) std::ofstream(Home() / "in" / (std::string(name) + ".json")) << kItem;
  std::ofstream(Home() / "in" / "notes.txt") << "not an item";
  BatchJobs jobs(Options(), server_);
  auto s = jobs.Submit(Spec("in"), {});
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(WaitDone(jobs, s->id).succeeded, 3);
  for (const char* name : {"a", "b", "c"}) EXPECT_TRUE(fs::exists(Home() / "out" / (std::string(name) + ".json")));
}

TEST_F(BatchJobsTest, AResumedJobSkipsWhatWasWrittenAndNeverWritesItAgain) {
  const std::string input = Jsonl(10);
  fs::create_directories(Home() / "out");
  std::ofstream(Home() / "out" / "line-00000003.json") << "written before";
  BatchJobs jobs(Options(), server_);
  auto s = jobs.Submit(Spec(input), {});
  ASSERT_TRUE(s.ok());
  const BatchJobStatus done = WaitDone(jobs, s->id);
  EXPECT_EQ(done.resumed_from, 1);
  EXPECT_EQ(done.succeeded, 10);
  EXPECT_EQ(server_.calls, 9);
  std::ifstream kept(Home() / "out" / "line-00000003.json");
  std::string text((std::istreambuf_iterator<char>(kept)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "written before");
}

TEST_F(BatchJobsTest, AJobLeftRunningOnDiskResumesAtTheNextStart) {
  server_.delay = std::chrono::milliseconds(5);
  std::string id;
  {
    BatchJobs jobs(Options(), server_);
    BatchJobSpec spec = Spec(Jsonl(400));
    spec.concurrency = 1;
    auto s = jobs.Submit(spec, {});
    ASSERT_TRUE(s.ok());
    id = s->id;
    // Stop it once some answers are written, however slow this machine is
    // (a fixed 100 ms was sometimes too short under ThreadSanitizer).
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while ((!fs::exists(Home() / "out") || Files(".json") == 0) &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }  // Shutdown: it stays RUNNING on disk
  const size_t before = Files(".json");
  EXPECT_GT(before, 0u);
  EXPECT_LT(before, 400u);
  BatchJobs again(Options(), server_);
  again.ResumeAll();
  const BatchJobStatus done = WaitDone(again, id);
  EXPECT_EQ(done.state, "DONE");
  EXPECT_EQ(done.resumed_from, static_cast<int64_t>(before));
  EXPECT_EQ(done.succeeded, 400);
  EXPECT_EQ(Files(".json"), 400u);
  EXPECT_EQ(server_.calls, 400) << "no item ran twice";
}

TEST_F(BatchJobsTest, CancelStopsAJobAndAnotherTenantCannotSeeIt) {
  server_.delay = std::chrono::milliseconds(5);
  BatchJobs jobs(Options(), server_);
  Caller owner{true, "k1", "team-a", false};
  Caller other{true, "k2", "team-b", false};
  BatchJobSpec spec = Spec(Jsonl(400, 0, "team-a"));
  spec.concurrency = 1;
  auto s = jobs.Submit(spec, owner);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(jobs.Get(s->id, other).status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(jobs.List(other).empty());
  EXPECT_EQ(jobs.Cancel(s->id, other).status().code(), StatusCode::kNotFound);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  auto cancelled = jobs.Cancel(s->id, owner);
  ASSERT_TRUE(cancelled.ok()) << cancelled.status().message();
  EXPECT_EQ(cancelled->state, "CANCELLED");
  EXPECT_LT(cancelled->Done(), 400);
  EXPECT_EQ(jobs.Cancel(s->id, owner).status().code(), StatusCode::kFailedPrecondition);
  ASSERT_EQ(jobs.List(owner).size(), 1u);
}

TEST_F(BatchJobsTest, ATaskJobSendsTaskQueriesWithItsRequirementsAsItsCaller) {
  BatchJobs jobs(Options(), server_);
  auto spec = BatchJobSpecFromJson(R"({"task": "classification/digits", "parameters": {"min_accuracy": 0.9, "max_cost": 0.001}, "input": ")" +
                                   Jsonl(2, 0, "team-a") + R"(", "output": "out"})");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  Caller owner{true, "k1", "team-a", false};
  auto s = jobs.Submit(*spec, owner);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(WaitDone(jobs, s->id, owner).succeeded, 2);
  std::lock_guard lock(server_.mu);
  EXPECT_EQ(server_.last.task, "classification/digits");
  EXPECT_TRUE(server_.last.model_name.empty());
  EXPECT_EQ(std::get<double>(server_.last.parameters.at("min_accuracy")), 0.9);
  EXPECT_EQ(std::get<double>(server_.last.parameters.at("max_cost")), 0.001);
  EXPECT_EQ(server_.last.caller.tenant, "team-a");
  EXPECT_EQ(server_.last.id, "line-00000002");
}

TEST_F(BatchJobsTest, BadSubmissionsNameTheProblem) {
  BatchJobs jobs(Options(), server_);
  const std::pair<const char*, const char*> bad[] = {
      {R"({"input": "/a", "output": "/b"})", "one of 'model' and 'task'"},
      {R"({"model": "m", "task": "t", "input": "/a", "output": "/b"})", "one of 'model' and 'task'"},
      {R"({"model": "m", "output": "/b"})", "'input' is required"},
      {R"({"model": "m", "input": "/a", "output": ""})", "'output' is required"},
      {R"({"model": "m", "input": "/a", "output": "/b", "parameters": {"latency_slo_ms": 5}})", "no latency SLO"},
      {R"({"model": "m", "input": "/a", "output": "/b", "concurrency": 0})", "'concurrency'"},
      {R"({"model": "m", "input": "/a", "output": "/b", "colour": 1})", "'colour'"},
  };
  for (const auto& [body, named] : bad) {
    auto s = BatchJobSpecFromJson(body);
    ASSERT_FALSE(s.ok()) << body;
    EXPECT_NE(s.status().message().find(named), std::string::npos) << s.status().message();
  }
  auto missing = jobs.Submit(Spec("nothing.jsonl"), {});
  EXPECT_EQ(missing.status().code(), StatusCode::kInvalidArgument);
  BatchJobSpec unknown = Spec(Jsonl(3));
  unknown.model = "nope";
  EXPECT_EQ(jobs.Submit(unknown, {}).status().code(), StatusCode::kNotFound);
  std::ofstream(Home() / "dup.jsonl") << R"({"id": "x", "inputs": []})" << "\n" << R"({"id": "x", "inputs": []})" << "\n";
  auto dup = jobs.Submit(Spec("dup.jsonl"), {});
  ASSERT_FALSE(dup.ok());
  EXPECT_NE(dup.status().message().find("appears twice"), std::string::npos);
}

// Answers the first item from a thread of its own (as a batcher would) only
// once the job's thread is inside Infer for the second, and looks for the
// first item's output file as soon as its callback returns; records the
// scheduling priority of the thread that sends items.
class HandOffServer : public EchoServer {
 public:
  fs::path first_output;
  std::atomic<bool> first_written_by_callback{false};
  std::atomic<int> sender_nice{0};
  void Infer(InferenceRequest request, InferCallback done) override {
    errno = 0;
    sender_nice = ::getpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()));
    const int call = ++calls;
    InferenceResponse r;
    r.model_name = request.model_name;
    r.id = request.id;
    r.outputs.push_back(request.inputs[0]);
    if (call == 1) {
      std::thread([this, r = std::move(r), done = std::move(done)]() mutable {
        WaitFor(second_sent_);
        done(std::move(r));
        first_written_by_callback = fs::exists(first_output);
        Open(answered_first_);
      }).detach();
      return;
    }
    if (call == 2) {
      Open(second_sent_);
      WaitFor(answered_first_);
    }
    done(std::move(r));
  }

 private:
  void Open(bool& flag) {
    std::lock_guard lock(gate_mu_);
    flag = true;
    gate_cv_.notify_all();
  }
  void WaitFor(const bool& flag) {
    std::unique_lock lock(gate_mu_);
    gate_cv_.wait_for(lock, std::chrono::seconds(5), [&] { return flag; });
  }
  std::mutex gate_mu_;
  std::condition_variable gate_cv_;
  bool second_sent_ = false;     // guarded by gate_mu_
  bool answered_first_ = false;  // guarded by gate_mu_
};

TEST_F(BatchJobsTest, AnswersAreWrittenOnTheJobsLowPriorityThreadNotTheServersThread) {
  HandOffServer server;
  server.first_output = Home() / "out" / "line-00000001.json";
  BatchJobs jobs(Options(), server);
  auto s = jobs.Submit(Spec(Jsonl(4)), {});
  ASSERT_TRUE(s.ok()) << s.status().message();
  const BatchJobStatus done = WaitDone(jobs, s->id);
  EXPECT_EQ(done.succeeded, 4);
  EXPECT_TRUE(fs::exists(server.first_output));
  // The server's thread only handed the answer over: the file came later,
  // from the job's thread (which was inside Infer for the second item).
  EXPECT_FALSE(server.first_written_by_callback);
  // Items are sent from a thread at the lowest CPU priority.
  EXPECT_EQ(server.sender_nice, 19);
}

}  // namespace

// The review's findings: a user key read /etc/passwd and a key file through
// a job, and wrote into a model's folder. Each must be refused, with the
// same answer whether or not the path outside exists, and audited.
TEST_F(BatchJobsTest, AJobReadsAndWritesOnlyInItsTenantsFolder) {
  BatchJobs jobs(Options(), server_);
  const Caller user{true, "k1", "team-a", false};
  Jsonl(3, 0, "team-a");
  const fs::path secret = dir_ / "secret.jsonl";  // outside every batch folder
  std::ofstream(secret) << kItem << "\n";
  fs::create_symlink(secret, Home("team-a") / "link.jsonl");
  fs::create_directories(Home("team-a") / "linkdir");
  fs::create_symlink(secret, Home("team-a") / "linkdir" / "x.json");
  fs::create_directory_symlink(dir_, Home("team-a") / "up");
  const std::pair<std::string, std::string> refused[] = {
      {"/etc/passwd", "out"},
      {secret.string(), "out"},
      {"../default/in.jsonl", "out"},
      {"../../secret.jsonl", "out"},
      {"link.jsonl", "out"},
      {"linkdir", "out"},
      {"/nonexistent/file", "out"},
      {"in.jsonl", (dir_ / "elsewhere").string()},
      {"in.jsonl", "../team-b/out"},
      {"in.jsonl", "up/written"},
  };
  for (const auto& [input, output] : refused) {
    BatchJobSpec spec = Spec(input);
    spec.output = output;
    auto s = jobs.Submit(spec, user);
    ASSERT_FALSE(s.ok()) << input << " -> " << output;
    EXPECT_EQ(s.status().code(), StatusCode::kPermissionDenied) << s.status().message();
    // It quotes the caller's own path, never where the server resolved it.
    EXPECT_EQ(s.status().message().find((dir_ / "root").string()), std::string::npos)
        << "names a server path: " << s.status().message();
  }
  EXPECT_FALSE(fs::exists(dir_ / "elsewhere"));
  EXPECT_FALSE(fs::exists(dir_ / "written"));
  EXPECT_FALSE(fs::exists(Home("team-b") / "out"));
  EXPECT_EQ(server_.calls.load(), 0);
  // A path outside answers alike whether or not it exists.
  BatchJobSpec there = Spec("/etc/passwd"), nowhere = Spec("/etc/no-such-file");
  EXPECT_EQ(jobs.Submit(there, user).status().message().substr(0, 12),
            jobs.Submit(nowhere, user).status().message().substr(0, 12));
  EXPECT_EQ(jobs.Submit(there, user).status().code(), jobs.Submit(nowhere, user).status().code());

  // Inside its folder, by relative or absolute path, it runs.
  BatchJobSpec ok = Spec("in.jsonl");
  ok.output = (Home("team-a") / "out").string();
  auto s = jobs.Submit(ok, user);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(WaitDone(jobs, s->id, user).succeeded, 3);
  EXPECT_EQ(Files(".json", "team-a"), 3u);

  // Every submission, refused ones included, and the end are audited.
  const std::vector<BatchEvent> events = Audited();
  size_t refused_submissions = 0, ended = 0;
  for (const BatchEvent& e : events) {
    if (e.action == "batch_submit" && e.outcome == "PERMISSION_DENIED") ++refused_submissions;
    if (e.action == "batch_end" && e.job == s->id && e.outcome == "DONE") ++ended;
    EXPECT_EQ(e.key_id, "k1");
    EXPECT_EQ(e.tenant, "team-a");
  }
  EXPECT_EQ(refused_submissions, std::size(refused) + 4);
  EXPECT_EQ(ended, 1u);
}

TEST_F(BatchJobsTest, ALinkSwappedInAfterTheSubmissionIsNotRead) {
  server_.delay = std::chrono::milliseconds(20);
  BatchJobs jobs(Options(), server_);
  fs::create_directories(Home() / "in");
  for (const char* name : {"a", "b", "c", "d"}) std::ofstream(Home() / "in" / (std::string(name) + ".json")) << kItem;
  const fs::path secret = dir_ / "secret.json";
  std::ofstream(secret) << kItem;
  BatchJobSpec spec = Spec("in");
  spec.concurrency = 1;
  auto s = jobs.Submit(spec, {});
  ASSERT_TRUE(s.ok()) << s.status().message();
  // Once the job listed its items and sent the first, d.json becomes a link out.
  while (server_.calls.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  fs::remove(Home() / "in" / "d.json");
  fs::create_symlink(secret, Home() / "in" / "d.json");
  const BatchJobStatus done = WaitDone(jobs, s->id);
  EXPECT_EQ(done.succeeded, 3);
  EXPECT_EQ(done.failed, 1);
  std::ifstream error(Home() / "out" / "d.error.json");
  std::stringstream text;
  text << error.rdbuf();
  EXPECT_NE(text.str().find("outside this key's batch folder"), std::string::npos) << text.str();
}

TEST_F(BatchJobsTest, CancellationsAreAudited) {
  server_.delay = std::chrono::milliseconds(5);
  BatchJobs jobs(Options(), server_);
  const Caller owner{true, "k1", "team-a", false};
  const Caller other{true, "k2", "team-b", false};
  BatchJobSpec spec = Spec(Jsonl(400, 0, "team-a"));
  spec.concurrency = 1;
  auto s = jobs.Submit(spec, owner);
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(jobs.Cancel(s->id, other).ok());
  EXPECT_TRUE(jobs.Cancel(s->id, owner).ok());
  std::vector<std::string> seen;
  for (const BatchEvent& e : Audited()) seen.push_back(e.action + " " + e.key_id + " " + e.outcome);
  EXPECT_NE(std::find(seen.begin(), seen.end(), "batch_cancel k2 NOT_FOUND"), seen.end());
  EXPECT_NE(std::find(seen.begin(), seen.end(), "batch_cancel k1 ok"), seen.end());
  EXPECT_NE(std::find(seen.begin(), seen.end(), "batch_end k1 CANCELLED"), seen.end());
}

}  // namespace somm
