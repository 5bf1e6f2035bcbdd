// ModelStatistics and ModelConfiguration: what Triton's statistics and
// model configuration extensions answer (GET /v2/models[/{m}[/versions/{v}]]/stats,
// GET /v2/models/{m}[/versions/{v}]/config; gRPC ModelStatistics and
// ModelConfig), as plain data the router fills in and the frontends encode
// in Triton's shapes (frontend/http/triton_json.h, frontend/grpc/model_info_rpcs.h).
//
// The statistics are counted where the work happens and added up by the
// router that answered the queries (router/inference_statistics.h): since
// the server started, per model version. The durations follow Triton's
// meanings: `success` and `fail` run from the query's arrival at the router
// to its answer; `queue` is the wait in the instance's batcher; and of the
// batch that ran the query, `compute_input` joined the inputs into one
// batch, `compute_infer` ran the model and `compute_output` cut the outputs
// apart. Each query adds its batch's compute times, so they count queries;
// `batch_stats` count executions, one row per batch size seen.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/tensor.h"
#include "repository/model_config.h"

namespace somm {

// A count and the total time of what it counted (Triton's StatisticDuration).
struct DurationStat {
  uint64_t count = 0;
  uint64_t ns = 0;
};

struct InferStatistics {
  DurationStat success;
  DurationStat fail;
  DurationStat queue;
  DurationStat compute_input;
  DurationStat compute_infer;
  DurationStat compute_output;
  // Queries answered from the router's response cache (model.yaml's
  // response_cache), which did not run the model; and those looked up and
  // not found, with the time their answers took to be kept.
  DurationStat cache_hit;
  DurationStat cache_miss;
};

// Executions of one batch size (Triton's InferBatchStatistics): each count
// is the number of batches of that size, each ns their total.
struct BatchSizeStatistics {
  uint64_t batch_size = 0;
  DurationStat compute_input;
  DurationStat compute_infer;
  DurationStat compute_output;
};

struct ModelStatistics {
  std::string name;
  std::string version;
  uint64_t last_inference_ms = 0;  // unix ms of the last answer; 0 = none yet
  uint64_t inference_count = 0;    // samples answered by a run of the model
  uint64_t execution_count = 0;    // batches run
  InferStatistics inference_stats;
  std::vector<BatchSizeStatistics> batch_stats;  // ascending batch sizes
};

// One model version's configuration as Triton's ModelConfig describes it,
// with what somm knows beside: the parsed model.yaml and the facts a
// frontend cannot find in it.
struct ModelConfiguration {
  ModelConfig config;
  std::string version;         // the version described
  std::string platform;        // what OIP metadata reports ("pytorch_torchscript")
  std::string model_filename;  // the file of each version ("model.pt")
  // somm's facts that Triton's ModelConfig has no field for, as its
  // "parameters" map carries them on both wires ({"somm_task": "..."}):
  // the version described and every ready one, somm's platform name, task,
  // accuracy and its source, the variants profiled, the instance floor,
  // intra-op threads, description, preprocessing. Empty facts are left out.
  std::map<std::string, std::string> parameters;
  // The instances loaded now, one row per group: the device kind ("cpu",
  // "cuda"), its index, and how many instances run there.
  struct Instances {
    std::string name;  // the group's label: variant@hardware
    std::string device;
    int index = 0;
    int count = 0;
  };
  std::vector<Instances> instance_groups;
};

// A datatype as Triton's model configuration names it ("TYPE_FP32"; BYTES
// is TYPE_STRING), which both wires carry (REST as this string, gRPC as
// the enum value of the same name).
inline const char* TritonDataTypeName(DataType type) {
  switch (type) {
    case DataType::kBool: return "TYPE_BOOL";
    case DataType::kUint8: return "TYPE_UINT8";
    case DataType::kUint16: return "TYPE_UINT16";
    case DataType::kUint32: return "TYPE_UINT32";
    case DataType::kUint64: return "TYPE_UINT64";
    case DataType::kInt8: return "TYPE_INT8";
    case DataType::kInt16: return "TYPE_INT16";
    case DataType::kInt32: return "TYPE_INT32";
    case DataType::kInt64: return "TYPE_INT64";
    case DataType::kFp16: return "TYPE_FP16";
    case DataType::kBf16: return "TYPE_BF16";
    case DataType::kFp32: return "TYPE_FP32";
    case DataType::kFp64: return "TYPE_FP64";
    case DataType::kBytes: return "TYPE_STRING";
    case DataType::kInvalid: break;
  }
  return "TYPE_INVALID";
}

}  // namespace somm
