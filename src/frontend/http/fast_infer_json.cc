#include "frontend/http/fast_infer_json.h"

#include <simdjson.h>

#include <algorithm>
#include <charconv>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace somm::oip::internal {
namespace {

namespace od = simdjson::ondemand;

// Nested 'data' arrays (and skipped values) deeper than this go to the
// general decoder.
constexpr int kMaxDataDepth = 16;
// A thread keeps its parser (and the parser's buffers, about five bytes per
// body byte) across queries for bodies up to this size; a larger body gets a
// parser of its own that is freed after it, so one huge request does not pin
// its buffers to an I/O thread for good.
constexpr size_t kKeptParserCapacity = size_t{2} << 20;

// FLT_MAX plus half an ulp: the general decoder rejects values that round to
// infinity as a float, so they leave the subset.
const double kFloatLimit = static_cast<double>(FLT_MAX) + std::ldexp(1.0, 103);

// Every walker below returns false when the document leaves the subset (or
// is not JSON): the caller then hands the body to the general decoder.

// Walks a value the decoders ignore, checking that it is valid JSON (On
// Demand does not look inside what it skips, and the general decoder
// rejects what is not JSON wherever it is).
bool SkipValue(od::value value, int depth) {
  if (depth > kMaxDataDepth) return false;
  od::json_type type;
  if (value.type().get(type)) return false;
  switch (type) {
    case od::json_type::object: {
      od::object object;
      if (value.get_object().get(object)) return false;
      for (auto field : object) {
        std::string_view key;
        od::value v;
        if (field.unescaped_key().get(key) || field.value().get(v) || !SkipValue(v, depth + 1)) {
          return false;
        }
      }
      return true;
    }
    case od::json_type::array: {
      od::array array;
      if (value.get_array().get(array)) return false;
      for (auto element : array) {
        od::value v;
        if (element.get(v) || !SkipValue(v, depth + 1)) return false;
      }
      return true;
    }
    case od::json_type::number: {
      od::number n;  // an integer beyond 64 bits is an error here
      return !value.get_number().get(n);
    }
    case od::json_type::string: {
      std::string_view s;
      return !value.get_string().get(s);
    }
    case od::json_type::boolean: {
      bool b;
      return !value.get_bool().get(b);
    }
    case od::json_type::null:
      return false;  // the general decoder decides what null means
  }
  return false;
}

// Iterates an object's members: `member(key, value)` reads the value.
// Repeated keys leave the subset (the general decoder decides what they mean).
template <typename Member>
bool Object(od::value value, Member member) {
  od::object object;
  if (value.get_object().get(object)) return false;
  std::vector<std::string> seen;
  for (auto field : object) {
    std::string_view key;
    od::value v;
    if (field.unescaped_key().get(key) || field.value().get(v)) return false;
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) return false;
    seen.emplace_back(key);
    if (!member(key, v)) return false;
  }
  return true;
}

bool String(od::value value, std::string* out) {
  std::string_view s;
  if (value.get_string().get(s)) return false;
  out->assign(s);
  return true;
}

// Debian 12's simdjson (3.0.1) misreads some numbers of more than 19
// significant digits: "0.444...440" with 39 digits came out as 7.2e-21
// (fuzz/infer_request_fuzz.cc found it; the general decoder's strtod reads
// 0.444...). A token that long is read again with std::from_chars, which
// rounds correctly; a shorter one cannot hold more than 19 digits.
bool ReadLongNumberAgain(std::string_view token, double* d) {
  while (!token.empty() && (token.back() == ' ' || token.back() == '\t' || token.back() == '\n' ||
                            token.back() == '\r')) {
    token.remove_suffix(1);
  }
  if (token.size() <= 19) return true;
  const auto [ptr, ec] = std::from_chars(token.data(), token.data() + token.size(), *d);
  return ec == std::errc() && ptr == token.data() + token.size();
}

bool Scalar(od::value value, Parameter* out) {
  od::json_type type;
  if (value.type().get(type)) return false;
  if (type == od::json_type::string) {
    std::string s;
    if (!String(value, &s)) return false;
    *out = std::move(s);
    return true;
  }
  if (type == od::json_type::boolean) {
    bool b;
    if (value.get_bool().get(b)) return false;
    *out = b;
    return true;
  }
  if (type != od::json_type::number) return false;
  const std::string_view token = value.raw_json_token();
  od::number n;
  if (value.get_number().get(n)) return false;
  switch (n.get_number_type()) {
    case od::number_type::signed_integer:
      *out = n.get_int64();
      return true;
    case od::number_type::floating_point_number: {
      double d = n.get_double();
      if (!ReadLongNumberAgain(token, &d)) return false;
      *out = d;
      return true;
    }
    default:  // beyond int64: the general decoder decides
      return false;
  }
}

bool ParametersObject(od::value value, Parameters* out) {
  return Object(value, [&](std::string_view key, od::value v) {
    Parameter p;
    if (!Scalar(v, &p)) return false;
    (*out)[std::string(key)] = std::move(p);
    return true;
  });
}

// Decodes nested 'data' arrays into `out`, `*written` elements so far, at
// most `count`.
template <typename T>
bool Data(od::value value, T* out, size_t count, size_t* written, int depth) {
  if (depth > kMaxDataDepth) return false;
  od::array array;
  if (value.get_array().get(array)) return false;
  for (auto element : array) {
    od::value v;
    if (element.get(v)) return false;
    double d;
    if (const simdjson::error_code error = v.get_double().get(d)) {
      // Not a number: a nested array, or out of the subset. (A value whose
      // type did not match is not consumed, so it can be read again.)
      if (error != simdjson::INCORRECT_TYPE || !Data(v, out, count, written, depth + 1)) {
        return false;
      }
      continue;
    }
    if (*written == count) return false;
    const std::string_view token = v.raw_json_token();
    if (!ReadLongNumberAgain(token, &d)) return false;
    if (d == 0 && std::signbit(d)) {
      // "-0" is the integer 0 to the general decoder, so +0.0; "-0.0" stays.
      if (token.find_first_of(".eE") == std::string_view::npos) d = 0.0;
    }
    if constexpr (std::is_same_v<T, float>) {
      if (std::fabs(d) >= kFloatLimit) return false;
      out[(*written)++] = static_cast<float>(d);
    } else {
      out[(*written)++] = d;
    }
  }
  return true;
}

// The binary extension's bytes after the JSON header, taken in tensor order.
struct BinarySection {
  std::string_view bytes;
  size_t taken = 0;
};

// json_size: the JSON text's length, which bounds the elements it can hold.
bool TensorObject(od::value value, size_t json_size, Tensor* out, BinarySection* binary) {
  std::string datatype;
  bool has_shape = false;
  bool has_data = false;
  int64_t binary_size = -1;  // parameters.binary_data_size; -1 = none
  const bool ok = Object(value, [&](std::string_view key, od::value v) {
    if (key == "name") return String(v, &out->name);
    if (key == "datatype") return String(v, &datatype);
    if (key == "shape") {
      has_shape = true;
      od::array dims;
      if (v.get_array().get(dims)) return false;
      for (auto dim : dims) {
        int64_t d;
        if (dim.get_int64().get(d) || d < 0) return false;
        out->shape.push_back(d);
      }
      return true;
    }
    if (key == "data") {
      // On Demand reads forward only: the elements need the datatype and
      // the shape first, as every OIP client sends them.
      if (!has_shape || has_data) return false;
      if (datatype == "FP32") {
        out->datatype = DataType::kFp32;
      } else if (datatype == "FP64") {
        out->datatype = DataType::kFp64;
      } else {
        return false;
      }
      has_data = true;
      int64_t count = 1;
      for (const int64_t dim : out->shape) {
        if (dim > (int64_t{1} << 40) || count > (int64_t{1} << 40) / std::max<int64_t>(dim, 1)) {
          return false;
        }
        count *= dim;
      }
      // Each element takes at least one byte of the text: a larger shape
      // cannot match, and sizing for it first would let a few hundred bytes
      // ask for terabytes (found by fuzz/infer_request_fuzz.cc).
      if (static_cast<uint64_t>(count) > json_size) return false;
      const auto n = static_cast<size_t>(count);
      out->data.resize(n * DataTypeSize(out->datatype));
      size_t written = 0;
      const bool fine =
          out->datatype == DataType::kFp32
              ? Data(v, reinterpret_cast<float*>(out->data.data()), n, &written, 0)
              : Data(v, reinterpret_cast<double*>(out->data.data()), n, &written, 0);
      return fine && written == n;
    }
    if (key == "parameters") {
      // Only binary requests: the tensor's bytes are in the binary section.
      if (binary == nullptr) return false;
      Parameters parameters;
      if (!ParametersObject(v, &parameters)) return false;
      const auto it = parameters.find("binary_data_size");
      if (it == parameters.end()) return true;
      const int64_t* size = std::get_if<int64_t>(&it->second);
      if (size == nullptr || *size < 0) return false;
      binary_size = *size;
      return true;
    }
    return SkipValue(v, 1);
  });
  if (!ok || out->name.empty() || !has_shape) return false;
  if (binary_size < 0) return has_data;
  // Bytes from the binary section: any fixed-size datatype, exactly the
  // shape's bytes (BYTES tensors and every error: the general decoder).
  if (has_data) return false;
  out->datatype = DataTypeFromString(datatype);
  if (out->datatype == DataType::kInvalid || out->datatype == DataType::kBytes) return false;
  int64_t count = 1;
  for (const int64_t dim : out->shape) {
    if (dim > (int64_t{1} << 40) || count > (int64_t{1} << 40) / std::max<int64_t>(dim, 1)) {
      return false;
    }
    count *= dim;
  }
  const auto n = static_cast<size_t>(binary_size);
  if (n != static_cast<size_t>(count) * DataTypeSize(out->datatype) ||
      n > binary->bytes.size() - binary->taken) {
    return false;
  }
  out->data.assign(binary->bytes.data() + binary->taken, n);
  binary->taken += n;
  return true;
}

bool Tensors(od::value value, size_t json_size, std::vector<Tensor>* out,
             BinarySection* binary = nullptr) {
  od::array array;
  if (value.get_array().get(array)) return false;
  for (auto element : array) {
    od::value v;
    if (element.get(v)) return false;
    Tensor tensor;
    if (!TensorObject(v, json_size, &tensor, binary)) return false;
    for (const Tensor& other : *out) {
      if (other.name == tensor.name) return false;
    }
    out->push_back(std::move(tensor));
  }
  return true;
}

// Parses `body` and runs `walk` on its root value; false when either fails or
// anything follows the root.
template <typename Walk>
bool WithDocument(std::string_view body, Walk walk) {
  thread_local std::unique_ptr<od::parser> kept;
  std::unique_ptr<od::parser> own;
  od::parser* parser;
  if (body.size() <= kKeptParserCapacity) {
    if (!kept) kept = std::make_unique<od::parser>();
    parser = kept.get();
  } else {
    own = std::make_unique<od::parser>();
    parser = own.get();
  }
  // The body lies in a buffer without simdjson's padding: one copy into a
  // padded one (memcpy speed, small beside the parse).
  const simdjson::padded_string padded(body);
  od::document doc;
  if (parser->iterate(padded).get(doc)) return false;
  od::value root;
  if (doc.get_value().get(root)) return false;
  if (!walk(root)) return false;
  // Past the root value there must be nothing left: current_location()
  // fails exactly when the document is used up.
  const char* rest;
  return doc.current_location().get(rest) != simdjson::SUCCESS;
}

// A binary body (header_length given) is its JSON header, then the binary
// section; false when the header would run past the body.
bool SplitBody(std::string_view* body, std::optional<size_t> header_length,
               std::optional<BinarySection>* binary) {
  if (!header_length) return true;
  if (*header_length > body->size()) return false;
  *binary = BinarySection{body->substr(*header_length)};
  *body = body->substr(0, *header_length);
  return true;
}

// Every binary byte must belong to a tensor.
bool AllTaken(const std::optional<BinarySection>& binary) {
  return !binary || binary->taken == binary->bytes.size();
}

// The leaves of a 'data' value as the general decoder counts them (an
// array's elements, recursively; anything else is one), without keeping any
// of them; false when it is not JSON or nests past kMaxDataDepth.
bool CountLeaves(od::value value, int depth, int64_t* count) {
  if (depth > kMaxDataDepth) return false;
  od::json_type type;
  if (value.type().get(type)) return false;
  if (type != od::json_type::array) {
    ++*count;
    return SkipValue(value, depth);
  }
  od::array array;
  if (value.get_array().get(array)) return false;
  for (auto element : array) {
    od::value v;
    if (element.get(v) || !CountLeaves(v, depth + 1, count)) return false;
  }
  return true;
}

}  // namespace

std::optional<Status> DataCountMismatch(std::string_view body,
                                        std::optional<size_t> header_length) {
  std::optional<BinarySection> binary;
  if (!SplitBody(&body, header_length, &binary)) return std::nullopt;
  std::optional<Status> mismatch;
  const bool walked = WithDocument(body, [&](od::value root) {
    return Object(root, [&](std::string_view key, od::value value) {
      if (key != "inputs") return SkipValue(value, 1);
      od::array inputs;
      if (value.get_array().get(inputs)) return false;
      for (auto element : inputs) {
        od::value input;
        if (element.get(input)) return false;
        std::string name, datatype;
        Shape shape;
        bool has_shape = false;
        // Only the plain form (name, datatype, shape, then data; no
        // parameters): anything else is the general decoder's to judge.
        const bool plain = Object(input, [&](std::string_view k, od::value v) {
          if (k == "name") return String(v, &name);
          if (k == "datatype") return String(v, &datatype);
          if (k == "shape") {
            od::array dims;
            if (v.get_array().get(dims)) return false;
            for (auto dim : dims) {
              int64_t d;
              if (dim.get_int64().get(d) || d < 0 || d > (int64_t{1} << 40)) return false;
              shape.push_back(d);
            }
            has_shape = true;
            return true;
          }
          if (k == "data") {
            if (!has_shape || name.empty() || DataTypeFromString(datatype) == DataType::kInvalid) {
              return false;
            }
            int64_t declared = 1;
            for (const int64_t dim : shape) {
              if (dim != 0 && declared > (int64_t{1} << 40) / dim) return false;
              declared *= dim;
            }
            int64_t held = 0;
            if (!CountLeaves(v, 0, &held)) return false;
            // The first mismatch is the general decoder's error, but only
            // if the whole document is walked: a repeated key, say, would
            // have the general decoder read another value.
            if (held != declared && !mismatch) {
              mismatch = InvalidArgument("input '" + name + "' has shape " + ShapeToString(shape) +
                                         " (" + std::to_string(declared) +
                                         " elements) but 'data' holds " + std::to_string(held) +
                                         " elements");
            }
            return true;
          }
          return false;
        });
        if (!plain) return false;
      }
      return true;
    });
  });
  if (!walked) return std::nullopt;
  return mismatch;
}

std::optional<InferenceRequest> FastDecodeInferRequest(std::string_view body,
                                                      std::optional<size_t> header_length) {
  InferenceRequest request;
  bool has_inputs = false;
  std::optional<BinarySection> binary;
  if (!SplitBody(&body, header_length, &binary)) return std::nullopt;
  const bool ok = WithDocument(body, [&](od::value root) {
    return Object(root, [&](std::string_view key, od::value v) {
      if (key == "id") return String(v, &request.id);
      if (key == "parameters") return ParametersObject(v, &request.parameters);
      if (key == "inputs") {
        has_inputs = true;
        return Tensors(v, body.size(), &request.inputs, binary ? &*binary : nullptr);
      }
      if (key == "outputs") {
        od::array outputs;
        if (v.get_array().get(outputs)) return false;
        for (auto element : outputs) {
          od::value o;
          if (element.get(o)) return false;
          RequestedOutput output;
          const bool fine = Object(o, [&](std::string_view k, od::value ov) {
            if (k == "name") return String(ov, &output.name);
            if (k == "parameters") return ParametersObject(ov, &output.parameters);
            return SkipValue(ov, 2);
          });
          if (!fine || output.name.empty()) return false;
          for (const RequestedOutput& other : request.outputs) {
            if (other.name == output.name) return false;
          }
          request.outputs.push_back(std::move(output));
        }
        return true;
      }
      return SkipValue(v, 1);
    });
  });
  if (!ok || !has_inputs || !AllTaken(binary)) return std::nullopt;
  return request;
}

std::optional<InferenceResponse> FastDecodeInferResponse(std::string_view body,
                                                        std::optional<size_t> header_length) {
  InferenceResponse response;
  bool has_outputs = false;
  std::optional<BinarySection> binary;
  if (!SplitBody(&body, header_length, &binary)) return std::nullopt;
  const bool ok = WithDocument(body, [&](od::value root) {
    return Object(root, [&](std::string_view key, od::value v) {
      if (key == "model_name") return String(v, &response.model_name);
      if (key == "model_version") return String(v, &response.model_version);
      if (key == "id") return String(v, &response.id);
      if (key == "parameters") return ParametersObject(v, &response.parameters);
      if (key == "outputs") {
        has_outputs = true;
        return Tensors(v, body.size(), &response.outputs, binary ? &*binary : nullptr);
      }
      return SkipValue(v, 1);
    });
  });
  if (!ok || !has_outputs || !AllTaken(binary)) return std::nullopt;
  return response;
}

}  // namespace somm::oip::internal
