#include "frontend/http/json_writer.h"

#include <charconv>
#include <cmath>
#include <cstring>
#include <variant>

#include "frontend/http/json_util.h"
#include "frontend/http/tensor_json.h"

namespace somm::oip::internal {
namespace {

// A number printed without '.', 'e' or "inf"/"nan" would read back as an
// integer; ".0" keeps it a float, as nlohmann writes it.
void KeepFloating(std::string& out, size_t start) {
  for (size_t i = start; i < out.size(); ++i) {
    const char c = out[i];
    if (c == '.' || c == 'e' || c == 'E') return;
  }
  out.append(".0");
}

template <typename T>
void AppendChars(std::string& out, T value) {
  char buf[32];
  const auto printed = std::to_chars(buf, buf + sizeof(buf), value);
  out.append(buf, static_cast<size_t>(printed.ptr - buf));
}

// Shortest form of a float or double; null when not finite, as nlohmann.
template <typename T>
void AppendFloating(std::string& out, T value) {
  if (!std::isfinite(value)) {
    out.append("null");
    return;
  }
  const size_t start = out.size();
  AppendChars(out, value);
  KeepFloating(out, start);
}

template <typename T, typename Write>
void WriteElements(const Tensor& tensor, std::string& out, Write write) {
  const size_t n = tensor.data.size() / sizeof(T);
  out.push_back('[');
  for (size_t i = 0; i < n; ++i) {
    if (i > 0) out.push_back(',');
    write(LoadElement<T>(tensor.data, i));
  }
  out.push_back(']');
}

}  // namespace

void JsonWriter::String(std::string_view s) {
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u >= 0x7f || c == '"' || c == '\\') {
      out_.append(DumpJson(Json(std::string(s))));
      return;
    }
  }
  out_.push_back('"');
  out_.append(s);
  out_.push_back('"');
}

void JsonWriter::Key(std::string_view key) {
  String(key);
  out_.push_back(':');
}

void JsonWriter::Int(int64_t v) { AppendChars(out_, v); }
void JsonWriter::Uint(uint64_t v) { AppendChars(out_, v); }

void JsonWriter::Double(double v) { AppendFloating(out_, v); }
void JsonWriter::Float(float v) { AppendFloating(out_, v); }

void JsonWriter::Parameters(const somm::Parameters& parameters) {
  out_.push_back('{');
  bool first = true;
  for (const auto& [key, value] : parameters) {
    if (!first) out_.push_back(',');
    first = false;
    Key(key);
    std::visit(
        [this](const auto& v) {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, bool>) {
            Bool(v);
          } else if constexpr (std::is_same_v<T, int64_t>) {
            Int(v);
          } else if constexpr (std::is_same_v<T, double>) {
            Double(v);
          } else {
            String(v);
          }
        },
        value);
  }
  out_.push_back('}');
}

void JsonWriter::Shape(const somm::Shape& shape) {
  out_.push_back('[');
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) out_.push_back(',');
    Int(shape[i]);
  }
  out_.push_back(']');
}

void JsonWriter::TensorData(const Tensor& tensor) {
  auto as_int = [this](auto v) { AppendChars(out_, v); };
  switch (tensor.datatype) {
    case DataType::kBool:
      return WriteElements<uint8_t>(tensor, out_, [this](uint8_t v) { Bool(v != 0); });
    case DataType::kUint8:
      return WriteElements<uint8_t>(tensor, out_, as_int);
    case DataType::kUint16:
      return WriteElements<uint16_t>(tensor, out_, as_int);
    case DataType::kUint32:
      return WriteElements<uint32_t>(tensor, out_, as_int);
    case DataType::kUint64:
      return WriteElements<uint64_t>(tensor, out_, as_int);
    case DataType::kInt8:
      return WriteElements<int8_t>(tensor, out_, [this](int8_t v) { Int(v); });
    case DataType::kInt16:
      return WriteElements<int16_t>(tensor, out_, as_int);
    case DataType::kInt32:
      return WriteElements<int32_t>(tensor, out_, as_int);
    case DataType::kInt64:
      return WriteElements<int64_t>(tensor, out_, as_int);
    case DataType::kFp16:
      return WriteElements<uint16_t>(tensor, out_, [this](uint16_t v) { Float(HalfToFloat(v)); });
    case DataType::kBf16:
      return WriteElements<uint16_t>(tensor, out_, [this](uint16_t v) { Float(Bf16ToFloat(v)); });
    case DataType::kFp32:
      return WriteElements<float>(tensor, out_, [this](float v) { Float(v); });
    case DataType::kFp64:
      return WriteElements<double>(tensor, out_, [this](double v) { Double(v); });
    case DataType::kBytes: {
      out_.push_back('[');
      size_t offset = 0;
      bool first = true;
      while (offset + 4 <= tensor.data.size()) {
        uint32_t len;
        std::memcpy(&len, tensor.data.data() + offset, 4);
        offset += 4;
        const size_t take = std::min<size_t>(len, tensor.data.size() - offset);
        if (!first) out_.push_back(',');
        first = false;
        String(std::string_view(tensor.data).substr(offset, take));
        offset += take;
      }
      out_.push_back(']');
      return;
    }
    case DataType::kInvalid:
      break;
  }
  out_.append("[]");
}

}  // namespace somm::oip::internal
