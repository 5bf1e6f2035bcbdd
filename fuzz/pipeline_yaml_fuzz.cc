// pipeline.yaml (pipeline/pipeline_config.h) on hostile text: yaml-cpp's
// parser and our reading of its nodes, the references and the cycle check.
// Beyond "no crash": an accepted pipeline has its steps in an order that
// runs each after every step it reads.
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
  }
  return 0;
}
