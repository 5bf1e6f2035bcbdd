// Hostile model files against a real `somm serve` (docs/hostile-input.md): a
// truncated file, random bytes, a zip whose records are corrupted, and
// TorchScript archives that declare huge storages or views over small ones
// (tests/make_hostile_models.py). Each registration over REST and gRPC gets
// a clear 400 / INVALID_ARGUMENT naming the problem; nothing is left in the
// repository; the server keeps answering; an over-size registration gets 413.
// Then valid archives whose code misbehaves when run (a loop without end,
// memory without end) against the registration sandbox, a SIGTERM during a
// registration, and the modes of a private model's files.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <thread>

#include "common/base64.h"
#include "e2e_fixture.h"
#include "proto/somm.grpc.pb.h"

namespace somm::testing {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::string ReadAll(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}
void WriteAll(const fs::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

struct HostileFile {
  std::string name;    // registered as hostile-<name>
  std::string expect;  // a phrase the refusal must contain
};

class HostileModelE2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    demo_ = new std::string(DemoRepository());
    repo_ = new std::string(MakeTestRepository(*demo_, "hostile-models"));
    files_ = new fs::path(fs::path(*repo_).parent_path() / (fs::path(*repo_).filename().string() + "-files"));
    fs::create_directories(*files_);
    const fs::path model = fs::path(*demo_) / "digits-mlp" / "1" / "model.pt";
    const std::string command = "/usr/bin/python3 " + std::string(SOMM_SOURCE_DIR) +
                                "/tests/make_hostile_models.py " + model.string() + " " +
                                files_->string();
    generated_ = std::system(command.c_str()) == 0;
    const std::string good = ReadAll(model);
    WriteAll(*files_ / "truncated.pt", good.substr(0, good.size() / 2));
    std::mt19937 rng(7);
    std::string noise(200000, '\0');
    for (char& c : noise) c = static_cast<char>(rng());
    WriteAll(*files_ / "random.pt", noise);
    // A zip with a bad archive inside: its central directory overwritten,
    // and (the zip intact) its data.pkl garbled after the first opcodes.
    // (Garbled weights alone make a valid model that answers wrongly: libtorch
    // checks no CRC of a stored record.)
    std::string directory = good;
    for (size_t i = directory.size() - 120; i < directory.size(); ++i) directory[i] ^= 0x5a;
    WriteAll(*files_ / "corrupt_directory.pt", directory);
    std::string pickle = good;
    const size_t at = pickle.find(std::string("\x80\x02" "c__torch__", 12));
    if (at != std::string::npos) {
      for (size_t i = at + 24; i < at + 88 && i < pickle.size(); ++i) pickle[i] = '\xf7';
    }
    WriteAll(*files_ / "corrupt_pickle.pt", pickle);
    // A small body limit, so that an over-size registration is cheap to send.
    server_ = new ServerProcess(SommBinary(), *repo_, {"--max-body-bytes", "4194304"});
  }
  static void TearDownTestSuite() {
    delete server_;
    fs::remove_all(*repo_);
    fs::remove_all(*files_);
    delete files_;
    delete repo_;
    delete demo_;
  }
  void SetUp() override {
    ASSERT_TRUE(generated_) << "tests/make_hostile_models.py failed (Debian's python3-torch)";
    ASSERT_TRUE(server_->ok()) << "somm serve did not start; log: " << server_->log();
  }

  static json Registration(const std::string& model_bytes) {
    return {{"task", "classification/digits"},
            {"inputs", {{{"name", "pixels"}, {"datatype", "FP32"}, {"shape", {64}}}}},
            {"outputs", {{{"name", "logits"}, {"datatype", "FP32"}, {"shape", {10}}}}},
            {"max_batch_size", 8},
            {"model", Base64Encode(model_bytes)}};
  }
  // The server still answers a query, and its process is the one started.
  static void ExpectServing(const std::string& after) {
    httplib::Client c("127.0.0.1", server_->http_port());
    c.set_read_timeout(60, 0);
    const auto digits = LoadHeldOutDigits(*demo_);
    json body;
    body["inputs"] = json::array(
        {{{"name", "pixels"}, {"datatype", "FP32"}, {"shape", {1, 64}}, {"data", digits.pixels[0]}}});
    auto r = c.Post("/v2/models/digits-mlp/infer", body.dump(), "application/json");
    ASSERT_TRUE(r) << "no answer after " << after;
    EXPECT_EQ(r->status, 200) << after << ": " << r->body;
    EXPECT_EQ(kill(server_->pid(), 0), 0) << "somm serve died after " << after;
  }

  static inline std::string* demo_ = nullptr;
  static inline std::string* repo_ = nullptr;
  static inline fs::path* files_ = nullptr;
  static inline bool generated_ = false;
  static inline ServerProcess* server_ = nullptr;
};

const HostileFile kHostile[] = {
    {"truncated", "TorchScript archive"},
    {"random", "TorchScript archive"},
    {"corrupt_directory", "TorchScript archive"},
    {"corrupt_pickle", "data.pkl: pickle at byte"},
    {"huge_storage", "declares 2147483647 FloatStorage elements"},
    {"huge_shape", "reaches element"},
    {"huge_view", "tensor 'pad'"},
};

TEST_F(HostileModelE2eTest, EveryHostileFileIsRefusedOverRestAndTheServerGoesOn) {
  httplib::Client c("127.0.0.1", server_->http_port());
  c.set_read_timeout(120, 0);
  for (const HostileFile& f : kHostile) {
    const std::string name = "hostile-" + f.name;
    const std::string bytes = ReadAll(*files_ / (f.name + ".pt"));
    ASSERT_FALSE(bytes.empty()) << f.name;
    auto r = c.Post("/v2/repository/models/" + name + "/register", Registration(bytes).dump(),
                    "application/json");
    ASSERT_TRUE(r) << f.name << ": no answer";
    EXPECT_EQ(r->status, 400) << f.name << ": " << r->body;
    const std::string message = json::parse(r->body).value("error", "");
    EXPECT_NE(message.find("refused"), std::string::npos) << f.name << ": " << message;
    EXPECT_NE(message.find(f.expect), std::string::npos) << f.name << ": " << message;
    EXPECT_FALSE(fs::exists(fs::path(*repo_) / name)) << f.name << " was left in the repository";
    ExpectServing(f.name);
  }
  // No variant job was started for any of them, and nothing is staged.
  std::error_code ec;
  const fs::path staging = fs::path(*repo_) / ".somm" / "staging";
  EXPECT_TRUE(!fs::exists(staging, ec) || fs::is_empty(staging, ec));
}

TEST_F(HostileModelE2eTest, GrpcRegistrationOfAHostileFileIsInvalidArgument) {
  auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(server_->grpc_port()),
                                     grpc::InsecureChannelCredentials());
  auto control = somm::SommControl::NewStub(channel);
  for (const char* file : {"huge_storage", "huge_view"}) {
    somm::RegisterModelRequest req;
    req.set_name(std::string("hostile-grpc-") + file);
    req.set_task("classification/digits");
    auto* in = req.add_inputs();
    in->set_name("pixels");
    in->set_datatype("FP32");
    in->add_shape(64);
    auto* out = req.add_outputs();
    out->set_name("logits");
    out->set_datatype("FP32");
    out->add_shape(10);
    req.set_max_batch_size(8);
    req.set_model(ReadAll(*files_ / (std::string(file) + ".pt")));
    grpc::ClientContext ctx;
    somm::RegisterModelResponse resp;
    const grpc::Status g = control->RegisterModel(&ctx, req, &resp);
    EXPECT_EQ(g.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << file << ": " << g.error_message();
    EXPECT_NE(g.error_message().find("refused"), std::string::npos) << g.error_message();
    ExpectServing(std::string("gRPC ") + file);
  }
}

TEST_F(HostileModelE2eTest, ARegistrationOverTheBodyLimitIs413) {
  httplib::Client c("127.0.0.1", server_->http_port());
  std::string big(5 << 20, 'A');  // 5 MiB of base64 against a 4 MiB limit
  auto r = c.Post("/v2/repository/models/hostile-big/register",
                  R"({"task":"classification/digits","model":")" + big + "\"}", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413) << r->body;
  EXPECT_FALSE(fs::exists(fs::path(*repo_) / "hostile-big"));
  ExpectServing("an over-size registration");
}

// Registration runs the model's code in a confined child (docs/hostile-input.md,
// "Registration runs in a confined child"): a model that loops or eats
// memory is refused with the limit it reached while the server answers
// everyone else, SIGTERM stops a server whose registration is running, and a
// private model's files are its owner's alone.
namespace sandbox_e2e {

// The server's resident memory, in bytes (0 when unreadable).
int64_t Rss(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  }
  return 0;
}

// Processes running `somm model-sandbox` on a model under `repo`.
std::vector<pid_t> SandboxChildren(const std::string& repo) {
  std::vector<pid_t> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmdline = ReadAll(e.path() / "cmdline");
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    if (cmdline.find("model-sandbox") != std::string::npos &&
        cmdline.find(repo) != std::string::npos) {
      out.push_back(static_cast<pid_t>(std::stol(name)));
    }
  }
  return out;
}

mode_t ModeOf(const fs::path& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 ? (st.st_mode & 0777) : 0;
}

std::string Octal(mode_t m) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%03o", static_cast<unsigned>(m));
  return buf;
}

double Since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

json RegistrationOf(const std::string& model_bytes) {
  return {{"task", "classification/digits"},
          {"inputs", {{{"name", "pixels"}, {"datatype", "FP32"}, {"shape", {64}}}}},
          {"outputs", {{{"name", "logits"}, {"datatype", "FP32"}, {"shape", {10}}}}},
          {"max_batch_size", 8},
          {"model", Base64Encode(model_bytes)}};
}

class RegistrationSandboxE2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    umask(022);  // the modes a public model's files get are the server's umask's
    demo_ = new std::string(DemoRepository());
    repo_ = new std::string(MakeTestRepository(*demo_, "registration-sandbox"));
    files_ = new fs::path(*repo_ + "-files");
    fs::create_directories(*files_);
    const fs::path model = fs::path(*demo_) / "digits-mlp" / "1" / "model.pt";
    generated_ = std::system(("/usr/bin/python3 " + std::string(SOMM_SOURCE_DIR) +
                              "/tests/make_hostile_models.py " + model.string() + " " +
                              files_->string())
                                 .c_str()) == 0;
    const auto key = [](const std::string& tenant, const std::string& role) {
      auto [code, out] = RunCommand("(" + SommBinary() + " keys create --repo " + *repo_ +
                                    " --tenant " + tenant + " --role " + role + " 2>/dev/null)");
      while (!out.empty() && out.back() == '\n') out.pop_back();
      return code == 0 ? out.substr(out.rfind('\n') + 1) : std::string();
    };
    admin_ = new std::string(key("ops", "admin"));
    user_ = new std::string(key("t", "user"));
    small_ = new std::string(key("small", "user"));
    fs::create_directories(fs::path(*repo_) / ".somm");
    std::ofstream(fs::path(*repo_) / ".somm" / "tenants.yaml")
        << "tenants:\n  small: {max_private_memory_mb: 64}\n";
    // Small limits, so that a looping probe is stopped in seconds; room
    // enough for a digits model's probe and variant job (about 640 MiB).
    server_ = new ServerProcess(SommBinary(), *repo_,
                                {"--auth", "keys", "--registration-cpu-s", "5",
                                 "--registration-timeout-s", "30", "--registration-memory-mb",
                                 "1024", "--max-body-bytes", "4194304"});
  }
  static void TearDownTestSuite() {
    delete server_;
    fs::remove_all(*repo_);
    fs::remove_all(*files_);
    delete files_;
    delete repo_;
    delete demo_;
    delete admin_;
    delete user_;
    delete small_;
  }
  void SetUp() override {
    ASSERT_TRUE(generated_) << "tests/make_hostile_models.py failed (Debian's python3-torch)";
    ASSERT_FALSE(admin_->empty() || user_->empty() || small_->empty()) << "somm keys create failed";
    ASSERT_TRUE(server_->ok()) << "somm serve did not start; log: " << server_->log();
  }
  static httplib::Headers As(const std::string& key) {
    return {{"Authorization", "Bearer " + key}};
  }
  // Registers `body` as `name`; the answer's status and error text.
  static std::pair<int, std::string> Register(const std::string& name, const json& body,
                                              const std::string& key) {
    httplib::Client c("127.0.0.1", server_->http_port());
    c.set_read_timeout(120, 0);
    auto r = c.Post("/v2/repository/models/" + name + "/register", As(key), body.dump(),
                    "application/json");
    if (!r) return {-1, "no answer"};
    const json answer = json::parse(r->body, nullptr, false);
    return {r->status, answer.is_object() ? answer.value("error", r->body) : r->body};
  }
  // The variant job's final state (READY, FAILED), or "" after `timeout_s`.
  static json WaitForVariants(const std::string& name, const std::string& key, int timeout_s) {
    httplib::Client c("127.0.0.1", server_->http_port());
    const auto start = std::chrono::steady_clock::now();
    while (Since(start) < timeout_s) {
      auto r = c.Get("/v2/repository/models/" + name + "/variants", As(key));
      if (r && r->status == 200) {
        json j = json::parse(r->body, nullptr, false);
        if (j.is_object() && (j.value("state", "") == "READY" || j.value("state", "") == "FAILED")) {
          return j;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
    return json{};
  }
  static void ExpectNothingStaged(const std::string& name) {
    EXPECT_FALSE(fs::exists(fs::path(*repo_) / name)) << name << " was left in the repository";
    std::error_code ec;
    const fs::path staging = fs::path(*repo_) / ".somm" / "staging";
    EXPECT_TRUE(!fs::exists(staging, ec) || fs::is_empty(staging, ec));
  }

  static inline std::string* demo_ = nullptr;
  static inline std::string* repo_ = nullptr;
  static inline fs::path* files_ = nullptr;
  static inline bool generated_ = false;
  static inline std::string* admin_ = nullptr;
  static inline std::string* user_ = nullptr;
  static inline std::string* small_ = nullptr;  // tenant "small": 64 MiB of private models
  static inline ServerProcess* server_ = nullptr;
};

TEST_F(RegistrationSandboxE2eTest, ALoopingModelIsRefusedAtItsLimitWhileTheServerAnswersOthers) {
  std::pair<int, std::string> answer;
  double took = 0;
  std::atomic<bool> done{false};
  std::thread registration([&] {
    const auto start = std::chrono::steady_clock::now();
    answer = Register("sandbox-loops", RegistrationOf(ReadAll(*files_ / "loops.pt")), *admin_);
    took = Since(start);
    done = true;
  });
  // Meanwhile, metadata and queries of another model are answered at once.
  httplib::Client c("127.0.0.1", server_->http_port());
  c.set_read_timeout(30, 0);
  const auto digits = LoadHeldOutDigits(*demo_);
  json query;
  query["inputs"] = json::array(
      {{{"name", "pixels"}, {"datatype", "FP32"}, {"shape", {1, 64}}, {"data", digits.pixels[0]}}});
  int calls = 0, failed = 0;
  double slowest = 0;
  while (!done) {
    const auto start = std::chrono::steady_clock::now();
    auto meta = c.Get("/v2/models/digits-mlp", As(*admin_));
    auto infer = c.Post("/v2/models/digits-mlp/infer", As(*admin_), query.dump(), "application/json");
    slowest = std::max(slowest, Since(start));
    failed += !meta || meta->status != 200 || !infer || infer->status != 200;
    ++calls;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  registration.join();
  std::printf("looping model refused after %.1f s; %d metadata+infer pairs meanwhile, slowest "
              "%.3f s\n",
              took, calls, slowest);
  EXPECT_EQ(answer.first, 400) << answer.second;
  EXPECT_NE(answer.second.find("registration of 'sandbox-loops' refused: the model's probe "),
            std::string::npos)
      << answer.second;
  // Its CPU limit, unless a busy machine left it too little CPU for that
  // within its wall-clock limit.
  EXPECT_TRUE(answer.second.find("ran past its 5 s CPU limit") != std::string::npos ||
              answer.second.find("did not finish within its 30 s time limit") != std::string::npos)
      << answer.second;
  EXPECT_LT(took, 45);
  EXPECT_GT(calls, 0);
  EXPECT_EQ(failed, 0);
  EXPECT_LT(slowest, 5.0);
  ExpectNothingStaged("sandbox-loops");
  EXPECT_TRUE(SandboxChildren(*repo_).empty());
}

TEST_F(RegistrationSandboxE2eTest, AModelThatEatsMemoryIsRefusedAndTheServerDoesNotGrow) {
  const int64_t before = Rss(server_->pid());
  ASSERT_GT(before, 0);
  std::atomic<bool> done{false};
  std::atomic<int64_t> peak{before};
  std::thread sampler([&] {
    while (!done) {
      peak = std::max<int64_t>(peak, Rss(server_->pid()));
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  const auto start = std::chrono::steady_clock::now();
  const auto answer =
      Register("sandbox-eats-memory", RegistrationOf(ReadAll(*files_ / "eats_memory.pt")), *admin_);
  const double took = Since(start);
  done = true;
  sampler.join();
  const int64_t after = Rss(server_->pid());
  std::printf("memory hog refused after %.1f s; server RSS %lld MiB before, %lld MiB at most "
              "during, %lld MiB after\n",
              took, static_cast<long long>(before >> 20), static_cast<long long>(peak >> 20),
              static_cast<long long>(after >> 20));
  EXPECT_EQ(answer.first, 400) << answer.second;
  EXPECT_NE(answer.second.find("registration of 'sandbox-eats-memory' refused: the model's probe "
                               "used more than its 1024 MiB memory limit"),
            std::string::npos)
      << answer.second;
  EXPECT_LT(peak - before, int64_t{256} << 20) << "the server grew while the model ran";
  ExpectNothingStaged("sandbox-eats-memory");
}

// A tenant's memory quota charged the bytes of its models' files: a file of
// a few KiB that writes 256 MiB when it runs was registered under a 64 MiB
// quota, and each of its instances would have taken that in the server.
// The probe measures what loading it and running it once take, and the
// quota is charged that.
TEST_F(RegistrationSandboxE2eTest, APrivateModelThatRunsLargeIsRefusedUnderAQuotaItsFileFits) {
  const std::string file = ReadAll(*files_ / "runs_large.pt");
  ASSERT_LT(file.size(), size_t{1} << 20);
  json body = RegistrationOf(file);
  body["task"] = "classification/runs-large";
  body["private"] = true;
  const auto answer = Register("sandbox-runs-large", body, *small_);
  std::printf("a %zu-byte file that runs large: %d %s\n", file.size(), answer.first,
              answer.second.c_str());
  EXPECT_EQ(answer.first, 429) << answer.second;
  for (const std::string part : {"registration of 'sandbox-runs-large' refused: one instance took ",
                                 "at its peak when the probe loaded it and ran it once",
                                 "over its memory quota (max_private_memory_mb 64 MiB)"}) {
    EXPECT_NE(answer.second.find(part), std::string::npos) << answer.second;
  }
  // The figure is the run's 256 MiB, near enough, not the file's KiB.
  const size_t at = answer.second.find("one instance took ");
  ASSERT_NE(at, std::string::npos);
  const long long mib = std::atoll(answer.second.c_str() + at + 18);
  EXPECT_GE(mib, 240) << answer.second;
  EXPECT_LE(mib, 640) << answer.second;
  ExpectNothingStaged("sandbox-runs-large");
}

TEST_F(RegistrationSandboxE2eTest, APrivateModelsFilesAreItsOwnersAloneAndAPublicOnesAreNot) {
  const fs::path demo_model = fs::path(*demo_) / "digits-mlp" / "1";
  json body = RegistrationOf(ReadAll(demo_model / "model.pt"));
  const std::string labels = ReadAll(demo_model / "validation" / "labels.bin");
  body["validation"] = {{"count", labels.size() / 8},
                        {"inputs", Base64Encode(ReadAll(demo_model / "validation" / "inputs.bin"))},
                        {"labels", Base64Encode(labels)}};
  body["task"] = "classification/sandbox-private";
  json private_body = body;
  private_body["private"] = true;
  auto answer = Register("sandbox-private", private_body, *user_);
  ASSERT_EQ(answer.first, 202) << answer.second;
  body["task"] = "classification/sandbox-public";
  answer = Register("sandbox-public", body, *admin_);
  ASSERT_EQ(answer.first, 202) << answer.second;
  // The variant jobs ran in the sandbox too: int8 through Python among them.
  for (const auto& [name, key] : {std::pair{"sandbox-private", *user_}, std::pair{"sandbox-public", *admin_}}) {
    const json status = WaitForVariants(name, key, 300);
    ASSERT_EQ(status.value("state", ""), "READY") << name << ": " << status.dump();
    std::string variants;
    for (const json& v : status.value("variants", json::array())) variants += v.value("variant", "") + " ";
    EXPECT_NE(variants.find("ts-int8"), std::string::npos) << name << ": " << status.dump();
  }
  const fs::path repo(*repo_);
  const fs::path mine = repo / "sandbox-private";
  for (const fs::path& folder :
       {mine, mine / "1", mine / "1" / "validation", repo / ".somm" / "variants" / "sandbox-private"}) {
    EXPECT_EQ(Octal(ModeOf(folder)), "700") << folder;
  }
  // The probe's measure is the version's record, what the quota charges.
  EXPECT_TRUE(fs::exists(mine / "1" / "memory.json"));
  for (const fs::path& file :
       {mine / "model.yaml", mine / "1" / "model.pt", mine / "1" / "memory.json",
        mine / "1" / "validation" / "inputs.bin", mine / "1" / "validation" / "labels.bin",
        mine / "1" / "validation" / "meta.json"}) {
    EXPECT_EQ(Octal(ModeOf(file)), "600") << file;
  }
  int variant_files = 0;
  for (const auto& e : fs::recursive_directory_iterator(repo / ".somm" / "variants" / "sandbox-private")) {
    EXPECT_EQ(Octal(ModeOf(e.path())), e.is_directory() ? "700" : "600") << e.path();
    variant_files += e.is_regular_file();
  }
  EXPECT_GE(variant_files, 6);  // each variant's model.pt and profile.json
  // A public model's stay as they were: the server's umask (022).
  const fs::path theirs = repo / "sandbox-public";
  EXPECT_EQ(Octal(ModeOf(theirs)), "755");
  EXPECT_EQ(Octal(ModeOf(theirs / "1" / "model.pt")), "644");
  EXPECT_EQ(Octal(ModeOf(repo / ".somm" / "variants" / "sandbox-public" / "1" / "ts-opt" / "model.pt")),
            "644");
}

// SIGTERM while a registration's model loops: before, the probe ran on a
// REST thread that the stop waited for, so the server never stopped.
TEST(RegistrationSandboxSigtermE2eTest, SigtermStopsTheServerWhileARegistrationRuns) {
  const std::string demo = DemoRepository();
  const std::string repo = MakeTestRepository(demo, "registration-sigterm");
  const fs::path files = repo + "-files";
  fs::create_directories(files);
  const fs::path model = fs::path(demo) / "digits-mlp" / "1" / "model.pt";
  ASSERT_EQ(std::system(("/usr/bin/python3 " + std::string(SOMM_SOURCE_DIR) +
                         "/tests/make_hostile_models.py " + model.string() + " " + files.string())
                            .c_str()),
            0);
  // Limits that do not stop it first.
  ServerProcess server(SommBinary(), repo,
                       {"--registration-cpu-s", "600", "--registration-timeout-s", "600"});
  ASSERT_TRUE(server.ok()) << server.log();
  std::thread registration([&] {
    httplib::Client c("127.0.0.1", server.http_port());
    c.set_read_timeout(90, 0);
    c.Post("/v2/repository/models/sandbox-sigterm/register",
           RegistrationOf(ReadAll(files / "loops.pt")).dump(), "application/json");
  });
  // The probe is running once its child is.
  const auto start = std::chrono::steady_clock::now();
  while (SandboxChildren(repo).empty() && Since(start) < 30) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_FALSE(SandboxChildren(repo).empty()) << "no sandbox child ran the probe";
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const auto stop = std::chrono::steady_clock::now();
  const int code = server.Terminate(30);
  const double took = Since(stop);
  std::printf("SIGTERM with a registration running: exit status %d after %.2f s\n", code, took);
  EXPECT_EQ(code, 0) << "somm serve did not stop within 30 s of SIGTERM";
  EXPECT_LT(took, 10);
  registration.join();
  // Its child went with it.
  const auto gone = std::chrono::steady_clock::now();
  while (!SandboxChildren(repo).empty() && Since(gone) < 5) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(SandboxChildren(repo).empty());
  fs::remove_all(repo);
  fs::remove_all(files);
}

}  // namespace sandbox_e2e

}  // namespace
}  // namespace somm::testing
