#include "variants/validation_data.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace somm {
namespace {

namespace fs = std::filesystem;

StatusOr<std::string> ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot read " + path.string());
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

bool IsScoreType(DataType type) {
  switch (type) {
    case DataType::kFp32:
    case DataType::kFp64:
    case DataType::kFp16:
    case DataType::kBf16:
    case DataType::kInt32:
    case DataType::kInt64:
      return true;
    default:
      return false;
  }
}

// The value of element `i` of a tensor of `type` as a double, for argmax.
double ElementAsDouble(const std::string& bytes, DataType type, int64_t i) {
  const char* p = bytes.data() + static_cast<size_t>(i) * DataTypeSize(type);
  switch (type) {
    case DataType::kFp32: {
      float v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case DataType::kFp64: {
      double v;
      std::memcpy(&v, p, 8);
      return v;
    }
    case DataType::kFp16: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      return HalfToFloat(v);
    }
    case DataType::kBf16: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      return Bf16ToFloat(v);
    }
    case DataType::kInt32: {
      int32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case DataType::kInt64: {
      int64_t v;
      std::memcpy(&v, p, 8);
      return static_cast<double>(v);
    }
    default:
      return 0;
  }
}

}  // namespace

StatusOr<std::optional<ValidationData>> LoadValidationData(const std::string& dir) {
  const fs::path meta_path = fs::path(dir) / "meta.json";
  if (!fs::exists(meta_path)) return std::optional<ValidationData>();
  SOMM_ASSIGN_OR_RETURN(std::string meta_text, ReadFile(meta_path));
  ValidationData data;
  data.dir = dir;
  std::string inputs_file = "inputs.bin", labels_file = "labels.bin";
  try {
    const auto meta = nlohmann::json::parse(meta_text);
    data.count = meta.at("count").get<int64_t>();
    data.input = meta.at("input").get<std::string>();
    data.datatype = DataTypeFromString(meta.at("datatype").get<std::string>());
    data.sample_shape = meta.at("shape").get<Shape>();
    if (meta.contains("labels_datatype") && meta["labels_datatype"] != "INT64") {
      return InvalidArgument(meta_path.string() + ": labels_datatype must be INT64");
    }
    if (meta.contains("files")) {
      inputs_file = meta["files"].value("inputs", inputs_file);
      labels_file = meta["files"].value("labels", labels_file);
    }
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument(meta_path.string() + ": " + e.what());
  }
  const int64_t per_sample = ElementCount(data.sample_shape);
  if (data.datatype == DataType::kInvalid || data.datatype == DataType::kBytes || per_sample < 0 ||
      data.count <= 0) {
    return InvalidArgument(
        meta_path.string() +
        ": needs a fixed-size numeric datatype, a shape without -1 and count > 0");
  }
  SOMM_ASSIGN_OR_RETURN(data.inputs, ReadFile(fs::path(dir) / inputs_file));
  SOMM_ASSIGN_OR_RETURN(std::string labels, ReadFile(fs::path(dir) / labels_file));
  const size_t want = static_cast<size_t>(data.count * per_sample) * DataTypeSize(data.datatype);
  if (data.inputs.size() != want) {
    return InvalidArgument(dir + "/" + inputs_file + ": " + std::to_string(data.inputs.size()) +
                           " bytes, meta.json implies " + std::to_string(want));
  }
  if (labels.size() != static_cast<size_t>(data.count) * 8) {
    return InvalidArgument(dir + "/" + labels_file + ": " + std::to_string(labels.size()) +
                           " bytes, expected " + std::to_string(data.count) + " int64 labels");
  }
  data.labels.resize(static_cast<size_t>(data.count));
  std::memcpy(data.labels.data(), labels.data(), labels.size());
  return std::optional<ValidationData>(std::move(data));
}

StatusOr<double> MeasureTop1(ExecutableModel& model, const ValidationData& data, int64_t batch) {
  const bool batched = batch > 0;
  const int64_t step = batched ? batch : 1;
  const size_t sample_bytes =
      static_cast<size_t>(ElementCount(data.sample_shape)) * DataTypeSize(data.datatype);
  int64_t correct = 0;
  for (int64_t start = 0; start < data.count; start += step) {
    const int64_t n = std::min(step, data.count - start);
    Tensor in;
    in.name = data.input;
    in.datatype = data.datatype;
    if (batched) in.shape.push_back(n);
    in.shape.insert(in.shape.end(), data.sample_shape.begin(), data.sample_shape.end());
    in.data = data.inputs.substr(static_cast<size_t>(start) * sample_bytes,
                                 static_cast<size_t>(n) * sample_bytes);
    std::vector<Tensor> outputs;
    SOMM_RETURN_IF_ERROR(model.Execute({in}, &outputs));
    if (outputs.empty()) return Internal("the model returned no outputs");
    const Tensor& out = outputs[0];
    const int64_t elems = ElementCount(out.shape);
    if (elems <= 0 || elems % n != 0 || DataTypeSize(out.datatype) == 0) {
      return Internal("output '" + out.name + "' of shape " + ShapeToString(out.shape) +
                      " cannot be split into " + std::to_string(n) + " samples' scores");
    }
    if (!IsScoreType(out.datatype)) {
      return Internal(std::string("output '") + out.name + "' is " + DataTypeName(out.datatype) +
                      "; top-1 needs numeric scores");
    }
    const int64_t classes = elems / n;
    for (int64_t s = 0; s < n; ++s) {
      int64_t best = 0;
      double best_score = ElementAsDouble(out.data, out.datatype, s * classes);
      for (int64_t c = 1; c < classes; ++c) {
        const double v = ElementAsDouble(out.data, out.datatype, s * classes + c);
        if (v > best_score) {
          best_score = v;
          best = c;
        }
      }
      if (best == data.labels[static_cast<size_t>(start + s)]) ++correct;
    }
  }
  return static_cast<double>(correct) / static_cast<double>(data.count);
}

}  // namespace somm
