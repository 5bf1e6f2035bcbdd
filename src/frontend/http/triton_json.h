// Triton's statistics and model configuration extensions over REST: the
// bodies of GET /v2/models[/{m}[/versions/{v}]]/stats ($stats_model_response)
// and GET /v2/models/{m}[/versions/{v}]/config (the JSON form of Triton's
// ModelConfig message, proto/model_config.proto), from what
// InferenceServer reports (api/model_statistics.h).
//
// Shapes are Triton's: numbers as JSON numbers (Triton's own JSON, not
// protobuf's, which would write 64-bit integers as strings), enums by
// name ("TYPE_FP32", "KIND_CPU"), and somm's own facts in the
// configuration's "parameters" map as {"somm_<name>": {"string_value": ...}}.
//
// Thread-safety: free functions on values.
#pragma once

#include <string>
#include <vector>

#include "api/model_statistics.h"

namespace somm::oip {

std::string EncodeModelStatistics(const std::vector<ModelStatistics>& stats);

std::string EncodeModelConfiguration(const ModelConfiguration& configuration);

}  // namespace somm::oip
