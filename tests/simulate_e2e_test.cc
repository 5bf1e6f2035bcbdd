// `somm simulate` as a user runs it: the real build/somm on a repository
// and a trace written here. The simulator's behaviour is tested in
// src/simulator/simulator_test.cc; this checks the command: its flags, its
// JSON, its exit codes, and that two processes with one seed agree byte for
// byte.
#include <gtest/gtest.h>
#include <unistd.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "profiles/variant_profile.h"

namespace {

namespace fs = std::filesystem;

std::string Read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class SimulateE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // One folder per test process: CTest runs each test in its own process,
    // in parallel, and one test's clean-up must not take another's files.
    dir_ = fs::path(::testing::TempDir()) /
           ("somm-simulate-e2e-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    const fs::path repo = dir_ / "repo";
    fs::create_directories(repo / "m" / "1");
    std::ofstream(repo / "m" / "model.yaml")
        << "name: m\nplatform: torchscript\n"
           "max_batch_size: 8\n"
           "inputs:\n- name: x\n  datatype: FP32\n  shape: [4]\n"
           "outputs:\n- name: y\n  datatype: FP32\n  shape: [2]\n";
    somm::VariantProfile p;
    p.model = "m";
    p.variant = "ts-fp32";
    p.accuracy = 0.9;
    somm::HardwareProfile hp;
    hp.latency = somm::LatencyCurve::Fit({{1, 10}, {8, 24}});
    hp.peak_memory_mb = 100;
    hp.load_time_ms = 50;
    p.hardware = {hp};
    const fs::path variant = repo / ".somm" / "variants" / "m" / "1" / "ts-fp32";
    fs::create_directories(variant);
    std::ofstream(variant / "profile.json") << somm::ProfileToJson(p);
    std::ofstream trace(dir_ / "trace.csv");
    trace << "timestamp_ms,model,latency_slo_ms\n";
    for (int i = 0; i < 2000; ++i) trace << i * 5 << ",m," << (i % 10 == 0 ? 20 : 200) << "\n";
  }

  void TearDown() override { fs::remove_all(dir_); }

  // Runs `somm simulate` with `flags`; its exit code.
  int Simulate(const std::string& flags) {
    const std::string cmd = std::string(SOMM_BINARY) + " simulate --repository " +
                            (dir_ / "repo").string() + " --trace " + (dir_ / "trace.csv").string() +
                            " --worker-cores 2 --worker-memory-mb 1024 " + flags + " 2>" +
                            (dir_ / "stderr.txt").string();
    const int rc = std::system(cmd.c_str());
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  }

  fs::path dir_;
};

TEST_F(SimulateE2eTest, WritesEveryPolicysFiguresAndRepeatsWithTheSameSeed) {
  ASSERT_EQ(Simulate("--policy all --seed 5 --json " + (dir_ / "a.json").string()), 0)
      << Read(dir_ / "stderr.txt");
  ASSERT_EQ(Simulate("--policy all --seed 5 --json " + (dir_ / "b.json").string()), 0)
      << Read(dir_ / "stderr.txt");
  const std::string a = Read(dir_ / "a.json");
  EXPECT_EQ(a, Read(dir_ / "b.json"));
  const auto j = nlohmann::json::parse(a);
  for (const char* policy : {"somm", "static-peak", "static-avg", "infaas", "clairvoyant"}) {
    ASSERT_TRUE(j["policies"].contains(policy)) << a;
    const auto& r = j["policies"][policy];
    for (const char* key : {"attainment", "instance_seconds", "cold_starts", "rejections", "p50_ms",
                            "p99_ms", "worker_seconds", "control_actions", "usd",
                            "cost_bound_usd", "cost_over_bound", "routers"}) {
      EXPECT_TRUE(r.contains(key)) << policy << " lacks " << key;
    }
    EXPECT_EQ(r["queries"], 2000);
    EXPECT_GE(r["attainment"].get<double>(), 0.0);
    EXPECT_LE(r["attainment"].get<double>(), 1.0);
    EXPECT_GT(r["instance_seconds"].get<double>(), 0.0);
  }
}

// "oracle", the clairvoyant heuristic's old name, still runs it; --routers
// puts that many routers in front of the workers and the JSON says so.
TEST_F(SimulateE2eTest, TheOldOracleNameAndSeveralRouters) {
  ASSERT_EQ(Simulate("--policy oracle --json " + (dir_ / "c.json").string()), 0)
      << Read(dir_ / "stderr.txt");
  const auto c = nlohmann::json::parse(Read(dir_ / "c.json"));
  EXPECT_TRUE(c["policies"].contains("clairvoyant")) << c.dump();
  EXPECT_GT(c["cost_bound"]["usd_at_full_attainment"].get<double>(), 0.0) << c.dump();
  ASSERT_EQ(Simulate("--policy somm --routers 2 --json " + (dir_ / "r.json").string()), 0)
      << Read(dir_ / "stderr.txt");
  const auto r = nlohmann::json::parse(Read(dir_ / "r.json"));
  EXPECT_EQ(r["policies"]["somm"]["routers"], 2) << r.dump();
  EXPECT_EQ(r["policies"]["somm"]["demand_arrivals"], 2000) << r.dump();
}

TEST_F(SimulateE2eTest, RefusesAnUnknownPolicyAndAMissingTrace) {
  EXPECT_EQ(Simulate("--policy prophet"), 2);
  EXPECT_NE(Read(dir_ / "stderr.txt").find("unknown policy 'prophet'"), std::string::npos);
  fs::remove(dir_ / "trace.csv");
  EXPECT_EQ(Simulate("--policy somm"), 2);
}

}  // namespace
