#include "frontend/http/fast_infer_json.h"

#include <cfloat>
#include <charconv>
#include <cmath>
#include <cstring>
#include <set>
#include <string>

namespace somm::oip::internal {
namespace {

// Nested 'data' arrays deeper than this go to the general decoder.
constexpr int kMaxDataDepth = 16;

// A cursor over the subset of JSON the fast paths accept. Every method
// returns false when the text leaves that subset (or is not JSON at all).
class Scanner {
 public:
  explicit Scanner(std::string_view text) : p_(text.data()), end_(text.data() + text.size()) {}

  void SkipSpace() {
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\t' || *p_ == '\n' || *p_ == '\r')) ++p_;
  }
  bool AtEnd() {
    SkipSpace();
    return p_ == end_;
  }
  bool Consume(char c) {
    SkipSpace();
    if (p_ < end_ && *p_ == c) {
      ++p_;
      return true;
    }
    return false;
  }
  char Peek() {
    SkipSpace();
    return p_ < end_ ? *p_ : '\0';
  }

  // A string of printable ASCII without escapes.
  bool String(std::string_view* out) {
    if (!Consume('"')) return false;
    const char* start = p_;
    while (p_ < end_ && *p_ != '"') {
      const auto u = static_cast<unsigned char>(*p_);
      if (u < 0x20 || u >= 0x7f || *p_ == '\\') return false;
      ++p_;
    }
    if (p_ == end_) return false;
    *out = std::string_view(start, static_cast<size_t>(p_ - start));
    ++p_;
    return true;
  }

  // A JSON number; `integral` tells whether it had no fraction or exponent.
  bool Number(std::string_view* text, bool* integral) {
    SkipSpace();
    const char* start = p_;
    if (p_ < end_ && *p_ == '-') ++p_;
    if (p_ == end_) return false;
    if (*p_ == '0') {
      ++p_;
    } else if (*p_ >= '1' && *p_ <= '9') {
      while (p_ < end_ && *p_ >= '0' && *p_ <= '9') ++p_;
    } else {
      return false;
    }
    *integral = true;
    if (p_ < end_ && *p_ == '.') {
      *integral = false;
      ++p_;
      if (p_ == end_ || *p_ < '0' || *p_ > '9') return false;
      while (p_ < end_ && *p_ >= '0' && *p_ <= '9') ++p_;
    }
    if (p_ < end_ && (*p_ == 'e' || *p_ == 'E')) {
      *integral = false;
      ++p_;
      if (p_ < end_ && (*p_ == '+' || *p_ == '-')) ++p_;
      if (p_ == end_ || *p_ < '0' || *p_ > '9') return false;
      while (p_ < end_ && *p_ >= '0' && *p_ <= '9') ++p_;
    }
    *text = std::string_view(start, static_cast<size_t>(p_ - start));
    return true;
  }

  bool Literal(std::string_view word) {
    SkipSpace();
    if (static_cast<size_t>(end_ - p_) < word.size() || std::memcmp(p_, word.data(), word.size())) {
      return false;
    }
    p_ += word.size();
    return true;
  }

  // Skips any value made of the accepted subset (for unknown keys).
  bool SkipValue(int depth = 0) {
    if (depth > kMaxDataDepth) return false;
    const char c = Peek();
    if (c == '"') {
      std::string_view s;
      return String(&s);
    }
    if (c == '{') {
      Consume('{');
      if (Consume('}')) return true;
      do {
        std::string_view key;
        if (!String(&key) || !Consume(':') || !SkipValue(depth + 1)) return false;
      } while (Consume(','));
      return Consume('}');
    }
    if (c == '[') {
      Consume('[');
      if (Consume(']')) return true;
      do {
        if (!SkipValue(depth + 1)) return false;
      } while (Consume(','));
      return Consume(']');
    }
    if (c == 't') return Literal("true");
    if (c == 'f') return Literal("false");
    std::string_view text;
    bool integral;
    return Number(&text, &integral);
  }

 private:
  const char* p_;
  const char* end_;
};

// Iterates an object's members: `member(key)` reads the value. Repeated keys
// leave the subset (the general decoder decides what they mean).
template <typename Member>
bool Object(Scanner& s, Member member) {
  if (!s.Consume('{')) return false;
  if (s.Consume('}')) return true;
  std::set<std::string_view> seen;
  do {
    std::string_view key;
    if (!s.String(&key) || !s.Consume(':')) return false;
    if (!seen.insert(key).second) return false;
    if (!member(key)) return false;
  } while (s.Consume(','));
  return s.Consume('}');
}

template <typename Element>
bool Array(Scanner& s, Element element) {
  if (!s.Consume('[')) return false;
  if (s.Consume(']')) return true;
  do {
    if (!element()) return false;
  } while (s.Consume(','));
  return s.Consume(']');
}

bool Scalar(Scanner& s, Parameter* out) {
  const char c = s.Peek();
  if (c == '"') {
    std::string_view v;
    if (!s.String(&v)) return false;
    *out = std::string(v);
    return true;
  }
  if (c == 't' || c == 'f') {
    const bool v = c == 't';
    if (!s.Literal(v ? "true" : "false")) return false;
    *out = v;
    return true;
  }
  std::string_view text;
  bool integral;
  if (!s.Number(&text, &integral)) return false;
  if (integral) {
    int64_t v;
    const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || ptr != text.data() + text.size()) return false;  // out of range
    *out = v;
    return true;
  }
  double d;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), d);
  if (ec != std::errc() || ptr != text.data() + text.size()) return false;
  *out = d;
  return true;
}

bool ParametersObject(Scanner& s, Parameters* out) {
  return Object(s, [&](std::string_view key) {
    Parameter value;
    if (!Scalar(s, &value)) return false;
    (*out)[std::string(key)] = std::move(value);
    return true;
  });
}

// FLT_MAX plus half an ulp: the general decoder rejects values that round to
// infinity as a float, so they leave the subset.
const double kFloatLimit = static_cast<double>(FLT_MAX) + std::ldexp(1.0, 103);

bool Data(Scanner& s, DataType type, std::string* out, int depth) {
  if (depth > kMaxDataDepth) return false;
  return Array(s, [&] {
    if (s.Peek() == '[') return Data(s, type, out, depth + 1);
    double d;
    std::string_view text;
    bool integral;
    if (!s.Number(&text, &integral)) return false;
    const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), d);
    if (ec != std::errc() || ptr != text.data() + text.size()) return false;
    // "-0" is the integer 0 to the general decoder, so +0.0, not -0.0.
    if (integral && d == 0) d = 0.0;
    if (type == DataType::kFp32) {
      if (std::fabs(d) >= kFloatLimit) return false;
      const float f = static_cast<float>(d);
      out->append(reinterpret_cast<const char*>(&f), sizeof(f));
    } else {
      out->append(reinterpret_cast<const char*>(&d), sizeof(d));
    }
    return true;
  });
}

bool TensorObject(Scanner& s, Tensor* out) {
  // 'data' may come before 'datatype': keep its span and decode it after.
  std::string_view datatype;
  bool has_shape = false;
  bool has_data = false;
  Scanner data_scan("");
  bool ok = Object(s, [&](std::string_view key) {
    if (key == "name") {
      std::string_view name;
      if (!s.String(&name)) return false;
      out->name = name;
      return true;
    }
    if (key == "datatype") return s.String(&datatype);
    if (key == "shape") {
      has_shape = true;
      return Array(s, [&] {
        std::string_view text;
        bool integral;
        if (!s.Number(&text, &integral) || !integral || text[0] == '-') return false;
        int64_t dim;
        const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), dim);
        if (ec != std::errc() || ptr != text.data() + text.size()) return false;
        out->shape.push_back(dim);
        return true;
      });
    }
    if (key == "data") {
      has_data = true;
      data_scan = s;
      return s.SkipValue();
    }
    if (key == "parameters") return false;  // binary_data_size and friends
    return s.SkipValue();
  });
  if (!ok || out->name.empty() || !has_shape || !has_data) return false;
  if (datatype == "FP32") {
    out->datatype = DataType::kFp32;
  } else if (datatype == "FP64") {
    out->datatype = DataType::kFp64;
  } else {
    return false;
  }
  int64_t count = 1;
  for (const int64_t dim : out->shape) {
    if (dim > (int64_t{1} << 40) || count > (int64_t{1} << 40) / std::max<int64_t>(dim, 1)) {
      return false;
    }
    count *= dim;
  }
  out->data.reserve(static_cast<size_t>(count) * DataTypeSize(out->datatype));
  if (data_scan.Peek() != '[' || !Data(data_scan, out->datatype, &out->data, 0)) return false;
  return out->data.size() == static_cast<size_t>(count) * DataTypeSize(out->datatype);
}

bool Tensors(Scanner& s, std::vector<Tensor>* out) {
  std::set<std::string> names;
  return Array(s, [&] {
    Tensor tensor;
    if (!TensorObject(s, &tensor) || !names.insert(tensor.name).second) return false;
    out->push_back(std::move(tensor));
    return true;
  });
}

}  // namespace

std::optional<InferenceRequest> FastDecodeInferRequest(std::string_view body) {
  Scanner s(body);
  InferenceRequest request;
  bool has_inputs = false;
  const bool ok = Object(s, [&](std::string_view key) {
    if (key == "id") {
      std::string_view id;
      if (!s.String(&id)) return false;
      request.id = id;
      return true;
    }
    if (key == "parameters") return ParametersObject(s, &request.parameters);
    if (key == "inputs") {
      has_inputs = true;
      return Tensors(s, &request.inputs);
    }
    if (key == "outputs") {
      std::set<std::string> names;
      return Array(s, [&] {
        RequestedOutput output;
        const bool fine = Object(s, [&](std::string_view k) {
          if (k == "name") {
            std::string_view name;
            if (!s.String(&name)) return false;
            output.name = name;
            return true;
          }
          if (k == "parameters") return ParametersObject(s, &output.parameters);
          return s.SkipValue();
        });
        if (!fine || output.name.empty() || !names.insert(output.name).second) return false;
        request.outputs.push_back(std::move(output));
        return true;
      });
    }
    return s.SkipValue();
  });
  if (!ok || !has_inputs || !s.AtEnd()) return std::nullopt;
  return request;
}

std::optional<InferenceResponse> FastDecodeInferResponse(std::string_view body) {
  Scanner s(body);
  InferenceResponse response;
  bool has_outputs = false;
  const bool ok = Object(s, [&](std::string_view key) {
    std::string* field = key == "model_name"      ? &response.model_name
                         : key == "model_version" ? &response.model_version
                         : key == "id"            ? &response.id
                                                  : nullptr;
    if (field != nullptr) {
      std::string_view value;
      if (!s.String(&value)) return false;
      *field = value;
      return true;
    }
    if (key == "parameters") return ParametersObject(s, &response.parameters);
    if (key == "outputs") {
      has_outputs = true;
      return Tensors(s, &response.outputs);
    }
    return s.SkipValue();
  });
  if (!ok || !has_outputs || !s.AtEnd()) return std::nullopt;
  return response;
}

}  // namespace somm::oip::internal
