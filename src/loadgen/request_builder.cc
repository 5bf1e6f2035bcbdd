#include "loadgen/request_builder.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>

#include "frontend/http/oip_json.h"

namespace somm::loadgen {
namespace {

// Writes `count` random elements of `type` into `out`.
void FillRandom(DataType type, int64_t count, std::mt19937_64& rng, std::string* out) {
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  std::uniform_int_distribution<int> small(0, 15);
  const size_t size = DataTypeSize(type);
  out->resize(static_cast<size_t>(count) * size);
  char* p = out->data();
  for (int64_t i = 0; i < count; ++i, p += size) {
    switch (type) {
      case DataType::kFp32: {
        const float v = unit(rng);
        std::memcpy(p, &v, sizeof(v));
        break;
      }
      case DataType::kFp64: {
        const double v = unit(rng);
        std::memcpy(p, &v, sizeof(v));
        break;
      }
      case DataType::kFp16:
      case DataType::kBf16: {
        const float f = unit(rng);
        const uint16_t v = type == DataType::kFp16 ? FloatToHalf(f) : FloatToBf16(f);
        std::memcpy(p, &v, sizeof(v));
        break;
      }
      case DataType::kBool:
        *p = static_cast<char>(small(rng) & 1);
        break;
      default:
        // Integers of any width: a small value in the low byte (little-endian).
        std::memset(p, 0, size);
        *p = static_cast<char>(small(rng));
    }
  }
}

}  // namespace

StatusOr<InferenceRequest> RequestFromJson(std::string_view body, std::string_view source) {
  StatusOr<InferenceRequest> request = oip::DecodeInferRequest(body, std::nullopt);
  if (!request.ok()) {
    return InvalidArgument(std::string(source) + ": " + request.status().message());
  }
  if (request->inputs.empty())
    return InvalidArgument(std::string(source) + ": request has no inputs");
  return request;
}

StatusOr<InferenceRequest> LoadRequestFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot open input file '" + path + "'");
  std::stringstream text;
  text << in.rdbuf();
  return RequestFromJson(text.str(), path);
}

Status ReplicateBatch(int64_t batch_size, InferenceRequest* request) {
  if (batch_size < 1) return InvalidArgument("batch size must be at least 1");
  if (batch_size == 1) return Status::Ok();
  // Check every input before changing any: dim 0 of the first is the
  // reference the others are compared with.
  for (const Tensor& t : request->inputs) {
    if (t.shape.empty()) {
      return InvalidArgument("input '" + t.name + "' has no dims to batch along (--batch-size " +
                             std::to_string(batch_size) + ")");
    }
    if (t.shape[0] != request->inputs[0].shape[0]) {
      return InvalidArgument("inputs disagree on dim 0 ('" + request->inputs[0].name + "' " +
                             ShapeToString(request->inputs[0].shape) + ", '" + t.name + "' " +
                             ShapeToString(t.shape) + "), so they cannot be batched");
    }
  }
  for (Tensor& t : request->inputs) {
    const std::string one = t.data;
    t.data.clear();
    t.data.reserve(one.size() * static_cast<size_t>(batch_size));
    for (int64_t i = 0; i < batch_size; ++i) t.data += one;
    t.shape[0] *= batch_size;
  }
  return Status::Ok();
}

StatusOr<InferenceRequest> SyntheticRequest(const ModelMetadata& metadata, int64_t batch_size,
                                            uint64_t seed) {
  if (metadata.inputs.empty()) {
    return InvalidArgument("model '" + metadata.name + "' declares no inputs");
  }
  std::mt19937_64 rng(seed);
  InferenceRequest request;
  for (const TensorMetadata& in : metadata.inputs) {
    const std::string what = "model '" + metadata.name + "' input '" + in.name + "' " +
                             in.datatype + " " + ShapeToString(in.shape);
    Tensor t;
    t.name = in.name;
    t.datatype = DataTypeFromString(in.datatype);
    if (t.datatype == DataType::kInvalid || t.datatype == DataType::kBytes) {
      return InvalidArgument(what + ": cannot make random values of this datatype; use --input");
    }
    t.shape = in.shape;
    const bool batched = !t.shape.empty() && t.shape[0] == -1;
    if (batched) t.shape[0] = batch_size;
    if (!batched && batch_size != 1) {
      return InvalidArgument(what + ": the model takes no batch dim, so --batch-size must be 1");
    }
    for (size_t d = batched ? 1 : 0; d < t.shape.size(); ++d) {
      if (t.shape[d] < 0)
        return InvalidArgument(what + ": variable dim " + std::to_string(d) +
                               " has no natural size; use --input");
    }
    FillRandom(t.datatype, ElementCount(t.shape), rng, &t.data);
    request.inputs.push_back(std::move(t));
  }
  return request;
}

StatusOr<InferenceRequest> BytesRequest(const ModelMetadata& metadata, const std::string& bytes,
                                        int64_t batch_size) {
  std::string inputs;
  for (const TensorMetadata& in : metadata.inputs) {
    inputs += (inputs.empty() ? "" : ", ") + in.name + " " + in.datatype + " " +
              ShapeToString(in.shape);
  }
  if (metadata.inputs.size() != 1 || metadata.inputs[0].datatype != "BYTES") {
    return InvalidArgument("--input-bytes fills a model's one BYTES input; model '" +
                           metadata.name + "' takes " + (inputs.empty() ? "none" : inputs) +
                           " (use --input FILE.json)");
  }
  if (bytes.size() > std::numeric_limits<uint32_t>::max()) {
    return InvalidArgument("--input-bytes: a BYTES element holds at most 4 GiB");
  }
  const TensorMetadata& in = metadata.inputs[0];
  Tensor t;
  t.name = in.name;
  t.datatype = DataType::kBytes;
  t.shape = in.shape;
  const bool batched = !t.shape.empty() && t.shape[0] == -1;
  if (batched) t.shape[0] = batch_size;
  if (!batched && batch_size != 1) {
    return InvalidArgument("model '" + metadata.name + "' input '" + in.name +
                           "' takes no batch dim, so --batch-size must be 1");
  }
  // Every other variable dim holds one element: one image per sample.
  for (size_t d = batched ? 1 : 0; d < t.shape.size(); ++d) {
    if (t.shape[d] < 0) t.shape[d] = 1;
  }
  const int64_t elements = ElementCount(t.shape);
  std::string element;
  const auto n = static_cast<uint32_t>(bytes.size());
  for (int i = 0; i < 4; ++i) element.push_back(static_cast<char>((n >> (8 * i)) & 0xFF));
  element += bytes;
  t.data.reserve(element.size() * static_cast<size_t>(elements));
  for (int64_t i = 0; i < elements; ++i) t.data += element;
  InferenceRequest request;
  request.inputs.push_back(std::move(t));
  return request;
}

StatusOr<std::string> ReadBytesFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot open input file '" + path + "'");
  std::stringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

int64_t SamplesPerQuery(const InferenceRequest& request) {
  if (request.inputs.empty() || request.inputs[0].shape.empty()) return 1;
  return std::max<int64_t>(request.inputs[0].shape[0], 1);
}

void ApplyTraceQuery(const TraceQuery& query, InferenceRequest* request) {
  if (!query.task.empty()) request->parameters["task"] = query.task;
  if (query.latency_slo_ms) request->parameters["latency_slo_ms"] = *query.latency_slo_ms;
  if (query.min_accuracy) request->parameters["min_accuracy"] = *query.min_accuracy;
  if (query.max_cost) request->parameters["max_cost"] = *query.max_cost;
}

}  // namespace somm::loadgen
