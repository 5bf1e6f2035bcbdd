// ModelConfig: the parsed, validated form of <repo>/<model>/model.yaml.
//
// Conventions follow Triton's config.pbtxt where one exists, so a Triton user
// reads a model.yaml without a manual:
//   * With max_batch_size > 0 the batch dimension is implicit: `shape` lists
//     the dims of ONE sample, and requests carry [batch, ...shape].
//   * -1 in a shape means "any size" for that dim.
// ParseModelConfig never throws: every problem comes back as an
// InvalidArgument Status naming the file, the field and what is wrong.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/tensor.h"

namespace somm {

struct TensorSpec {
  std::string name;
  DataType datatype = DataType::kInvalid;
  Shape shape;  // per-sample dims when the model batches; -1 = variable
};

struct DynamicBatchingOptions {
  // How long the oldest query may wait for others to join its batch.
  int64_t max_queue_delay_us = 0;
  // Batch sizes the batcher tries to cut at (ascending, each <= max_batch_size).
  std::vector<int64_t> preferred_batch_sizes;
  // Queries waiting beyond this bound are rejected at once (RESOURCE_EXHAUSTED).
  int64_t max_queue_size = 1024;
};

// Which versions of a model to serve. Triton's version_policy.
struct VersionPolicy {
  enum class Kind { kLatest, kAll, kSpecific };
  Kind kind = Kind::kLatest;
  int64_t latest_count = 1;            // kLatest
  std::vector<int64_t> specific;       // kSpecific
};

// How `somm infer` turns an image file into this model's input tensor.
struct ImagePreprocessing {
  int channels = 3;   // 1 = grayscale, 3 = RGB
  int height = 224;
  int width = 224;
  float scale = 1.0f / 255.0f;  // applied to 0..255 pixels first
  std::vector<float> mean;      // per channel, after scale; empty = 0
  std::vector<float> stddev;    // per channel; empty = 1
  bool invert = false;          // white-on-black digits from black-on-white images
};

struct AccuracyInfo {
  std::optional<double> value;  // top-1 on held-out data; unset = unknown
  std::string source;           // where the figure comes from
};

// The platform of a model.yaml that names none: every repository written
// before backends were registered by platform holds TorchScript models.
inline constexpr char kDefaultPlatform[] = "torchscript";

struct ModelConfig {
  std::string name;
  // A platform a backend registered (runtime/backend_registry.h), by its own
  // name: it chooses the backend and the model file of each version.
  std::string platform = kDefaultPlatform;
  std::string task;  // "task/dataset", optional
  int64_t max_batch_size = 0;  // 0 = the model does not batch
  std::vector<TensorSpec> inputs;
  std::vector<TensorSpec> outputs;
  std::optional<DynamicBatchingOptions> dynamic_batching;
  int instance_count = 1;
  // instance_count was written in model.yaml: then it is a floor that idle
  // unloading keeps loaded (docs/managed.md), as Triton keeps its instances.
  bool instance_count_configured = false;
  int intra_op_threads = 1;
  VersionPolicy version_policy;
  std::optional<ImagePreprocessing> image_preprocessing;
  AccuracyInfo accuracy;
  std::vector<std::string> labels;  // class names, optional
  std::string description;
  // The tenant that owns a private model; "" = public (docs/security.md).
  std::string owner_tenant;
  // `response_cache: {enable: true, max_mb: N}` (docs/lifecycle.md): answers
  // kept by the router, per model, within max_bytes (default 64 MiB).
  struct ResponseCacheConfig {
    bool enable = false;
    int64_t max_bytes = int64_t{64} << 20;
  } response_cache;
  // `warmup: {runs: N, batch_sizes: [1, 8]}` (docs/lifecycle.md): what a
  // loaded instance runs, on zeros of its signature, before it is ready.
  // runs -1: the backend's default (2, batch 1 only); at least one run
  // always happens (it checks the signature).
  struct WarmupConfig {
    int runs = -1;
    std::vector<int64_t> batch_sizes;  // empty = {1}
  } warmup;
};

// Parses YAML text; `source` names the file in error messages.
StatusOr<ModelConfig> ParseModelConfig(const std::string& yaml_text, const std::string& source);
// Reads and parses <dir>/model.yaml; the model name defaults to the folder name
// and, when given, must match it.
StatusOr<ModelConfig> LoadModelConfig(const std::string& model_dir);

// Shape as OIP metadata reports it: [-1, ...] when the model batches.
Shape FullShape(const ModelConfig& config, const TensorSpec& spec);

// The preprocessing block travels in model metadata as a JSON string
// (parameter "preprocessing"), so clients need no access to the repository.
std::string PreprocessingToJson(const ImagePreprocessing& prep);
StatusOr<ImagePreprocessing> PreprocessingFromJson(const std::string& json);

}  // namespace somm
