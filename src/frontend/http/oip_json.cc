#include "frontend/http/oip_json.h"

#include <charconv>
#include <exception>
#include <limits>
#include <new>
#include <set>
#include <utility>

#include "frontend/http/fast_infer_json.h"
#include "frontend/http/http_status.h"
#include "frontend/http/json_util.h"
#include "frontend/http/json_writer.h"
#include "frontend/http/tensor_json.h"

namespace somm::oip {
namespace {

using internal::Json;

// The bytes after the JSON header, handed out in order to the tensors that
// declare binary_data_size.
class BinarySection {
 public:
  explicit BinarySection(std::string_view bytes) : bytes_(bytes) {}

  StatusOr<std::string_view> Take(int64_t n, const std::string& what) {
    const size_t left = bytes_.size() - offset_;
    if (static_cast<uint64_t>(n) > left) {
      return InvalidArgument(what + ": binary_data_size " + std::to_string(n) + " exceeds the " +
                             std::to_string(left) + " binary bytes left in the body");
    }
    const std::string_view out = bytes_.substr(offset_, static_cast<size_t>(n));
    offset_ += static_cast<size_t>(n);
    return out;
  }

  Status CheckConsumed() const {
    if (offset_ == bytes_.size()) return Status::Ok();
    return InvalidArgument("the binary section holds " + std::to_string(bytes_.size()) +
                           " bytes but the tensors' binary_data_size parameters add up to " +
                           std::to_string(offset_));
  }

 private:
  std::string_view bytes_;
  size_t offset_ = 0;
};

// Runs a codec body, turning any exception a hostile body could still provoke
// into a Status (nlohmann type errors, allocation failure on absurd sizes).
template <typename Fn>
auto Guarded(const char* what, Fn&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const Json::exception& e) {
    return InvalidArgument(std::string(what) + ": " + e.what());
  } catch (const std::bad_alloc&) {
    return ResourceExhausted(std::string(what) + ": out of memory");
  } catch (const std::exception& e) {
    return InvalidArgument(std::string(what) + ": " + e.what());
  }
}

Status CheckBinarySize(const Tensor& tensor, int64_t element_count, const std::string& what) {
  if (tensor.datatype == DataType::kBytes) {
    const Status s = tensor.CheckByteSize();
    if (!s.ok()) return InvalidArgument(what + ": " + s.message());
    return Status::Ok();
  }
  const int64_t item = static_cast<int64_t>(DataTypeSize(tensor.datatype));
  if (element_count > std::numeric_limits<int64_t>::max() / item ||
      static_cast<int64_t>(tensor.data.size()) != element_count * item) {
    return InvalidArgument(what + " has shape " + ShapeToString(tensor.shape) + " and datatype " +
                           DataTypeName(tensor.datatype) + " (" + std::to_string(element_count) +
                           " elements of " + std::to_string(item) +
                           " bytes) but binary_data_size is " + std::to_string(tensor.data.size()));
  }
  return Status::Ok();
}

// Decodes one $request_input or $response_output. `kind` is "input" or
// "output"; `index` its position, used until the name is known.
Status DecodeTensor(const Json& object, const char* kind, size_t index, BinarySection* binary,
                    Tensor* out) {
  std::string what = std::string(kind) + " " + std::to_string(index);
  if (!object.is_object()) {
    return InvalidArgument(what + " must be an object, got " + internal::JsonTypeName(object));
  }
  SOMM_RETURN_IF_ERROR(internal::ReadString(object, "name", what, true, &out->name));
  what = std::string(kind) + " '" + out->name + "'";

  std::string datatype;
  SOMM_RETURN_IF_ERROR(internal::ReadString(object, "datatype", what, true, &datatype));
  out->datatype = DataTypeFromString(datatype);
  if (out->datatype == DataType::kInvalid) {
    return InvalidArgument(what + ": unknown datatype '" + datatype + "'");
  }
  SOMM_RETURN_IF_ERROR(internal::ReadShape(object, what, &out->shape));
  SOMM_ASSIGN_OR_RETURN(const int64_t count, internal::CheckedElementCount(out->shape, what));

  Parameters parameters;
  if (const auto it = object.find("parameters"); it != object.end()) {
    SOMM_RETURN_IF_ERROR(internal::JsonToParameters(*it, what, &parameters));
  }
  const auto data = object.find("data");
  const auto size_param = parameters.find(kBinaryDataSize);
  if (size_param == parameters.end()) {
    if (data == object.end()) {
      return InvalidArgument(what + " has neither 'data' nor parameters.binary_data_size");
    }
    // Responses may carry null for NaN / infinity (see tensor_json.h).
    const bool null_is_nan = std::string_view(kind) == "output";
    return internal::DecodeTensorData(*data, out->datatype, out->shape, count, what, null_is_nan,
                                      &out->data);
  }
  if (data != object.end()) {
    return InvalidArgument(what + " has both 'data' and parameters.binary_data_size");
  }
  const int64_t* size = std::get_if<int64_t>(&size_param->second);
  if (size == nullptr || *size < 0) {
    return InvalidArgument(what + ": parameters.binary_data_size must be a non-negative integer");
  }
  SOMM_ASSIGN_OR_RETURN(const std::string_view bytes, binary->Take(*size, what));
  out->data.assign(bytes.data(), bytes.size());
  return CheckBinarySize(*out, count, what);
}

StatusOr<Json> ParseHeader(std::string_view body, std::optional<size_t> header_length,
                           std::string_view* binary) {
  const size_t json_size = header_length.value_or(body.size());
  if (json_size > body.size()) {
    return InvalidArgument(std::string(kInferenceHeaderContentLength) + " " +
                           std::to_string(json_size) + " exceeds the body size " +
                           std::to_string(body.size()));
  }
  *binary = body.substr(json_size);
  SOMM_ASSIGN_OR_RETURN(Json json, internal::ParseJson(body.substr(0, json_size)));
  if (!json.is_object()) {
    return InvalidArgument(std::string("the body must be a JSON object, got ") +
                           internal::JsonTypeName(json));
  }
  return json;
}

const Json* FindArray(const Json& object, const char* key, bool required, Status* status) {
  const auto it = object.find(key);
  if (it == object.end()) {
    if (required) *status = InvalidArgument(std::string("'") + key + "' is required");
    return nullptr;
  }
  if (!it->is_array()) {
    *status = InvalidArgument(std::string("'") + key + "' must be an array, got " +
                              internal::JsonTypeName(*it));
    return nullptr;
  }
  return &*it;
}

Status DecodeTensors(const Json& object, const char* key, const char* kind, BinarySection* binary,
                     std::vector<Tensor>* out) {
  Status status;
  const Json* array = FindArray(object, key, true, &status);
  if (array == nullptr) return status;
  std::set<std::string> seen;
  out->reserve(array->size());
  for (size_t i = 0; i < array->size(); ++i) {
    Tensor tensor;
    SOMM_RETURN_IF_ERROR(DecodeTensor((*array)[i], kind, i, binary, &tensor));
    if (!seen.insert(tensor.name).second) {
      return InvalidArgument(std::string(kind) + " '" + tensor.name + "' appears more than once");
    }
    out->push_back(std::move(tensor));
  }
  return binary->CheckConsumed();
}

Status DecodeRequestedOutputs(const Json& object, std::vector<RequestedOutput>* out) {
  Status status;
  const Json* array = FindArray(object, "outputs", false, &status);
  if (array == nullptr) return status;
  std::set<std::string> seen;
  for (size_t i = 0; i < array->size(); ++i) {
    const Json& item = (*array)[i];
    std::string what = "requested output " + std::to_string(i);
    if (!item.is_object()) return InvalidArgument(what + " must be an object");
    RequestedOutput output;
    SOMM_RETURN_IF_ERROR(internal::ReadString(item, "name", what, true, &output.name));
    what = "requested output '" + output.name + "'";
    if (const auto it = item.find("parameters"); it != item.end()) {
      SOMM_RETURN_IF_ERROR(internal::JsonToParameters(*it, what, &output.parameters));
    }
    if (!seen.insert(output.name).second) {
      return InvalidArgument(what + " appears more than once");
    }
    out->push_back(std::move(output));
  }
  return Status::Ok();
}

Json EncodeTensor(const Tensor& tensor, bool binary, std::string* section) {
  Json out = Json::object();
  out["name"] = tensor.name;
  out["datatype"] = DataTypeName(tensor.datatype);
  out["shape"] = tensor.shape;
  if (binary) {
    out["parameters"] = Json{{kBinaryDataSize, tensor.data.size()}};
    section->append(tensor.data);
  } else {
    out["data"] = internal::EncodeTensorData(tensor);
  }
  return out;
}

EncodedBody Finish(const Json& header, std::string section, bool any_binary) {
  EncodedBody encoded;
  encoded.body = internal::DumpJson(header);
  if (any_binary) {
    encoded.json_size = encoded.body.size();
    encoded.body += section;
  }
  return encoded;
}

}  // namespace

StatusOr<BinaryOutputs> BinaryOutputs::FromRequest(const InferenceRequest& request) {
  BinaryOutputs out;
  SOMM_ASSIGN_OR_RETURN(const std::optional<bool> all,
                        internal::BoolParameter(request.parameters, kBinaryDataOutput, "request"));
  out.all_ = all.value_or(false);
  for (const RequestedOutput& output : request.outputs) {
    SOMM_ASSIGN_OR_RETURN(const std::optional<bool> binary,
                          internal::BoolParameter(output.parameters, kBinaryData,
                                                  "requested output '" + output.name + "'"));
    if (binary.has_value()) out.per_output_[output.name] = *binary;
  }
  return out;
}

bool BinaryOutputs::IsBinary(const std::string& output_name) const {
  const auto it = per_output_.find(output_name);
  return it == per_output_.end() ? all_ : it->second;
}

StatusOr<size_t> ParseHeaderLength(std::string_view value) {
  size_t n = 0;
  const auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
  if (value.empty() || ec != std::errc() || ptr != value.data() + value.size()) {
    return InvalidArgument(std::string(kInferenceHeaderContentLength) +
                           " must be a byte count, got '" + std::string(value.substr(0, 40)) + "'");
  }
  return n;
}

StatusOr<InferenceRequest> DecodeInferRequest(std::string_view body,
                                              std::optional<size_t> header_length) {
  if (std::optional<InferenceRequest> fast =
          internal::FastDecodeInferRequest(body, header_length)) {
    SOMM_RETURN_IF_ERROR(BinaryOutputs::FromRequest(*fast).status());
    return std::move(*fast);
  }
  // The general decoder keeps a tree of every number: a body whose data does
  // not match its shape is refused from a count first (fast_infer_json.h).
  if (std::optional<Status> mismatch = internal::DataCountMismatch(body, header_length)) {
    return *mismatch;
  }
  return internal::GeneralDecodeInferRequest(body, header_length);
}

StatusOr<InferenceRequest> internal::GeneralDecodeInferRequest(
    std::string_view body, std::optional<size_t> header_length) {
  return Guarded("inference request", [&]() -> StatusOr<InferenceRequest> {
    std::string_view binary_bytes;
    SOMM_ASSIGN_OR_RETURN(const Json json, ParseHeader(body, header_length, &binary_bytes));
    InferenceRequest request;
    SOMM_RETURN_IF_ERROR(internal::ReadString(json, "id", "request", false, &request.id));
    if (const auto it = json.find("parameters"); it != json.end()) {
      SOMM_RETURN_IF_ERROR(internal::JsonToParameters(*it, "request", &request.parameters));
    }
    BinarySection binary(binary_bytes);
    SOMM_RETURN_IF_ERROR(DecodeTensors(json, "inputs", "input", &binary, &request.inputs));
    SOMM_RETURN_IF_ERROR(DecodeRequestedOutputs(json, &request.outputs));
    SOMM_RETURN_IF_ERROR(BinaryOutputs::FromRequest(request).status());
    return request;
  });
}

StatusOr<EncodedBody> EncodeInferResponse(const InferenceResponse& response,
                                          const BinaryOutputs& binary) {
  // Written directly (JsonWriter), not through a Json tree: it is the one
  // document every query produces. Same text shape as EncodeTensor's.
  return Guarded("inference response", [&]() -> StatusOr<EncodedBody> {
    EncodedBody encoded;
    std::string& out = encoded.body;
    out.reserve(768);
    internal::JsonWriter w(&out);
    w.Raw("{");
    w.Key("model_name");
    w.String(response.model_name);
    w.Raw(",");
    w.Key("model_version");
    w.String(response.model_version);
    w.Raw(",");
    w.Key("id");
    w.String(response.id);
    if (!response.parameters.empty()) {
      w.Raw(",");
      w.Key("parameters");
      w.Parameters(response.parameters);
    }
    w.Raw(",");
    w.Key("outputs");
    w.Raw("[");
    std::string section;
    bool any_binary = false;
    bool first = true;
    for (const Tensor& tensor : response.outputs) {
      const Status s = tensor.CheckByteSize();
      if (!s.ok()) return Internal("model '" + response.model_name + "' output: " + s.message());
      const bool as_binary = binary.IsBinary(tensor.name);
      any_binary |= as_binary;
      if (!first) w.Raw(",");
      first = false;
      w.Raw("{");
      w.Key("name");
      w.String(tensor.name);
      w.Raw(",");
      w.Key("datatype");
      w.String(DataTypeName(tensor.datatype));
      w.Raw(",");
      w.Key("shape");
      w.Shape(tensor.shape);
      w.Raw(",");
      if (as_binary) {
        w.Key("parameters");
        w.Raw("{");
        w.Key(kBinaryDataSize);
        w.Uint(tensor.data.size());
        w.Raw("}");
        section.append(tensor.data);
      } else {
        w.Key("data");
        w.TensorData(tensor);
      }
      w.Raw("}");
    }
    w.Raw("]}");
    if (any_binary) {
      encoded.json_size = out.size();
      out += section;
    }
    return encoded;
  });
}

StatusOr<EncodedBody> EncodeInferRequest(const InferenceRequest& request,
                                         RequestEncoding encoding) {
  return Guarded("inference request", [&]() -> StatusOr<EncodedBody> {
    const bool binary_inputs = encoding.binary_inputs;
    Json header = Json::object();
    if (!request.id.empty()) header["id"] = request.id;
    Json parameters = internal::ParametersToJson(request.parameters);
    if (encoding.binary_outputs && !parameters.contains(kBinaryDataOutput)) {
      parameters[kBinaryDataOutput] = true;
    }
    if (!parameters.empty()) header["parameters"] = std::move(parameters);
    Json inputs = Json::array();
    std::string section;
    for (const Tensor& tensor : request.inputs) {
      const Status s = tensor.CheckByteSize();
      if (!s.ok()) return InvalidArgument("input: " + s.message());
      inputs.push_back(EncodeTensor(tensor, binary_inputs, &section));
    }
    header["inputs"] = std::move(inputs);
    if (!request.outputs.empty()) {
      Json outputs = Json::array();
      for (const RequestedOutput& output : request.outputs) {
        Json o = Json{{"name", output.name}};
        if (!output.parameters.empty()) {
          o["parameters"] = internal::ParametersToJson(output.parameters);
        }
        outputs.push_back(std::move(o));
      }
      header["outputs"] = std::move(outputs);
    }
    return Finish(header, std::move(section), binary_inputs && !request.inputs.empty());
  });
}

StatusOr<InferenceResponse> DecodeInferResponse(std::string_view body,
                                                std::optional<size_t> header_length) {
  if (std::optional<InferenceResponse> fast =
          internal::FastDecodeInferResponse(body, header_length)) {
    return std::move(*fast);
  }
  return internal::GeneralDecodeInferResponse(body, header_length);
}

StatusOr<InferenceResponse> internal::GeneralDecodeInferResponse(
    std::string_view body, std::optional<size_t> header_length) {
  return Guarded("inference response", [&]() -> StatusOr<InferenceResponse> {
    std::string_view binary_bytes;
    SOMM_ASSIGN_OR_RETURN(const Json json, ParseHeader(body, header_length, &binary_bytes));
    InferenceResponse response;
    SOMM_RETURN_IF_ERROR(
        internal::ReadString(json, "model_name", "response", false, &response.model_name));
    SOMM_RETURN_IF_ERROR(
        internal::ReadString(json, "model_version", "response", false, &response.model_version));
    SOMM_RETURN_IF_ERROR(internal::ReadString(json, "id", "response", false, &response.id));
    if (const auto it = json.find("parameters"); it != json.end()) {
      SOMM_RETURN_IF_ERROR(internal::JsonToParameters(*it, "response", &response.parameters));
    }
    BinarySection binary(binary_bytes);
    SOMM_RETURN_IF_ERROR(DecodeTensors(json, "outputs", "output", &binary, &response.outputs));
    return response;
  });
}

std::string EncodeError(std::string_view message) {
  return internal::DumpJson(Json{{"error", std::string(message)}});
}

std::string DecodeError(std::string_view body) {
  constexpr size_t kMaxRaw = 200;
  if (auto json = internal::ParseJson(body); json.ok() && json->is_object()) {
    const auto it = json->find("error");
    if (it != json->end() && it->is_string()) return it->get<std::string>();
  }
  return std::string(body.substr(0, kMaxRaw));
}

Status ErrorFromReply(int http_status, std::string_view body) {
  std::string message = DecodeError(body);
  if (message.empty()) message = "HTTP " + std::to_string(http_status);
  return Status(StatusCodeFromHttp(http_status), std::move(message));
}

StatusOr<InferenceResponse> DecodeInferReply(int http_status, std::string_view body,
                                             std::optional<size_t> json_size,
                                             std::string_view server) {
  if (http_status != 200) return ErrorFromReply(http_status, body);
  StatusOr<InferenceResponse> response = DecodeInferResponse(body, json_size);
  if (!response.ok()) {
    return Internal("malformed response from http://" + std::string(server) + ": " +
                    response.status().message());
  }
  return response;
}

}  // namespace somm::oip
