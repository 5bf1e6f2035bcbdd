#include "frontend/grpc/grpc_codec.h"

#include <bit>
#include <cstring>
#include <limits>
#include <mutex>
#include <set>
#include <type_traits>
#include <utility>

namespace somm::grpc_codec {
namespace {

// Raw tensor bytes are little-endian on the wire and in somm::Tensor; the
// typed decoders below memcpy host values, which is only right on a
// little-endian host.
static_assert(std::endian::native == std::endian::little,
              "grpc_codec assumes a little-endian host");

using google::protobuf::RepeatedField;
using inference::InferParameter;
using inference::InferTensorContents;

template <class... Fs>
struct Overloaded : Fs... {
  using Fs::operator()...;
};
template <class... Fs>
Overloaded(Fs...) -> Overloaded<Fs...>;

std::string Quote(const std::string& role, const std::string& name) {
  return role + " '" + name + "'";
}

// The tensor's header (name, datatype, shape) and its element count, checked
// so that count * element size cannot overflow later.
struct TensorHeader {
  Tensor tensor;  // data still empty
  int64_t count = 0;
};

StatusOr<TensorHeader> CheckHeader(const std::string& role, const std::string& name,
                                   const std::string& datatype,
                                   const RepeatedField<int64_t>& shape) {
  TensorHeader h;
  h.tensor.name = name;
  h.tensor.datatype = DataTypeFromString(datatype);
  if (h.tensor.datatype == DataType::kInvalid) {
    return InvalidArgument(Quote(role, name) + ": unknown datatype '" + datatype + "'");
  }
  h.tensor.shape.assign(shape.begin(), shape.end());
  // Bound the element count so that count * 8 bytes still fits an int64.
  constexpr int64_t kMaxElements = std::numeric_limits<int64_t>::max() / 8;
  int64_t count = 1;
  for (int64_t dim : shape) {
    if (dim < 0) {
      return InvalidArgument(Quote(role, name) + ": shape " + ShapeToString(h.tensor.shape) +
                             " has a negative dimension");
    }
    if (dim != 0 && count > kMaxElements / dim) {
      return InvalidArgument(Quote(role, name) + ": shape " + ShapeToString(h.tensor.shape) +
                             " has too many elements");
    }
    count *= dim;
  }
  h.count = count;
  return h;
}

Status CountMismatch(const std::string& role, const TensorHeader& h, int64_t got) {
  return InvalidArgument(Quote(role, h.tensor.name) + ": shape " + ShapeToString(h.tensor.shape) +
                         " needs " + std::to_string(h.count) + " elements, got " +
                         std::to_string(got));
}

int64_t TypedElementCount(const InferTensorContents& c) {
  return int64_t{c.bool_contents_size()} + c.int_contents_size() + c.int64_contents_size() +
         c.uint_contents_size() + c.uint64_contents_size() + c.fp32_contents_size() +
         c.fp64_contents_size() + c.bytes_contents_size();
}

// Packs typed wire values into `Elem`-sized little-endian bytes, refusing
// values that do not fit (an INT8 tensor sent 300 in int_contents).
template <typename Elem, typename Wire>
Status PackTyped(const std::string& role, const char* field, const RepeatedField<Wire>& values,
                 const InferTensorContents& contents, TensorHeader* h) {
  if (values.size() != h->count) {
    if (values.empty() && TypedElementCount(contents) > 0) {
      return InvalidArgument(Quote(role, h->tensor.name) + ": " + DataTypeName(h->tensor.datatype) +
                             " elements belong in " + field);
    }
    return CountMismatch(role, *h, values.size());
  }
  std::string& data = h->tensor.data;
  data.resize(static_cast<size_t>(h->count) * sizeof(Elem));
  char* out = data.data();
  for (int i = 0; i < values.size(); ++i) {
    const Wire v = values.Get(i);
    if constexpr (std::is_integral_v<Wire> && !std::is_same_v<Wire, bool>) {
      if (!std::in_range<Elem>(v)) {
        return InvalidArgument(Quote(role, h->tensor.name) + ": element " + std::to_string(i) +
                               " (" + std::to_string(v) + ") is out of range for " +
                               DataTypeName(h->tensor.datatype));
      }
    }
    const Elem e = static_cast<Elem>(v);
    std::memcpy(out, &e, sizeof(Elem));
    out += sizeof(Elem);
  }
  return Status::Ok();
}

Status PackBytes(const std::string& role, const InferTensorContents& contents, TensorHeader* h) {
  const auto& values = contents.bytes_contents();
  if (values.size() != h->count) {
    if (values.empty() && TypedElementCount(contents) > 0) {
      return InvalidArgument(Quote(role, h->tensor.name) + ": BYTES elements belong in " +
                             "bytes_contents");
    }
    return CountMismatch(role, *h, values.size());
  }
  size_t total = 0;
  for (const std::string& v : values) total += 4 + v.size();
  std::string& data = h->tensor.data;
  data.reserve(total);
  for (const std::string& v : values) {
    if (v.size() > std::numeric_limits<uint32_t>::max()) {
      return InvalidArgument(Quote(role, h->tensor.name) + ": a BYTES element exceeds 4 GiB");
    }
    const uint32_t len = static_cast<uint32_t>(v.size());
    char prefix[4];
    std::memcpy(prefix, &len, 4);
    data.append(prefix, 4);
    data.append(v);
  }
  return Status::Ok();
}

// Walks the 4-byte length prefixes of raw BYTES data: they must cover every
// byte and describe exactly `count` elements.
Status CheckRawBytes(const std::string& role, const TensorHeader& h, const std::string& raw) {
  size_t offset = 0;
  int64_t elements = 0;
  while (offset < raw.size()) {
    if (raw.size() - offset < 4) {
      return InvalidArgument(Quote(role, h.tensor.name) +
                             ": BYTES data ends inside a length prefix");
    }
    uint32_t len;
    std::memcpy(&len, raw.data() + offset, 4);
    offset += 4;
    if (raw.size() - offset < len) {
      return InvalidArgument(Quote(role, h.tensor.name) + ": BYTES element " +
                             std::to_string(elements) + " claims " + std::to_string(len) +
                             " bytes but only " + std::to_string(raw.size() - offset) + " remain");
    }
    offset += len;
    ++elements;
  }
  if (elements != h.count) return CountMismatch(role, h, elements);
  return Status::Ok();
}

bool HasTypedContents(const inference::ModelInferRequest::InferInputTensor& input) {
  return input.has_contents() && TypedElementCount(input.contents()) > 0;
}

// Shared memory is a Triton extension somm does not offer. Refusing it is
// better than ignoring it: the client would otherwise read stale buffers.
Status RejectSharedMemory(const ProtoParameters& params, const std::string& what) {
  for (const auto& [key, value] : params) {
    if (key.rfind("shared_memory_", 0) == 0) {
      return Unimplemented(what + ": parameter '" + key +
                           "': the shared-memory extension is not supported; send the data "
                           "in the request");
    }
  }
  return Status::Ok();
}

}  // namespace

Status DecodeParameters(const ProtoParameters& in, const std::string& what, Parameters* out) {
  for (const auto& [key, value] : in) {
    switch (value.parameter_choice_case()) {
      case InferParameter::kBoolParam:
        (*out)[key] = value.bool_param();
        break;
      case InferParameter::kInt64Param:
        (*out)[key] = static_cast<int64_t>(value.int64_param());
        break;
      case InferParameter::kStringParam:
        (*out)[key] = value.string_param();
        break;
      case InferParameter::kDoubleParam:
        (*out)[key] = value.double_param();
        break;
      case InferParameter::kUint64Param:
        if (!std::in_range<int64_t>(value.uint64_param())) {
          return InvalidArgument(what + ": parameter '" + key + "': uint64 value " +
                                 std::to_string(value.uint64_param()) + " exceeds the int64 range");
        }
        (*out)[key] = static_cast<int64_t>(value.uint64_param());
        break;
      case InferParameter::PARAMETER_CHOICE_NOT_SET:
        return InvalidArgument(what + ": parameter '" + key + "' has no value");
    }
  }
  return Status::Ok();
}

void EncodeParameters(const Parameters& in, ProtoParameters* out) {
  for (const auto& [key, value] : in) {
    InferParameter& p = (*out)[key];
    std::visit(Overloaded{
                   [&](bool v) { p.set_bool_param(v); },
                   [&](int64_t v) { p.set_int64_param(v); },
                   [&](double v) { p.set_double_param(v); },
                   [&](const std::string& v) { p.set_string_param(v); },
               },
               value);
  }
}

StatusOr<Tensor> TensorFromRaw(const std::string& role, const std::string& name,
                               const std::string& datatype, const RepeatedField<int64_t>& shape,
                               std::string raw) {
  SOMM_ASSIGN_OR_RETURN(TensorHeader h, CheckHeader(role, name, datatype, shape));
  if (h.tensor.datatype == DataType::kBytes) {
    SOMM_RETURN_IF_ERROR(CheckRawBytes(role, h, raw));
  } else {
    const size_t element_size = DataTypeSize(h.tensor.datatype);
    const size_t expected = static_cast<size_t>(h.count) * element_size;
    if (raw.size() != expected) {
      return InvalidArgument(Quote(role, name) + ": shape " + ShapeToString(h.tensor.shape) +
                             " of " + DataTypeName(h.tensor.datatype) + " needs " +
                             std::to_string(expected) + " bytes, got " +
                             std::to_string(raw.size()));
    }
  }
  h.tensor.data = std::move(raw);
  return std::move(h.tensor);
}

StatusOr<Tensor> TensorFromContents(const std::string& role, const std::string& name,
                                    const std::string& datatype,
                                    const RepeatedField<int64_t>& shape,
                                    const InferTensorContents& c) {
  SOMM_ASSIGN_OR_RETURN(TensorHeader h, CheckHeader(role, name, datatype, shape));
  Status s;
  switch (h.tensor.datatype) {
    case DataType::kBool:
      s = PackTyped<uint8_t>(role, "bool_contents", c.bool_contents(), c, &h);
      break;
    case DataType::kInt8:
      s = PackTyped<int8_t>(role, "int_contents", c.int_contents(), c, &h);
      break;
    case DataType::kInt16:
      s = PackTyped<int16_t>(role, "int_contents", c.int_contents(), c, &h);
      break;
    case DataType::kInt32:
      s = PackTyped<int32_t>(role, "int_contents", c.int_contents(), c, &h);
      break;
    case DataType::kInt64:
      s = PackTyped<int64_t>(role, "int64_contents", c.int64_contents(), c, &h);
      break;
    case DataType::kUint8:
      s = PackTyped<uint8_t>(role, "uint_contents", c.uint_contents(), c, &h);
      break;
    case DataType::kUint16:
      s = PackTyped<uint16_t>(role, "uint_contents", c.uint_contents(), c, &h);
      break;
    case DataType::kUint32:
      s = PackTyped<uint32_t>(role, "uint_contents", c.uint_contents(), c, &h);
      break;
    case DataType::kUint64:
      s = PackTyped<uint64_t>(role, "uint64_contents", c.uint64_contents(), c, &h);
      break;
    case DataType::kFp32:
      s = PackTyped<float>(role, "fp32_contents", c.fp32_contents(), c, &h);
      break;
    case DataType::kFp64:
      s = PackTyped<double>(role, "fp64_contents", c.fp64_contents(), c, &h);
      break;
    case DataType::kBytes:
      s = PackBytes(role, c, &h);
      break;
    case DataType::kFp16:
    case DataType::kBf16:
      // The protocol has no 16-bit float field; zero elements need no data.
      if (h.count != 0 || TypedElementCount(c) != 0) {
        s = InvalidArgument(Quote(role, name) + ": " + DataTypeName(h.tensor.datatype) +
                            " has no typed contents field; send it in raw contents");
      }
      break;
    case DataType::kInvalid:
      s = InvalidArgument(Quote(role, name) + ": unknown datatype '" + datatype + "'");
      break;
  }
  SOMM_RETURN_IF_ERROR(s);
  return std::move(h.tensor);
}

Status DecodeInferRequest(const inference::ModelInferRequest& in, InferenceRequest* out) {
  out->model_name = in.model_name();
  out->model_version = in.model_version();
  out->id = in.id();
  SOMM_RETURN_IF_ERROR(DecodeParameters(in.parameters(), "request", &out->parameters));
  if (in.model_name().empty()) {
    // Task form: the string parameter "task" names what the query needs and
    // somm picks the model. The parameter stays in `parameters` too, as it
    // does when a REST request carries it.
    const auto task = out->parameters.find("task");
    const std::string* name =
        task == out->parameters.end() ? nullptr : std::get_if<std::string>(&task->second);
    if (name == nullptr || name->empty()) {
      return InvalidArgument(
          "request names no model (model_name) and no task (string parameter 'task')");
    }
    out->task = *name;
  }

  const bool raw = in.raw_input_contents_size() > 0;
  if (raw && in.raw_input_contents_size() != in.inputs_size()) {
    return InvalidArgument("raw_input_contents has " +
                           std::to_string(in.raw_input_contents_size()) +
                           " entries but the request has " + std::to_string(in.inputs_size()) +
                           " inputs; send exactly one per input, in the order of 'inputs'");
  }
  std::set<std::string> seen;
  out->inputs.reserve(in.inputs_size());
  for (int i = 0; i < in.inputs_size(); ++i) {
    const auto& input = in.inputs(i);
    if (input.name().empty()) {
      return InvalidArgument("input " + std::to_string(i) + " has no name");
    }
    const std::string what = Quote("input", input.name());
    if (!seen.insert(input.name()).second) return InvalidArgument(what + " appears twice");
    SOMM_RETURN_IF_ERROR(RejectSharedMemory(input.parameters(), what));
    if (raw && HasTypedContents(input)) {
      return InvalidArgument(what +
                             " has typed contents but the request also uses raw_input_contents; "
                             "use one or the other");
    }
    StatusOr<Tensor> tensor = raw ? TensorFromRaw("input", input.name(), input.datatype(),
                                                  input.shape(), in.raw_input_contents(i))
                                  : TensorFromContents("input", input.name(), input.datatype(),
                                                       input.shape(), input.contents());
    if (!tensor.ok()) return tensor.status();
    out->inputs.push_back(std::move(tensor).value());
  }

  out->outputs.reserve(in.outputs_size());
  for (const auto& requested : in.outputs()) {
    const std::string what = Quote("requested output", requested.name());
    if (requested.name().empty()) return InvalidArgument("a requested output has no name");
    SOMM_RETURN_IF_ERROR(RejectSharedMemory(requested.parameters(), what));
    RequestedOutput o;
    o.name = requested.name();
    SOMM_RETURN_IF_ERROR(DecodeParameters(requested.parameters(), what, &o.parameters));
    out->outputs.push_back(std::move(o));
  }
  return Status::Ok();
}

Status EncodeInferResponse(InferenceResponse response, inference::ModelInferResponse* out) {
  out->set_model_name(std::move(response.model_name));
  out->set_model_version(std::move(response.model_version));
  out->set_id(std::move(response.id));
  EncodeParameters(response.parameters, out->mutable_parameters());
  for (Tensor& t : response.outputs) {
    Status s = t.CheckByteSize();
    if (!s.ok()) {
      return Internal("model '" + out->model_name() +
                      "' produced a malformed output: " + s.message());
    }
    auto* o = out->add_outputs();
    o->set_name(std::move(t.name));
    o->set_datatype(DataTypeName(t.datatype));
    o->mutable_shape()->Add(t.shape.begin(), t.shape.end());
    out->add_raw_output_contents(std::move(t.data));
  }
  return Status::Ok();
}

Status EncodeInferRequest(const InferenceRequest& in, inference::ModelInferRequest* out) {
  out->set_model_name(in.model_name);
  out->set_model_version(in.model_version);
  out->set_id(in.id);
  EncodeParameters(in.parameters, out->mutable_parameters());
  for (const Tensor& t : in.inputs) {
    SOMM_RETURN_IF_ERROR(t.CheckByteSize());
    auto* i = out->add_inputs();
    i->set_name(t.name);
    i->set_datatype(DataTypeName(t.datatype));
    i->mutable_shape()->Add(t.shape.begin(), t.shape.end());
    out->add_raw_input_contents(t.data);
  }
  for (const RequestedOutput& o : in.outputs) {
    auto* r = out->add_outputs();
    r->set_name(o.name);
    EncodeParameters(o.parameters, r->mutable_parameters());
  }
  return Status::Ok();
}

StatusOr<InferenceResponse> DecodeInferResponse(inference::ModelInferResponse* in) {
  InferenceResponse r;
  r.model_name = in->model_name();
  r.model_version = in->model_version();
  r.id = in->id();
  SOMM_RETURN_IF_ERROR(DecodeParameters(in->parameters(), "response", &r.parameters));
  const bool raw = in->raw_output_contents_size() > 0;
  if (raw && in->raw_output_contents_size() != in->outputs_size()) {
    return InvalidArgument("response has " + std::to_string(in->raw_output_contents_size()) +
                           " raw_output_contents for " + std::to_string(in->outputs_size()) +
                           " outputs");
  }
  r.outputs.reserve(in->outputs_size());
  for (int i = 0; i < in->outputs_size(); ++i) {
    const auto& o = in->outputs(i);
    StatusOr<Tensor> tensor =
        raw ? TensorFromRaw("output", o.name(), o.datatype(), o.shape(),
                            std::move(*in->mutable_raw_output_contents(i)))
            : TensorFromContents("output", o.name(), o.datatype(), o.shape(), o.contents());
    if (!tensor.ok()) return tensor.status();
    r.outputs.push_back(std::move(tensor).value());
  }
  return r;
}

void EncodeServerMetadata(const ServerMetadata& in, inference::ServerMetadataResponse* out) {
  out->set_name(in.name);
  out->set_version(in.version);
  for (const std::string& e : in.extensions) out->add_extensions(e);
}

ServerMetadata DecodeServerMetadata(const inference::ServerMetadataResponse& in) {
  ServerMetadata m;
  m.name = in.name();
  m.version = in.version();
  m.extensions.assign(in.extensions().begin(), in.extensions().end());
  return m;
}

void EncodeModelMetadata(const ModelMetadata& in, inference::ModelMetadataResponse* out) {
  // ModelMetadata::parameters has no field in the gRPC message; REST carries it.
  out->set_name(in.name);
  for (const std::string& v : in.versions) out->add_versions(v);
  out->set_platform(in.platform);
  auto encode = [](const TensorMetadata& t, auto* m) {
    m->set_name(t.name);
    m->set_datatype(t.datatype);
    m->mutable_shape()->Add(t.shape.begin(), t.shape.end());
  };
  for (const TensorMetadata& t : in.inputs) encode(t, out->add_inputs());
  for (const TensorMetadata& t : in.outputs) encode(t, out->add_outputs());
}

ModelMetadata DecodeModelMetadata(const inference::ModelMetadataResponse& in) {
  ModelMetadata m;
  m.name = in.name();
  m.versions.assign(in.versions().begin(), in.versions().end());
  m.platform = in.platform();
  auto decode = [](const inference::ModelMetadataResponse::TensorMetadata& t) {
    return TensorMetadata{t.name(), t.datatype(), Shape(t.shape().begin(), t.shape().end())};
  };
  for (const auto& t : in.inputs()) m.inputs.push_back(decode(t));
  for (const auto& t : in.outputs()) m.outputs.push_back(decode(t));
  return m;
}

}  // namespace somm::grpc_codec
