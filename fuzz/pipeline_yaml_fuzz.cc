// pipeline.yaml (pipeline/pipeline_config.h) on hostile text: yaml-cpp's
// parser and our reading of its nodes, the references and the cycle check.
// Beyond "no crash": an accepted pipeline has its steps in an order that
// runs each after every step it reads, and its cascade, switch and fan-out
// steps hold what the parser promises (model counts, exactly one choice).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string>

#include "pipeline/pipeline_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const auto config = somm::pipeline::ParsePipelineConfig(text, "fuzz/pipeline.yaml");
  if (!config.ok()) return 0;
  std::set<std::string> ran;
  for (const auto& step : config->steps) {
    for (const auto& [name, source] : step.inputs) {
      const auto [from, output] = somm::pipeline::SplitSource(source);
      if (!from.empty() && !ran.count(from)) abort();
    }
    ran.insert(step.name);
    // What the parser promises of the steps that call several models.
    using somm::pipeline::StepKind;
    if (step.kind == StepKind::kCascade) {
      const auto& c = step.cascade;
      const double v = c.min_accuracy ? *c.min_accuracy : c.threshold.value_or(-1);
      if (c.models.size() < 2 || c.models.size() > somm::pipeline::kMaxCascadeStages ||
          c.min_accuracy.has_value() == c.threshold.has_value() || !(v >= 0 && v <= 1)) {
        abort();
      }
    }
    if (step.kind == StepKind::kSwitch) {
      const auto& w = step.switch_;
      if (w.parameter.empty() == w.input.empty() || w.cases.empty() ||
          w.cases.size() > somm::pipeline::kMaxBranches) {
        abort();
      }
    }
    if (step.kind == StepKind::kFanout &&
        (step.fanout.models.size() < 2 || step.fanout.models.size() > somm::pipeline::kMaxBranches)) {
      abort();
    }
  }
  return 0;
}
