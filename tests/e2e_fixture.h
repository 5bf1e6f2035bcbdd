// Shared set-up of the end-to-end tests: a model repository in a temp folder
// built from the demo repository's digits models plus a few models made for
// testing (one that throws, one with a long batching delay, one with a broken
// config), the held-out digits, and libtorch reference outputs for them.
#pragma once

#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <filesystem>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "server_process.h"

namespace somm::testing {

// The digits models every test checks.
inline const std::vector<std::string> kDigitsModels = {"digits-logistic", "digits-mlp",
                                                       "digits-cnn"};

struct HeldOutDigits {
  std::vector<std::vector<float>> pixels;  // each 64 values, 0..16
  std::vector<int64_t> labels;
};

// Reads <demo>/digits-mlp/1/validation (written by tools/make_demo_repo.py).
HeldOutDigits LoadHeldOutDigits(const std::string& demo_repo);

// Runs a TorchScript file directly with libtorch: the reference every server
// answer is compared against. Input [n, 64] -> output [n, 10], row-major.
std::vector<float> TorchReference(const std::string& model_file,
                                  const std::vector<std::vector<float>>& batch);

// Writes a copy of a classifier (TorchScript, its last layer [10, h] and
// [10]) whose output rows are rolled by one: same signature, same speed,
// every answer one class off. A version that answers wrong.
void SaveShiftedClassifier(const std::string& model_file, const std::string& out_file);

// A repository of `model` alone (its model.yaml copied, version 1 linked
// from the demo repository), fresh per process and tag: a server on it runs
// no other model's variant jobs.
std::string MakeOneModelRepository(const std::string& demo_repo, const std::string& model,
                                   const std::string& tag);

// Runs a shell command: its exit status, and its stdout and stderr together.
std::pair<int, std::string> RunCommand(const std::string& command);

// Builds the test repository (a fresh folder per process and tag) and returns its path.
std::string MakeTestRepository(const std::string& demo_repo, const std::string& tag = "main");

// A file's bytes; "" when it cannot be read.
std::string ReadFileBytes(const std::string& path);
// One element of OIP's BYTES layout: a 4-byte little-endian length, then
// the bytes.
std::string OipBytesElement(const std::string& bytes);
// Waits (at most `limit`) until the server at 127.0.0.1:`http_port` says
// `model`'s variants are READY (GET /v2/repository/models/M/variants):
// variant generation runs in the background.
bool WaitForVariantsReady(int http_port, const std::string& model,
                          std::chrono::seconds limit = std::chrono::minutes(8));

// Writes the pipeline `png-mlp` into `repo`: a PNG digit (BYTES [1]) decoded
// to 8x8 grayscale, digits-mlp (a model step: it serves without profiled
// variants), argmax to `class` INT64 [1]. Returns its name.
std::string WritePngMlpPipeline(const std::string& repo);

std::string DemoRepository();  // $SOMM_DEMO_REPO or <source>/models/demo
std::string SommBinary();      // $SOMM_BINARY or the built binary

// The value of one Prometheus sample line, e.g.
// somm_inference_batch_size_count{model="digits-mlp",version="1"}; -1 if absent.
double MetricValue(const std::string& exposition, const std::string& name_and_labels);

// A test suite sharing one somm server, started on the test repository with
// `--max-body-bytes 200000`. Each suite (the CRTP parameter) has its own
// server and repository.
template <typename Suite>
class DemoServerSuite : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    demo_ = new std::string(DemoRepository());
    digits_ = new HeldOutDigits(LoadHeldOutDigits(*demo_));
    repo_ = new std::string(MakeTestRepository(*demo_));
    server_ = new ServerProcess(SommBinary(), *repo_, {"--max-body-bytes", "200000"});
  }
  // A failed suite set-up must fail every test, not skip it.
  // (gtest skips, rather than fails, tests whose SetUpTestSuite asserted.)
  void SetUp() override {
    ASSERT_GE(digits_->pixels.size(), 100u) << "no held-out digits under " << *demo_
                                            << " (run scripts/setup first)";
    ASSERT_TRUE(server_->ok()) << "server did not start; log: " << server_->log();
  }
  static void TearDownTestSuite() {
    if (server_) {
      EXPECT_EQ(server_->Terminate(), 0);
    }
    delete server_;
    delete digits_;
    delete demo_;
    if (repo_) std::filesystem::remove_all(*repo_);
    delete repo_;
  }

  static inline std::string* demo_ = nullptr;
  static inline std::string* repo_ = nullptr;
  static inline HeldOutDigits* digits_ = nullptr;
  static inline ServerProcess* server_ = nullptr;
};

}  // namespace somm::testing
