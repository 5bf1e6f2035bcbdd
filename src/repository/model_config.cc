#include "repository/model_config.h"

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "repository/platform_names.h"

namespace somm {
namespace {

// Builds errors of the form "<file>: field 'a.b': problem".
class ConfigErrors {
 public:
  explicit ConfigErrors(std::string source) : source_(std::move(source)) {}
  Status Field(const std::string& field, const std::string& problem) const {
    return InvalidArgument(source_ + ": field '" + field + "': " + problem);
  }
  Status File(const std::string& problem) const { return InvalidArgument(source_ + ": " + problem); }

 private:
  std::string source_;
};

const std::set<std::string> kTopLevelKeys = {
    "name", "platform", "task", "max_batch_size", "inputs", "outputs", "dynamic_batching",
    "instance_count", "intra_op_threads", "version_policy", "preprocessing", "accuracy",
    "labels", "description", "owner_tenant", "response_cache", "warmup"};

template <typename T>
Status ReadScalar(const YAML::Node& node, const std::string& field, const ConfigErrors& err,
                  T* out) {
  try {
    *out = node.as<T>();
  } catch (const YAML::Exception&) {
    return err.Field(field, "expected " + std::string(std::is_same_v<T, std::string> ? "a string"
                                                      : std::is_floating_point_v<T> ? "a number"
                                                      : std::is_same_v<T, bool>     ? "true or false"
                                                                                    : "an integer") +
                                ", got '" + YAML::Dump(node) + "'");
  }
  return Status::Ok();
}

template <typename T>
Status ReadList(const YAML::Node& node, const std::string& field, const ConfigErrors& err,
                std::vector<T>* out) {
  if (!node.IsSequence()) return err.Field(field, "expected a list");
  out->clear();
  for (size_t i = 0; i < node.size(); ++i) {
    T v{};
    SOMM_RETURN_IF_ERROR(ReadScalar(node[i], field + "[" + std::to_string(i) + "]", err, &v));
    out->push_back(v);
  }
  return Status::Ok();
}

Status ParseTensorSpecs(const YAML::Node& node, const std::string& field, const ConfigErrors& err,
                        std::vector<TensorSpec>* out) {
  if (!node) return err.Field(field, "is required");
  if (!node.IsSequence() || node.size() == 0) return err.Field(field, "must be a non-empty list");
  std::set<std::string> names;
  for (size_t i = 0; i < node.size(); ++i) {
    const std::string where = field + "[" + std::to_string(i) + "]";
    const YAML::Node& t = node[i];
    if (!t.IsMap()) return err.Field(where, "expected a map with name, datatype and shape");
    TensorSpec spec;
    if (!t["name"]) return err.Field(where + ".name", "is required");
    SOMM_RETURN_IF_ERROR(ReadScalar(t["name"], where + ".name", err, &spec.name));
    if (spec.name.empty()) return err.Field(where + ".name", "must not be empty");
    if (!names.insert(spec.name).second) {
      return err.Field(where + ".name", "duplicate tensor name '" + spec.name + "'");
    }
    if (!t["datatype"]) return err.Field(where + ".datatype", "is required");
    std::string dtype;
    SOMM_RETURN_IF_ERROR(ReadScalar(t["datatype"], where + ".datatype", err, &dtype));
    spec.datatype = DataTypeFromString(dtype);
    if (spec.datatype == DataType::kInvalid) {
      return err.Field(where + ".datatype", "unknown datatype '" + dtype +
                                                "' (expected BOOL, UINT8, INT8, INT16, INT32, "
                                                "INT64, FP16, BF16, FP32, FP64 or BYTES)");
    }
    if (!t["shape"]) return err.Field(where + ".shape", "is required");
    SOMM_RETURN_IF_ERROR(ReadList(t["shape"], where + ".shape", err, &spec.shape));
    for (int64_t d : spec.shape) {
      if (d < -1 || d == 0) {
        return err.Field(where + ".shape", "dimension " + std::to_string(d) +
                                               " is invalid (use a positive size or -1)");
      }
    }
    out->push_back(std::move(spec));
  }
  return Status::Ok();
}

Status ParseDynamicBatching(const YAML::Node& node, const ConfigErrors& err, int64_t max_batch,
                            DynamicBatchingOptions* out) {
  if (!node.IsMap()) return err.Field("dynamic_batching", "expected a map");
  if (node["max_queue_delay_us"]) {
    SOMM_RETURN_IF_ERROR(ReadScalar(node["max_queue_delay_us"],
                                    "dynamic_batching.max_queue_delay_us", err,
                                    &out->max_queue_delay_us));
    if (out->max_queue_delay_us < 0 || out->max_queue_delay_us > 10'000'000) {
      return err.Field("dynamic_batching.max_queue_delay_us", "must be between 0 and 10000000");
    }
  }
  if (node["preferred_batch_sizes"]) {
    SOMM_RETURN_IF_ERROR(ReadList(node["preferred_batch_sizes"],
                                  "dynamic_batching.preferred_batch_sizes", err,
                                  &out->preferred_batch_sizes));
    for (int64_t b : out->preferred_batch_sizes) {
      if (b < 1 || b > max_batch) {
        return err.Field("dynamic_batching.preferred_batch_sizes",
                         "size " + std::to_string(b) + " is outside 1..max_batch_size (" +
                             std::to_string(max_batch) + ")");
      }
    }
    std::sort(out->preferred_batch_sizes.begin(), out->preferred_batch_sizes.end());
  }
  if (node["max_queue_size"]) {
    SOMM_RETURN_IF_ERROR(ReadScalar(node["max_queue_size"], "dynamic_batching.max_queue_size",
                                    err, &out->max_queue_size));
    if (out->max_queue_size < 1) {
      return err.Field("dynamic_batching.max_queue_size", "must be at least 1");
    }
  }
  for (const auto& kv : node) {
    const auto key = kv.first.as<std::string>();
    if (key != "max_queue_delay_us" && key != "preferred_batch_sizes" && key != "max_queue_size") {
      return err.Field("dynamic_batching." + key, "unknown field");
    }
  }
  return Status::Ok();
}

Status ParseVersionPolicy(const YAML::Node& node, const ConfigErrors& err, VersionPolicy* out) {
  if (!node.IsMap() || node.size() != 1) {
    return err.Field("version_policy", "expected exactly one of {latest: N}, {all: true}, "
                                       "{specific: [v, ...]}");
  }
  if (node["latest"]) {
    out->kind = VersionPolicy::Kind::kLatest;
    SOMM_RETURN_IF_ERROR(
        ReadScalar(node["latest"], "version_policy.latest", err, &out->latest_count));
    if (out->latest_count < 1) return err.Field("version_policy.latest", "must be at least 1");
  } else if (node["all"]) {
    out->kind = VersionPolicy::Kind::kAll;
  } else if (node["specific"]) {
    out->kind = VersionPolicy::Kind::kSpecific;
    SOMM_RETURN_IF_ERROR(
        ReadList(node["specific"], "version_policy.specific", err, &out->specific));
    if (out->specific.empty()) return err.Field("version_policy.specific", "must not be empty");
    for (int64_t v : out->specific) {
      if (v < 1) return err.Field("version_policy.specific", "versions are positive integers");
    }
  } else {
    return err.Field("version_policy", "expected 'latest', 'all' or 'specific'");
  }
  return Status::Ok();
}

Status ParsePreprocessing(const YAML::Node& node, const ConfigErrors& err,
                          std::optional<ImagePreprocessing>* out) {
  if (!node.IsMap()) return err.Field("preprocessing", "expected a map");
  const YAML::Node image = node["image"];
  if (!image) return err.Field("preprocessing", "only 'image' preprocessing is supported");
  ImagePreprocessing p;
  const std::string f = "preprocessing.image";
  if (image["channels"]) SOMM_RETURN_IF_ERROR(ReadScalar(image["channels"], f + ".channels", err, &p.channels));
  if (p.channels != 1 && p.channels != 3) return err.Field(f + ".channels", "must be 1 or 3");
  if (image["height"]) SOMM_RETURN_IF_ERROR(ReadScalar(image["height"], f + ".height", err, &p.height));
  if (image["width"]) SOMM_RETURN_IF_ERROR(ReadScalar(image["width"], f + ".width", err, &p.width));
  if (p.height < 1 || p.width < 1 || p.height > 8192 || p.width > 8192) {
    return err.Field(f, "height and width must be between 1 and 8192");
  }
  if (image["scale"]) SOMM_RETURN_IF_ERROR(ReadScalar(image["scale"], f + ".scale", err, &p.scale));
  if (image["mean"]) SOMM_RETURN_IF_ERROR(ReadList(image["mean"], f + ".mean", err, &p.mean));
  if (image["std"]) SOMM_RETURN_IF_ERROR(ReadList(image["std"], f + ".std", err, &p.stddev));
  if (image["invert"]) SOMM_RETURN_IF_ERROR(ReadScalar(image["invert"], f + ".invert", err, &p.invert));
  if (!p.mean.empty() && p.mean.size() != static_cast<size_t>(p.channels)) {
    return err.Field(f + ".mean", "needs one value per channel");
  }
  if (!p.stddev.empty() && p.stddev.size() != static_cast<size_t>(p.channels)) {
    return err.Field(f + ".std", "needs one value per channel");
  }
  for (float s : p.stddev) {
    if (s == 0.0f) return err.Field(f + ".std", "must not contain 0");
  }
  // YAML spells infinity and NaN (.inf, .nan); either would silently turn
  // every pixel into 0 or NaN.
  if (!std::isfinite(p.scale)) return err.Field(f + ".scale", "must be a finite number");
  for (const auto& [key, list] : {std::pair{".mean", &p.mean}, std::pair{".std", &p.stddev}}) {
    for (float x : *list) {
      if (!std::isfinite(x)) return err.Field(f + key, "must be finite numbers");
    }
  }
  *out = p;
  return Status::Ok();
}

}  // namespace

StatusOr<ModelConfig> ParseModelConfig(const std::string& yaml_text, const std::string& source) {
  const ConfigErrors err(source);
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    return err.File("not valid YAML: " + std::string(e.what()));
  }
  if (!root.IsMap()) return err.File("expected a YAML map at the top level");
  try {
    for (const auto& kv : root) {
      const auto key = kv.first.as<std::string>();
      if (!kTopLevelKeys.count(key)) return err.Field(key, "unknown field");
    }
    ModelConfig c;
    if (root["name"]) SOMM_RETURN_IF_ERROR(ReadScalar(root["name"], "name", err, &c.name));
    if (root["platform"]) {
      SOMM_RETURN_IF_ERROR(ReadScalar(root["platform"], "platform", err, &c.platform));
      // Any platform a backend registered (runtime/backend_registry.h), by
      // its name or an alias; the config keeps the platform's own name.
      std::optional<std::string> platform = CanonicalPlatform(c.platform);
      if (!platform) {
        std::string names;
        for (const std::string& n : AcceptedPlatformNames()) {
          names += (names.empty() ? "'" : ", '") + n + "'";
        }
        return err.Field("platform", "unsupported platform '" + c.platform +
                                         "' (this build supports " +
                                         (names.empty() ? "none" : names) + ")");
      }
      c.platform = std::move(*platform);
    }
    if (root["task"]) {
      SOMM_RETURN_IF_ERROR(ReadScalar(root["task"], "task", err, &c.task));
      if (c.task.find('/') == std::string::npos) {
        return err.Field("task", "expected 'task/dataset', got '" + c.task + "'");
      }
    }
    if (root["description"]) {
      SOMM_RETURN_IF_ERROR(ReadScalar(root["description"], "description", err, &c.description));
    }
    if (root["owner_tenant"]) {
      SOMM_RETURN_IF_ERROR(ReadScalar(root["owner_tenant"], "owner_tenant", err, &c.owner_tenant));
    }
    if (const YAML::Node cache = root["response_cache"]) {
      if (!cache.IsMap()) return err.Field("response_cache", "expected a map {enable, max_mb}");
      for (const auto& kv : cache) {
        const std::string key = kv.first.as<std::string>();
        if (key != "enable" && key != "max_mb") {
          return err.Field("response_cache." + key, "unknown key (enable, max_mb)");
        }
      }
      if (cache["enable"]) {
        SOMM_RETURN_IF_ERROR(ReadScalar(cache["enable"], "response_cache.enable", err,
                                        &c.response_cache.enable));
      }
      if (cache["max_mb"]) {
        double mb = 0;
        SOMM_RETURN_IF_ERROR(ReadScalar(cache["max_mb"], "response_cache.max_mb", err, &mb));
        if (!(mb > 0 && mb <= 1024 * 1024)) {
          return err.Field("response_cache.max_mb", "must be more than 0 and at most 1048576");
        }
        c.response_cache.max_bytes = static_cast<int64_t>(mb * 1024 * 1024);
      }
    }
    if (root["max_batch_size"]) {
      SOMM_RETURN_IF_ERROR(ReadScalar(root["max_batch_size"], "max_batch_size", err, &c.max_batch_size));
      if (c.max_batch_size < 0 || c.max_batch_size > 65536) {
        return err.Field("max_batch_size", "must be between 0 and 65536");
      }
    }
    if (const YAML::Node warmup = root["warmup"]) {
      if (!warmup.IsMap()) return err.Field("warmup", "expected a map {runs, batch_sizes}");
      for (const auto& kv : warmup) {
        const std::string key = kv.first.as<std::string>();
        if (key != "runs" && key != "batch_sizes") {
          return err.Field("warmup." + key, "unknown key (runs, batch_sizes)");
        }
      }
      if (warmup["runs"]) {
        SOMM_RETURN_IF_ERROR(ReadScalar(warmup["runs"], "warmup.runs", err, &c.warmup.runs));
        if (c.warmup.runs < 0 || c.warmup.runs > 100) {
          return err.Field("warmup.runs", "must be between 0 and 100");
        }
      }
      if (const YAML::Node sizes = warmup["batch_sizes"]) {
        if (!sizes.IsSequence() || sizes.size() == 0 || sizes.size() > 16) {
          return err.Field("warmup.batch_sizes", "expected a list of 1 to 16 batch sizes");
        }
        for (size_t i = 0; i < sizes.size(); ++i) {
          int64_t b = 0;
          SOMM_RETURN_IF_ERROR(ReadScalar(sizes[i], "warmup.batch_sizes", err, &b));
          if (b < 1 || (c.max_batch_size > 0 ? b > c.max_batch_size : b > 1)) {
            return err.Field("warmup.batch_sizes", "batch size " + std::to_string(b) +
                                                       " is not between 1 and max_batch_size");
          }
          c.warmup.batch_sizes.push_back(b);
        }
      }
    }
    SOMM_RETURN_IF_ERROR(ParseTensorSpecs(root["inputs"], "inputs", err, &c.inputs));
    SOMM_RETURN_IF_ERROR(ParseTensorSpecs(root["outputs"], "outputs", err, &c.outputs));
    if (root["dynamic_batching"]) {
      if (c.max_batch_size == 0) {
        return err.Field("dynamic_batching", "needs max_batch_size > 0");
      }
      DynamicBatchingOptions db;
      SOMM_RETURN_IF_ERROR(ParseDynamicBatching(root["dynamic_batching"], err, c.max_batch_size, &db));
      c.dynamic_batching = db;
    }
    if (root["instance_count"]) {
      SOMM_RETURN_IF_ERROR(ReadScalar(root["instance_count"], "instance_count", err, &c.instance_count));
      if (c.instance_count < 1 || c.instance_count > 64) {
        return err.Field("instance_count", "must be between 1 and 64");
      }
      c.instance_count_configured = true;
    }
    if (root["intra_op_threads"]) {
      SOMM_RETURN_IF_ERROR(ReadScalar(root["intra_op_threads"], "intra_op_threads", err, &c.intra_op_threads));
      if (c.intra_op_threads < 1 || c.intra_op_threads > 256) {
        return err.Field("intra_op_threads", "must be between 1 and 256");
      }
    }
    if (root["version_policy"]) {
      SOMM_RETURN_IF_ERROR(ParseVersionPolicy(root["version_policy"], err, &c.version_policy));
    }
    if (root["preprocessing"]) {
      SOMM_RETURN_IF_ERROR(ParsePreprocessing(root["preprocessing"], err, &c.image_preprocessing));
    }
    if (root["accuracy"]) {
      const YAML::Node a = root["accuracy"];
      if (!a.IsMap()) return err.Field("accuracy", "expected a map with value and source");
      if (a["value"] && !a["value"].IsNull()) {
        double v = 0;
        SOMM_RETURN_IF_ERROR(ReadScalar(a["value"], "accuracy.value", err, &v));
        if (v < 0 || v > 1) return err.Field("accuracy.value", "must be between 0 and 1");
        c.accuracy.value = v;
      }
      if (a["source"]) SOMM_RETURN_IF_ERROR(ReadScalar(a["source"], "accuracy.source", err, &c.accuracy.source));
    }
    if (root["labels"]) SOMM_RETURN_IF_ERROR(ReadList(root["labels"], "labels", err, &c.labels));
    return c;
  } catch (const YAML::Exception& e) {
    return err.File("malformed config: " + std::string(e.what()));
  }
}

StatusOr<ModelConfig> LoadModelConfig(const std::string& model_dir) {
  namespace fs = std::filesystem;
  // Normalised so that "repo/model/" names the folder "model", not "".
  fs::path dir = fs::path(model_dir).lexically_normal();
  if (dir.filename().empty()) dir = dir.parent_path();
  const fs::path file = dir / "model.yaml";
  std::ifstream in(file);
  if (!in) return NotFound(file.string() + ": cannot open model config");
  std::stringstream text;
  text << in.rdbuf();
  SOMM_ASSIGN_OR_RETURN(ModelConfig config, ParseModelConfig(text.str(), file.string()));
  const std::string folder = dir.filename().string();
  if (config.name.empty()) {
    config.name = folder;
  } else if (config.name != folder) {
    return InvalidArgument(file.string() + ": field 'name': '" + config.name +
                           "' does not match its folder '" + folder + "'");
  }
  return config;
}

Shape FullShape(const ModelConfig& config, const TensorSpec& spec) {
  Shape s;
  if (config.max_batch_size > 0) s.push_back(-1);
  s.insert(s.end(), spec.shape.begin(), spec.shape.end());
  return s;
}

std::string PreprocessingToJson(const ImagePreprocessing& p) {
  nlohmann::json j = {{"channels", p.channels}, {"height", p.height}, {"width", p.width},
                      {"scale", p.scale},       {"mean", p.mean},     {"std", p.stddev},
                      {"invert", p.invert}};
  return nlohmann::json{{"image", j}}.dump();
}

StatusOr<ImagePreprocessing> PreprocessingFromJson(const std::string& text) {
  try {
    const auto j = nlohmann::json::parse(text).at("image");
    ImagePreprocessing p;
    p.channels = j.at("channels").get<int>();
    p.height = j.at("height").get<int>();
    p.width = j.at("width").get<int>();
    p.scale = j.at("scale").get<float>();
    p.mean = j.at("mean").get<std::vector<float>>();
    p.stddev = j.at("std").get<std::vector<float>>();
    p.invert = j.at("invert").get<bool>();
    return p;
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument(std::string("malformed preprocessing metadata: ") + e.what());
  }
}

}  // namespace somm
