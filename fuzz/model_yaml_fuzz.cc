// model.yaml (repository/model_config.h) on hostile text: yaml-cpp's parser
// and our reading of its nodes. Any outcome but a Status is a finding
// (yaml-cpp throws on malformed YAML and on a node of the wrong type; the
// config reader must turn both into InvalidArgument).
#include <cstddef>
#include <cstdint>
#include <string>

#include "repository/model_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const auto config = somm::ParseModelConfig(text, "fuzz/model.yaml");
  if (config.ok()) {
    for (const auto& spec : config->inputs) (void)somm::FullShape(config.value(), spec);
    for (const auto& spec : config->outputs) (void)somm::FullShape(config.value(), spec);
  }
  return 0;
}
