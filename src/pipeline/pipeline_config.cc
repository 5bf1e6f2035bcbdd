#include "pipeline/pipeline_config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace somm::pipeline {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kMaxLabelsBytes = int64_t{1} << 20;
constexpr int64_t kMaxEncodedLimit = int64_t{1} << 30;
constexpr int64_t kMaxPixelsLimit = int64_t{1} << 30;

class Errors {
 public:
  explicit Errors(std::string source) : source_(std::move(source)) {}
  Status Field(const std::string& field, const std::string& problem) const {
    return InvalidArgument(source_ + ": field '" + field + "': " + problem);
  }
  Status File(const std::string& problem) const { return InvalidArgument(source_ + ": " + problem); }

 private:
  std::string source_;
};

template <typename T>
Status Read(const YAML::Node& node, const std::string& field, const Errors& err, T* out) {
  try {
    *out = node.as<T>();
  } catch (const YAML::Exception&) {
    const char* what = std::is_same_v<T, std::string>   ? "a string"
                       : std::is_floating_point_v<T>    ? "a number"
                       : std::is_same_v<T, bool>        ? "true or false"
                                                        : "an integer";
    return err.Field(field, std::string("expected ") + what);
  }
  return Status::Ok();
}

Status CheckKeys(const YAML::Node& node, const std::set<std::string>& allowed,
                 const std::string& where, const Errors& err) {
  if (!node.IsMap()) return err.Field(where, "expected a map");
  for (const auto& kv : node) {
    std::string key;
    SOMM_RETURN_IF_ERROR(Read(kv.first, where, err, &key));
    if (!allowed.count(key)) return err.Field(where.empty() ? key : where + "." + key, "unknown field");
  }
  return Status::Ok();
}

bool IsPlainName(const std::string& s) {
  return !s.empty() && s.size() <= 128 && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
  });
}

Status ReadFloats(const YAML::Node& node, const std::string& field, const Errors& err,
                  std::vector<float>* out) {
  if (!node.IsSequence()) return err.Field(field, "expected a list of numbers");
  for (size_t i = 0; i < node.size() && i < 16; ++i) {
    float v = 0;
    SOMM_RETURN_IF_ERROR(Read(node[i], field + "[" + std::to_string(i) + "]", err, &v));
    out->push_back(v);
  }
  if (node.size() > 16) return err.Field(field, "at most 16 values");
  return Status::Ok();
}

Status ReadSpec(const YAML::Node& t, const std::string& where, const Errors& err, bool with_from,
                TensorSpec* spec, std::string* from) {
  std::set<std::string> keys = {"name", "datatype", "shape"};
  if (with_from) keys.insert("from");
  SOMM_RETURN_IF_ERROR(CheckKeys(t, keys, where, err));
  if (!t["name"]) return err.Field(where + ".name", "is required");
  SOMM_RETURN_IF_ERROR(Read(t["name"], where + ".name", err, &spec->name));
  if (!IsPlainName(spec->name)) {
    return err.Field(where + ".name", "must be letters, digits, '_' or '-'");
  }
  if (!t["datatype"]) return err.Field(where + ".datatype", "is required");
  std::string dtype;
  SOMM_RETURN_IF_ERROR(Read(t["datatype"], where + ".datatype", err, &dtype));
  spec->datatype = DataTypeFromString(dtype);
  if (spec->datatype == DataType::kInvalid) {
    return err.Field(where + ".datatype", "unknown datatype '" + dtype + "'");
  }
  if (!t["shape"] || !t["shape"].IsSequence() || t["shape"].size() == 0 || t["shape"].size() > 8) {
    return err.Field(where + ".shape", "expected a list of 1 to 8 dims (per sample)");
  }
  for (size_t i = 0; i < t["shape"].size(); ++i) {
    int64_t d = 0;
    SOMM_RETURN_IF_ERROR(Read(t["shape"][i], where + ".shape", err, &d));
    if (d < -1 || d == 0 || d > (int64_t{1} << 30)) {
      return err.Field(where + ".shape", "dimension " + std::to_string(d) + " is invalid");
    }
    spec->shape.push_back(d);
  }
  if (with_from) {
    if (!t["from"]) return err.Field(where + ".from", "is required (a step output, step.output)");
    SOMM_RETURN_IF_ERROR(Read(t["from"], where + ".from", err, from));
  }
  return Status::Ok();
}

Status ReadPreprocess(const YAML::Node& n, const std::string& where, const Errors& err,
                      PreprocessOptions* out) {
  SOMM_RETURN_IF_ERROR(CheckKeys(n,
                                 {"channels", "height", "width", "resize", "interpolation",
                                  "invert", "scale", "mean", "std", "max_encoded_bytes",
                                  "max_pixels", "max_side"},
                                 where, err));
  image::ImageTransform& t = out->transform;
  if (n["channels"]) SOMM_RETURN_IF_ERROR(Read(n["channels"], where + ".channels", err, &t.channels));
  if (!n["height"] || !n["width"]) return err.Field(where, "height and width are required");
  SOMM_RETURN_IF_ERROR(Read(n["height"], where + ".height", err, &t.height));
  SOMM_RETURN_IF_ERROR(Read(n["width"], where + ".width", err, &t.width));
  if (n["resize"]) SOMM_RETURN_IF_ERROR(Read(n["resize"], where + ".resize", err, &t.resize_shorter));
  if (n["interpolation"]) {
    std::string s;
    SOMM_RETURN_IF_ERROR(Read(n["interpolation"], where + ".interpolation", err, &s));
    if (s == "area") {
      t.interpolation = image::Interpolation::kArea;
    } else if (s == "bilinear") {
      t.interpolation = image::Interpolation::kBilinear;
    } else {
      return err.Field(where + ".interpolation", "expected area or bilinear");
    }
  }
  if (n["invert"]) SOMM_RETURN_IF_ERROR(Read(n["invert"], where + ".invert", err, &t.invert));
  if (n["scale"]) SOMM_RETURN_IF_ERROR(Read(n["scale"], where + ".scale", err, &t.scale));
  if (n["mean"]) SOMM_RETURN_IF_ERROR(ReadFloats(n["mean"], where + ".mean", err, &t.mean));
  if (n["std"]) SOMM_RETURN_IF_ERROR(ReadFloats(n["std"], where + ".std", err, &t.stddev));
  if (Status s = image::CheckTransform(t); !s.ok()) return err.Field(where, s.message());
  image::ImageLimits& l = out->limits;
  struct Limit {
    const char* key;
    int64_t* value;
    int64_t max;
  };
  for (const Limit& limit : {Limit{"max_encoded_bytes", &l.max_encoded_bytes, kMaxEncodedLimit},
                             Limit{"max_pixels", &l.max_pixels, kMaxPixelsLimit},
                             Limit{"max_side", &l.max_side, int64_t{1} << 16}}) {
    if (!n[limit.key]) continue;
    const std::string field = where + "." + limit.key;
    SOMM_RETURN_IF_ERROR(Read(n[limit.key], field, err, limit.value));
    if (*limit.value < 1 || *limit.value > limit.max) {
      return err.Field(field, "must be 1.." + std::to_string(limit.max));
    }
  }
  return Status::Ok();
}

Status ReadPostprocess(const YAML::Node& n, const std::string& where, const Errors& err,
                       PostprocessOptions* out) {
  SOMM_RETURN_IF_ERROR(CheckKeys(n, {"softmax", "argmax", "top_k", "labels"}, where, err));
  if (n["softmax"]) SOMM_RETURN_IF_ERROR(Read(n["softmax"], where + ".softmax", err, &out->softmax));
  if (n["argmax"]) SOMM_RETURN_IF_ERROR(Read(n["argmax"], where + ".argmax", err, &out->argmax));
  if (n["top_k"]) {
    SOMM_RETURN_IF_ERROR(Read(n["top_k"], where + ".top_k", err, &out->top_k));
    if (out->top_k < 1 || out->top_k > 1000) return err.Field(where + ".top_k", "must be 1..1000");
  }
  if (out->argmax && out->top_k > 0) {
    return err.Field(where, "argmax and top_k exclude each other (argmax is top_k 1)");
  }
  if (n["labels"]) {
    SOMM_RETURN_IF_ERROR(Read(n["labels"], where + ".labels", err, &out->labels_file));
    const std::string& f = out->labels_file;
    if (f.empty() || f[0] == '.' || f.find('/') != std::string::npos ||
        f.find('\\') != std::string::npos) {
      return err.Field(where + ".labels", "must be a file name in the pipeline's folder");
    }
    if (!out->argmax && out->top_k == 0) {
      return err.Field(where + ".labels", "labels need argmax or top_k");
    }
  }
  return Status::Ok();
}

Status ReadCascade(const YAML::Node& n, const std::string& where, const Errors& err,
                   CascadeOptions* out) {
  SOMM_RETURN_IF_ERROR(CheckKeys(n, {"models", "confidence", "min_accuracy", "threshold"}, where, err));
  const std::string models = where + ".models";
  if (!n["models"] || !n["models"].IsSequence() || n["models"].size() < 2 ||
      n["models"].size() > static_cast<size_t>(kMaxCascadeStages)) {
    return err.Field(models, "expected a list of 2 to " + std::to_string(kMaxCascadeStages) +
                                 " model names, cheapest first");
  }
  for (size_t i = 0; i < n["models"].size(); ++i) {
    std::string m;
    const std::string field = models + "[" + std::to_string(i) + "]";
    SOMM_RETURN_IF_ERROR(Read(n["models"][i], field, err, &m));
    if (m.empty()) return err.Field(field, "must not be empty");
    if (std::find(out->models.begin(), out->models.end(), m) != out->models.end()) {
      return err.Field(field, "model '" + m + "' is already a stage");
    }
    out->models.push_back(m);
  }
  // Not `on:`: YAML 1.1 readers (PyYAML) take that key for the boolean true.
  if (n["confidence"]) {
    std::string on;
    SOMM_RETURN_IF_ERROR(Read(n["confidence"], where + ".confidence", err, &on));
    if (on == "top_probability") {
      out->on = Confidence::kTopProbability;
    } else if (on == "margin") {
      out->on = Confidence::kMargin;
    } else {
      return err.Field(where + ".confidence", "expected top_probability or margin");
    }
  }
  if (!n["min_accuracy"] == !n["threshold"]) {
    return err.Field(where, "needs exactly one of min_accuracy (the threshold is chosen on the "
                            "validation data) and threshold");
  }
  for (const char* key : {"min_accuracy", "threshold"}) {
    if (!n[key]) continue;
    double v = 0;
    SOMM_RETURN_IF_ERROR(Read(n[key], where + "." + key, err, &v));
    if (!(v >= 0 && v <= 1)) return err.Field(where + "." + key, "must be 0..1");
    (std::string(key) == "threshold" ? out->threshold : out->min_accuracy) = v;
  }
  return Status::Ok();
}

Status ReadModelName(const YAML::Node& n, const std::string& field, const Errors& err,
                     std::string* out) {
  SOMM_RETURN_IF_ERROR(Read(n, field, err, out));
  if (out->empty()) return err.Field(field, "must not be empty");
  return Status::Ok();
}

Status ReadSwitch(const YAML::Node& n, const std::string& where, const Errors& err,
                  SwitchOptions* out) {
  SOMM_RETURN_IF_ERROR(CheckKeys(n, {"parameter", "input", "cases", "default"}, where, err));
  if (!n["parameter"] == !n["input"]) {
    return err.Field(where, "needs exactly one of parameter (per query) and input (per sample)");
  }
  if (n["parameter"]) SOMM_RETURN_IF_ERROR(ReadModelName(n["parameter"], where + ".parameter", err, &out->parameter));
  if (n["input"]) SOMM_RETURN_IF_ERROR(ReadModelName(n["input"], where + ".input", err, &out->input));
  if (!n["cases"] || !n["cases"].IsMap() || n["cases"].size() == 0 ||
      n["cases"].size() > static_cast<size_t>(kMaxBranches)) {
    return err.Field(where + ".cases", "expected a map of 1 to " + std::to_string(kMaxBranches) +
                                           " values to model names");
  }
  for (const auto& kv : n["cases"]) {
    std::string value, model;
    SOMM_RETURN_IF_ERROR(Read(kv.first, where + ".cases", err, &value));
    SOMM_RETURN_IF_ERROR(ReadModelName(kv.second, where + ".cases." + value, err, &model));
    for (const auto& c : out->cases) {
      if (c.first == value) return err.Field(where + ".cases." + value, "duplicate case");
    }
    out->cases.emplace_back(value, model);
  }
  if (n["default"]) SOMM_RETURN_IF_ERROR(ReadModelName(n["default"], where + ".default", err, &out->default_model));
  return Status::Ok();
}

Status ReadFanout(const YAML::Node& n, const std::string& where, const Errors& err,
                  FanoutOptions* out) {
  SOMM_RETURN_IF_ERROR(CheckKeys(n, {"models", "join"}, where, err));
  const std::string models = where + ".models";
  if (!n["models"] || !n["models"].IsSequence() || n["models"].size() < 2 ||
      n["models"].size() > static_cast<size_t>(kMaxBranches)) {
    return err.Field(models, "expected a list of 2 to " + std::to_string(kMaxBranches) + " model names");
  }
  for (size_t i = 0; i < n["models"].size(); ++i) {
    std::string m;
    const std::string field = models + "[" + std::to_string(i) + "]";
    SOMM_RETURN_IF_ERROR(ReadModelName(n["models"][i], field, err, &m));
    if (std::find(out->models.begin(), out->models.end(), m) != out->models.end()) {
      return err.Field(field, "model '" + m + "' is already a branch");
    }
    out->models.push_back(m);
  }
  if (n["join"]) {
    std::string join;
    SOMM_RETURN_IF_ERROR(Read(n["join"], where + ".join", err, &join));
    if (join == "each") {
      out->join = Join::kEach;
    } else if (join == "mean") {
      out->join = Join::kMean;
    } else if (join == "concat") {
      out->join = Join::kConcat;
    } else {
      return err.Field(where + ".join", "expected each, mean or concat");
    }
  }
  return Status::Ok();
}

Status ReadStep(const YAML::Node& n, int i, const Errors& err, StepConfig* step) {
  const std::string where = "steps[" + std::to_string(i) + "]";
  step->index_in_file = i;
  SOMM_RETURN_IF_ERROR(CheckKeys(n,
                                 {"name", "model", "version", "task", "min_accuracy",
                                  "preprocess", "postprocess", "cascade", "switch", "fanout", "inputs",
                                  "outputs"},
                                 where, err));
  if (!n["name"]) return err.Field(where + ".name", "is required");
  SOMM_RETURN_IF_ERROR(Read(n["name"], where + ".name", err, &step->name));
  if (!IsPlainName(step->name)) {
    return err.Field(where + ".name", "must be letters, digits, '_' or '-'");
  }
  const std::string at = where + " (step '" + step->name + "')";
  const int kinds = (n["model"] ? 1 : 0) + (n["task"] ? 1 : 0) + (n["preprocess"] ? 1 : 0) +
                    (n["postprocess"] ? 1 : 0) + (n["cascade"] ? 1 : 0) + (n["switch"] ? 1 : 0) +
                    (n["fanout"] ? 1 : 0);
  if (kinds != 1) {
    return err.Field(at, "needs exactly one of model, task, preprocess, postprocess, cascade, switch, fanout");
  }
  if (n["model"]) {
    step->kind = StepKind::kModel;
    SOMM_RETURN_IF_ERROR(Read(n["model"], at + ".model", err, &step->model));
    if (step->model.empty()) return err.Field(at + ".model", "must not be empty");
    if (n["version"]) SOMM_RETURN_IF_ERROR(Read(n["version"], at + ".version", err, &step->version));
  } else if (n["task"]) {
    step->kind = StepKind::kTask;
    SOMM_RETURN_IF_ERROR(Read(n["task"], at + ".task", err, &step->task));
    if (step->task.empty()) return err.Field(at + ".task", "must not be empty");
  } else if (n["preprocess"]) {
    step->kind = StepKind::kPreprocess;
    SOMM_RETURN_IF_ERROR(ReadPreprocess(n["preprocess"], at + ".preprocess", err, &step->preprocess));
  } else if (n["switch"]) {
    step->kind = StepKind::kSwitch;
    SOMM_RETURN_IF_ERROR(ReadSwitch(n["switch"], at + ".switch", err, &step->switch_));
  } else if (n["fanout"]) {
    step->kind = StepKind::kFanout;
    SOMM_RETURN_IF_ERROR(ReadFanout(n["fanout"], at + ".fanout", err, &step->fanout));
  } else if (n["cascade"]) {
    step->kind = StepKind::kCascade;
    SOMM_RETURN_IF_ERROR(ReadCascade(n["cascade"], at + ".cascade", err, &step->cascade));
  } else {
    step->kind = StepKind::kPostprocess;
    SOMM_RETURN_IF_ERROR(
        ReadPostprocess(n["postprocess"], at + ".postprocess", err, &step->postprocess));
  }
  if (n["version"] && step->kind != StepKind::kModel) return err.Field(at + ".version", "only for a model step");
  if (n["min_accuracy"]) {
    if (step->kind != StepKind::kTask) return err.Field(at + ".min_accuracy", "only for a task step");
    double a = 0;
    SOMM_RETURN_IF_ERROR(Read(n["min_accuracy"], at + ".min_accuracy", err, &a));
    if (!(a >= 0 && a <= 1)) return err.Field(at + ".min_accuracy", "must be 0..1");
    step->min_accuracy = a;
  }
  if (!n["inputs"] || !n["inputs"].IsMap() || n["inputs"].size() == 0) {
    return err.Field(at + ".inputs", "is required: a map of the step's input names to sources");
  }
  for (const auto& kv : n["inputs"]) {
    std::string name, source;
    SOMM_RETURN_IF_ERROR(Read(kv.first, at + ".inputs", err, &name));
    SOMM_RETURN_IF_ERROR(Read(kv.second, at + ".inputs." + name, err, &source));
    if (name.empty() || source.empty()) return err.Field(at + ".inputs", "names and sources must not be empty");
    step->inputs.emplace_back(name, source);
  }
  if (n["outputs"]) {
    if (!n["outputs"].IsSequence()) return err.Field(at + ".outputs", "expected a list of names");
    for (size_t k = 0; k < n["outputs"].size(); ++k) {
      std::string o;
      SOMM_RETURN_IF_ERROR(Read(n["outputs"][k], at + ".outputs", err, &o));
      step->outputs.push_back(o);
    }
  }
  return Status::Ok();
}

// Orders the steps so that each runs after the steps it reads; a cycle is
// an error naming the steps on it.
Status OrderSteps(const Errors& err, std::vector<StepConfig>* steps) {
  std::map<std::string, size_t> by_name;
  for (size_t i = 0; i < steps->size(); ++i) by_name[(*steps)[i].name] = i;
  std::vector<std::set<size_t>> deps(steps->size());
  for (size_t i = 0; i < steps->size(); ++i) {
    for (const auto& [_, source] : (*steps)[i].inputs) {
      const auto [step, output] = SplitSource(source);
      if (!step.empty()) deps[i].insert(by_name.at(step));
    }
  }
  std::vector<StepConfig> ordered;
  std::vector<bool> done(steps->size(), false);
  while (ordered.size() < steps->size()) {
    bool progressed = false;
    for (size_t i = 0; i < steps->size(); ++i) {
      if (done[i]) continue;
      if (std::all_of(deps[i].begin(), deps[i].end(), [&](size_t d) { return done[d]; })) {
        done[i] = true;
        ordered.push_back((*steps)[i]);
        progressed = true;
        break;  // the file's order wherever the graph allows
      }
    }
    if (!progressed) {
      // Every step left waits on another left: walk back until one repeats.
      size_t at = 0;
      while (done[at]) ++at;
      std::vector<size_t> path;
      std::vector<int> seen(steps->size(), -1);
      while (seen[at] < 0) {
        seen[at] = static_cast<int>(path.size());
        path.push_back(at);
        for (size_t d : deps[at]) {
          if (!done[d]) {
            at = d;
            break;
          }
        }
      }
      std::string cycle;
      for (size_t k = static_cast<size_t>(seen[at]); k < path.size(); ++k) {
        cycle += (*steps)[path[k]].name + " <- ";
      }
      cycle += (*steps)[at].name;
      const StepConfig& s = (*steps)[at];
      return err.Field("steps[" + std::to_string(s.index_in_file) + "] (step '" + s.name + "').inputs",
                       "the steps form a cycle: " + cycle);
    }
  }
  *steps = std::move(ordered);
  return Status::Ok();
}

StatusOr<PipelineConfig> Parse(const YAML::Node& root, const Errors& err) {
  PipelineConfig c;
  if (!root.IsMap()) return err.File("expected a map at the top level");
  SOMM_RETURN_IF_ERROR(CheckKeys(
      root, {"name", "description", "max_batch_size", "inputs", "outputs", "steps"}, "", err));
  if (root["name"]) SOMM_RETURN_IF_ERROR(Read(root["name"], "name", err, &c.name));
  if (root["description"]) SOMM_RETURN_IF_ERROR(Read(root["description"], "description", err, &c.description));
  if (root["max_batch_size"]) {
    SOMM_RETURN_IF_ERROR(Read(root["max_batch_size"], "max_batch_size", err, &c.max_batch_size));
    if (c.max_batch_size < 1 || c.max_batch_size > 1024) {
      return err.Field("max_batch_size", "must be 1..1024");
    }
  }
  std::set<std::string> input_names;
  if (!root["inputs"] || !root["inputs"].IsSequence() || root["inputs"].size() == 0) {
    return err.Field("inputs", "is required: a non-empty list");
  }
  for (size_t i = 0; i < root["inputs"].size(); ++i) {
    TensorSpec spec;
    const std::string where = "inputs[" + std::to_string(i) + "]";
    SOMM_RETURN_IF_ERROR(ReadSpec(root["inputs"][i], where, err, false, &spec, nullptr));
    if (!input_names.insert(spec.name).second) return err.Field(where + ".name", "duplicate input '" + spec.name + "'");
    c.inputs.push_back(std::move(spec));
  }
  if (!root["steps"] || !root["steps"].IsSequence() || root["steps"].size() == 0) {
    return err.Field("steps", "is required: a non-empty list");
  }
  if (root["steps"].size() > static_cast<size_t>(kMaxSteps)) {
    return err.Field("steps", "at most " + std::to_string(kMaxSteps) + " steps");
  }
  std::set<std::string> step_names;
  for (size_t i = 0; i < root["steps"].size(); ++i) {
    StepConfig step;
    SOMM_RETURN_IF_ERROR(ReadStep(root["steps"][i], static_cast<int>(i), err, &step));
    if (!step_names.insert(step.name).second) {
      return err.Field("steps[" + std::to_string(i) + "].name", "duplicate step '" + step.name + "'");
    }
    c.steps.push_back(std::move(step));
  }
  for (const StepConfig& step : c.steps) {
    const std::string at = "steps[" + std::to_string(step.index_in_file) + "] (step '" + step.name + "')";
    if (step.kind == StepKind::kSwitch && !step.switch_.input.empty() &&
        !input_names.count(step.switch_.input)) {
      return err.Field(at + ".switch.input", "unknown pipeline input '" + step.switch_.input + "'");
    }
    for (const auto& [name, source] : step.inputs) {
      const auto [from_step, output] = SplitSource(source);
      const std::string field = at + ".inputs." + name;
      if (from_step.empty()) {
        if (!input_names.count(source)) return err.Field(field, "unknown pipeline input '" + source + "'");
      } else if (!step_names.count(from_step)) {
        return err.Field(field, "unknown step '" + from_step + "'");
      } else if (from_step == step.name) {
        return err.Field(field, "a step cannot read its own output");
      } else if (output.empty()) {
        return err.Field(field, "expected step.output");
      }
    }
  }
  if (!root["outputs"] || !root["outputs"].IsSequence() || root["outputs"].size() == 0) {
    return err.Field("outputs", "is required: a non-empty list");
  }
  std::set<std::string> output_names;
  for (size_t i = 0; i < root["outputs"].size(); ++i) {
    PipelineOutput out;
    const std::string where = "outputs[" + std::to_string(i) + "]";
    SOMM_RETURN_IF_ERROR(ReadSpec(root["outputs"][i], where, err, true, &out.spec, &out.from));
    if (!output_names.insert(out.spec.name).second) return err.Field(where + ".name", "duplicate output");
    const auto [from_step, output] = SplitSource(out.from);
    if (from_step.empty() || output.empty()) return err.Field(where + ".from", "expected step.output");
    if (!step_names.count(from_step)) return err.Field(where + ".from", "unknown step '" + from_step + "'");
    c.outputs.push_back(std::move(out));
  }
  SOMM_RETURN_IF_ERROR(OrderSteps(err, &c.steps));
  return c;
}

StatusOr<std::vector<std::string>> ReadLabels(const fs::path& file) {
  std::error_code ec;
  const auto size = fs::file_size(file, ec);
  if (ec || !fs::is_regular_file(file, ec)) return InvalidArgument("cannot read " + file.string());
  if (static_cast<int64_t>(size) > kMaxLabelsBytes) {
    return InvalidArgument(file.string() + " is over " + std::to_string(kMaxLabelsBytes) + " bytes");
  }
  std::ifstream in(file);
  std::vector<std::string> labels;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    labels.push_back(line);
  }
  while (!labels.empty() && labels.back().empty()) labels.pop_back();
  if (labels.empty()) return InvalidArgument(file.string() + " holds no labels");
  return labels;
}

}  // namespace

const char* StepKindName(StepKind kind) {
  switch (kind) {
    case StepKind::kModel: return "model";
    case StepKind::kTask: return "task";
    case StepKind::kPreprocess: return "preprocess";
    case StepKind::kPostprocess: return "postprocess";
    case StepKind::kCascade: return "cascade";
    case StepKind::kSwitch: return "switch";
    case StepKind::kFanout: return "fanout";
  }
  return "?";
}

const char* JoinName(Join join) {
  switch (join) {
    case Join::kEach: return "each";
    case Join::kMean: return "mean";
    case Join::kConcat: return "concat";
  }
  return "?";
}

std::pair<std::string, std::string> SplitSource(const std::string& source) {
  const auto dot = source.find('.');
  if (dot == std::string::npos) return {"", source};
  return {source.substr(0, dot), source.substr(dot + 1)};
}

StatusOr<PipelineConfig> ParsePipelineConfig(const std::string& yaml_text,
                                             const std::string& source) {
  const Errors err(source);
  try {
    return Parse(YAML::Load(yaml_text), err);
  } catch (const YAML::Exception& e) {
    return err.File(std::string("not valid YAML: ") + e.what());
  }
}

StatusOr<PipelineConfig> LoadPipelineConfig(const std::string& dir_text) {
  const fs::path dir(dir_text);
  const fs::path file = dir / kPipelineFile;
  std::ifstream in(file);
  if (!in) return NotFound("cannot read " + file.string());
  std::stringstream text;
  text << in.rdbuf();
  const std::string folder = dir.filename().string();
  SOMM_ASSIGN_OR_RETURN(PipelineConfig c, ParsePipelineConfig(text.str(), file.string()));
  if (c.name.empty()) c.name = folder;
  if (c.name != folder) {
    return InvalidArgument(file.string() + ": field 'name': '" + c.name +
                           "' differs from the folder name '" + folder + "'");
  }
  for (StepConfig& step : c.steps) {
    if (step.kind != StepKind::kPostprocess || step.postprocess.labels_file.empty()) continue;
    auto labels = ReadLabels(dir / step.postprocess.labels_file);
    if (!labels.ok()) {
      return InvalidArgument(file.string() + ": field 'steps[" +
                             std::to_string(step.index_in_file) + "] (step '" + step.name +
                             "').postprocess.labels': " + labels.status().message());
    }
    step.postprocess.labels = std::move(labels).value();
  }
  return c;
}

bool IsPipelineFolder(const std::string& dir) {
  std::error_code ec;
  return fs::is_regular_file(fs::path(dir) / kPipelineFile, ec) &&
         !fs::exists(fs::path(dir) / "model.yaml", ec);
}

}  // namespace somm::pipeline
