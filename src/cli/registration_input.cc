#include "cli/registration_input.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/model_less_format.h"

namespace somm {
namespace {

namespace fs = std::filesystem;

StatusOr<std::string> ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound(path.string() + ": cannot open");
  std::ostringstream bytes;
  bytes << in.rdbuf();
  if (in.bad()) return Internal(path.string() + ": read error");
  return bytes.str();
}

// A string field of meta.json that, when present, must equal `expected`.
Status CheckDeclared(const nlohmann::json& meta, const char* key, const std::string& expected,
                     const std::string& source, const std::string& what) {
  const auto it = meta.find(key);
  if (it == meta.end()) return Status::Ok();
  if (!it->is_string()) return InvalidArgument(source + ": '" + key + "' must be a string");
  if (it->get<std::string>() != expected) {
    return InvalidArgument(source + ": '" + key + "' is '" + it->get<std::string>() + "' but " +
                           what + " is '" + expected + "'");
  }
  return Status::Ok();
}

}  // namespace

Status ReadValidationDir(const std::string& dir, RegistrationRequest* request) {
  const fs::path meta_path = fs::path(dir) / "meta.json";
  SOMM_ASSIGN_OR_RETURN(const std::string meta_text, ReadFile(meta_path));
  const std::string source = meta_path.string();
  nlohmann::json meta;
  try {
    meta = nlohmann::json::parse(meta_text);
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument(source + ": not valid JSON: " + e.what());
  }
  if (!meta.is_object()) return InvalidArgument(source + ": expected a JSON object");
  const auto count = meta.find("count");
  if (count == meta.end() || !count->is_number_integer() || count->get<int64_t>() < 0) {
    return InvalidArgument(source + ": 'count' must be a non-negative integer");
  }
  std::string inputs_file = "inputs.bin";
  std::string labels_file = "labels.bin";
  if (const auto files = meta.find("files"); files != meta.end()) {
    if (!files->is_object()) return InvalidArgument(source + ": 'files' must be an object");
    for (auto [key, name] :
         {std::pair{"inputs", &inputs_file}, std::pair{"labels", &labels_file}}) {
      const auto it = files->find(key);
      if (it == files->end()) continue;
      if (!it->is_string() || it->get<std::string>().empty()) {
        return InvalidArgument(source + ": 'files." + key + "' must be a file name");
      }
      *name = it->get<std::string>();
    }
  }
  SOMM_RETURN_IF_ERROR(
      CheckDeclared(meta, "labels_datatype", "INT64", source, "somm reads labels as"));
  if (request->inputs.size() == 1) {
    const TensorSpec& input = request->inputs[0];
    SOMM_RETURN_IF_ERROR(
        CheckDeclared(meta, "input", input.name, source, "the model's --input name"));
    SOMM_RETURN_IF_ERROR(CheckDeclared(meta, "datatype", DataTypeName(input.datatype), source,
                                       "the model's --input datatype"));
    if (const auto shape = meta.find("shape"); shape != meta.end()) {
      if (!shape->is_array() || !std::all_of(shape->begin(), shape->end(),
                                             [](const auto& d) { return d.is_number_integer(); })) {
        return InvalidArgument(source + ": 'shape' must be a list of integers");
      }
      if (shape->get<Shape>() != input.shape) {
        return InvalidArgument(source + ": 'shape' is " + ShapeToString(shape->get<Shape>()) +
                               " but the model's --input shape is " + ShapeToString(input.shape));
      }
    }
  }
  request->validation_count = count->get<int64_t>();
  SOMM_ASSIGN_OR_RETURN(request->validation_inputs, ReadFile(fs::path(dir) / inputs_file));
  SOMM_ASSIGN_OR_RETURN(request->validation_labels, ReadFile(fs::path(dir) / labels_file));
  const auto need = static_cast<uint64_t>(request->validation_count) * 8;
  if (request->validation_labels.size() != need) {
    return InvalidArgument((fs::path(dir) / labels_file).string() + " holds " +
                           std::to_string(request->validation_labels.size()) + " bytes but " +
                           source + "'s count " + std::to_string(request->validation_count) +
                           " needs " + std::to_string(need) + " (INT64 labels)");
  }
  return Status::Ok();
}

StatusOr<RegistrationRequest> BuildRegistration(const RegisterOptions& o) {
  RegistrationRequest r;
  r.name = o.name;
  r.task = o.task;
  r.max_batch_size = o.max_batch_size;
  r.platform = o.platform;
  r.description = o.description;
  r.private_model = o.private_model;
  for (const std::string& flag : o.inputs) {
    SOMM_ASSIGN_OR_RETURN(TensorSpec spec, ParseTensorFlag(flag, "--input"));
    r.inputs.push_back(std::move(spec));
  }
  for (const std::string& flag : o.outputs) {
    SOMM_ASSIGN_OR_RETURN(TensorSpec spec, ParseTensorFlag(flag, "--output"));
    r.outputs.push_back(std::move(spec));
  }
  SOMM_ASSIGN_OR_RETURN(r.model_bytes, ReadFile(o.model_file));
  if (r.model_bytes.empty()) return InvalidArgument(o.model_file + ": the model file is empty");
  if (!o.validation_dir.empty()) SOMM_RETURN_IF_ERROR(ReadValidationDir(o.validation_dir, &r));
  if (!o.preprocessing_from.empty()) {
    SOMM_ASSIGN_OR_RETURN(const std::string yaml, ReadFile(o.preprocessing_from));
    SOMM_ASSIGN_OR_RETURN(const ModelConfig config, ParseModelConfig(yaml, o.preprocessing_from));
    if (!config.image_preprocessing) {
      return InvalidArgument(o.preprocessing_from + ": has no 'preprocessing' block to copy");
    }
    r.preprocessing = config.image_preprocessing;
  }
  return r;
}

}  // namespace somm
