// The simulator's tests' model repository: model folders with a model.yaml
// and a persisted variant profile each, as `somm simulate --repository`
// reads them, written into a fresh folder under the test's temporary
// directory; and the steady traces the tests replay against it. Every model is one variant ("ts-fp32", as registered) on one
// CPU thread with a batch cap of 8, 100 MiB a replica; its latency is
// `b1_ms` at batch 1 and 1.2x, 1.6x, 2.4x that at 2, 4, 8.
//
// Test-only (it uses GoogleTest's TempDir). Thread-safety: plain functions;
// two tests writing the same folder at once would clash, so each names its own.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "loadgen/trace.h"
#include "profiles/variant_profile.h"

namespace somm::sim {

struct TestModel {
  std::string name = "m";
  std::string task;  // "": none
  double accuracy = 0.97;
  double b1_ms = 10;
  double load_ms = 500;
};

inline VariantProfile TestProfile(const TestModel& m) {
  VariantProfile p;
  p.model = m.name;
  p.variant = "ts-fp32";
  p.precision = "fp32";
  p.optimization = "as-registered";
  p.accuracy = m.accuracy;
  HardwareProfile hp;
  hp.hardware = {DeviceKind::kCpu, 0, 1};
  hp.latency =
      LatencyCurve::Fit({{1, m.b1_ms}, {2, 1.2 * m.b1_ms}, {4, 1.6 * m.b1_ms}, {8, 2.4 * m.b1_ms}});
  hp.peak_memory_mb = 100;
  hp.load_time_ms = m.load_ms;
  p.hardware = {hp};
  return p;
}

// Writes `models` (by default the one "m" of TestModel's defaults) into
// <TempDir>/somm-sim-<folder>, emptied first; returns its path.
inline std::string WriteTestRepository(const std::string& folder,
                                       const std::vector<TestModel>& models = {TestModel{}}) {
  namespace fs = std::filesystem;
  const fs::path root = fs::path(::testing::TempDir()) / ("somm-sim-" + folder);
  fs::remove_all(root);
  for (const TestModel& m : models) {
    fs::create_directories(root / m.name / "1");
    // No instance_count: written, it would be a floor idle unloading keeps
    // (docs/managed.md), and the tests follow the managed replicas.
    std::ofstream(root / m.name / "model.yaml")
        << "name: " << m.name << "\nplatform: torchscript\n"
        << (m.task.empty() ? "" : "task: " + m.task + "\n") << R"(max_batch_size: 8
inputs:
- name: x
  datatype: FP32
  shape: [4]
outputs:
- name: y
  datatype: FP32
  shape: [2]
intra_op_threads: 1
)";
    const fs::path variant = root / ".somm" / "variants" / m.name / "1" / "ts-fp32";
    fs::create_directories(variant);
    std::ofstream(variant / "profile.json") << ProfileToJson(TestProfile(m));
  }
  return root.string();
}

// `qps` queries a second for `seconds`, evenly spaced, each with a 200-ms
// SLO: `model`'s ("m" by default), or with `model` "" task `task`'s.
inline loadgen::Trace SteadyTrace(double qps, double seconds, const std::string& model = "m",
                                  const std::string& task = "") {
  loadgen::Trace t;
  const int n = static_cast<int>(qps * seconds);
  for (int i = 0; i < n; ++i) {
    loadgen::TraceQuery q;
    q.timestamp_ms = 1000.0 * i / qps;
    q.model = model;
    if (model.empty()) q.task = task;
    q.latency_slo_ms = 200;
    q.line = i + 2;
    t.queries.push_back(q);
  }
  return t;
}

}  // namespace somm::sim
