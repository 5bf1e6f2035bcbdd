#include "frontend/http/tensor_json.h"

#include <algorithm>
#include <bit>
#include <cfloat>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>

namespace somm::oip::internal {
namespace {

static_assert(std::endian::native == std::endian::little,
              "the OIP wire format and somm::Tensor are little-endian; add byte swaps here");

// Deeper nesting than any real tensor rank; bounds the recursion on hostile
// input such as [[[[...]]]].
constexpr int kMaxNesting = 64;

// Longest JSON value quoted back in an error message.
constexpr size_t kMaxQuoted = 40;

std::string Quote(const Json& value) {
  std::string s = DumpJson(value);
  if (s.size() > kMaxQuoted) s = s.substr(0, kMaxQuoted) + "...";
  return s;
}

Status CountElements(const Json& value, int depth, const std::string& what, int64_t* count) {
  if (!value.is_array()) {
    ++*count;
    return Status::Ok();
  }
  if (depth >= kMaxNesting) {
    return InvalidArgument(what + ": 'data' is nested deeper than " + std::to_string(kMaxNesting) +
                           " levels");
  }
  for (const Json& element : value) {
    SOMM_RETURN_IF_ERROR(CountElements(element, depth + 1, what, count));
  }
  return Status::Ok();
}

template <typename T>
bool ToInteger(const Json& v, T* out) {
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (!std::in_range<T>(u)) return false;
    *out = static_cast<T>(u);
    return true;
  }
  if (v.is_number_integer()) {
    const int64_t s = v.get<int64_t>();
    if (!std::in_range<T>(s)) return false;
    *out = static_cast<T>(s);
    return true;
  }
  return false;
}

// Converts without undefined behaviour: values that would round to a finite
// float are accepted, larger ones rejected.
bool ToFloat(const Json& v, float* out) {
  if (!v.is_number()) return false;
  const double d = v.get<double>();
  // FLT_MAX plus half an ulp (2^104 / 2): the rounding boundary to infinity.
  static const double kLimit = static_cast<double>(FLT_MAX) + std::ldexp(1.0, 103);
  if (std::fabs(d) >= kLimit) return false;
  *out = static_cast<float>(d);
  return true;
}

template <typename T>
std::string IntegerRange() {
  return "an integer in [" + std::to_string(std::numeric_limits<T>::min()) + ", " +
         std::to_string(std::numeric_limits<T>::max()) + "]";
}

std::string Expectation(DataType type) {
  switch (type) {
    case DataType::kBool:
      return "true or false";
    case DataType::kUint8:
      return IntegerRange<uint8_t>();
    case DataType::kUint16:
      return IntegerRange<uint16_t>();
    case DataType::kUint32:
      return IntegerRange<uint32_t>();
    case DataType::kUint64:
      return IntegerRange<uint64_t>();
    case DataType::kInt8:
      return IntegerRange<int8_t>();
    case DataType::kInt16:
      return IntegerRange<int16_t>();
    case DataType::kInt32:
      return IntegerRange<int32_t>();
    case DataType::kInt64:
      return IntegerRange<int64_t>();
    case DataType::kFp16:
      return "a number within FP16 range";
    case DataType::kBf16:
      return "a number within BF16 range";
    case DataType::kFp32:
      return "a number within FP32 range";
    case DataType::kFp64:
      return "a number";
    case DataType::kBytes:
      return "a string";
    case DataType::kInvalid:
      break;
  }
  return "a valid value";
}

template <typename T>
void Store(std::string* out, int64_t index, T value) {
  std::memcpy(out->data() + index * static_cast<int64_t>(sizeof(T)), &value, sizeof(T));
}

template <typename T>
bool StoreInteger(const Json& v, std::string* out, int64_t index) {
  T value;
  if (!ToInteger(v, &value)) return false;
  Store(out, index, value);
  return true;
}

// Writes one scalar at `index` of a fixed-size tensor, or appends one BYTES
// element. Returns false when the value does not fit the datatype.
bool StoreElement(const Json& v, DataType type, std::string* out, int64_t index) {
  switch (type) {
    case DataType::kBool:
      if (!v.is_boolean()) return false;
      Store<uint8_t>(out, index, v.get<bool>() ? 1 : 0);
      return true;
    case DataType::kUint8:
      return StoreInteger<uint8_t>(v, out, index);
    case DataType::kUint16:
      return StoreInteger<uint16_t>(v, out, index);
    case DataType::kUint32:
      return StoreInteger<uint32_t>(v, out, index);
    case DataType::kUint64:
      return StoreInteger<uint64_t>(v, out, index);
    case DataType::kInt8:
      return StoreInteger<int8_t>(v, out, index);
    case DataType::kInt16:
      return StoreInteger<int16_t>(v, out, index);
    case DataType::kInt32:
      return StoreInteger<int32_t>(v, out, index);
    case DataType::kInt64:
      return StoreInteger<int64_t>(v, out, index);
    case DataType::kFp16:
    case DataType::kBf16: {
      float f;
      if (!ToFloat(v, &f)) return false;
      const uint16_t bits = type == DataType::kFp16 ? FloatToHalf(f) : FloatToBf16(f);
      const float back = type == DataType::kFp16 ? HalfToFloat(bits) : Bf16ToFloat(bits);
      if (std::isinf(back)) return false;  // finite input overflowed the narrow type
      Store(out, index, bits);
      return true;
    }
    case DataType::kFp32: {
      float f;
      if (!ToFloat(v, &f)) return false;
      Store(out, index, f);
      return true;
    }
    case DataType::kFp64:
      if (!v.is_number()) return false;
      Store(out, index, v.get<double>());
      return true;
    case DataType::kBytes: {
      if (!v.is_string()) return false;
      const std::string& s = v.get_ref<const std::string&>();
      if (s.size() > std::numeric_limits<uint32_t>::max()) return false;
      const uint32_t len = static_cast<uint32_t>(s.size());
      out->append(reinterpret_cast<const char*>(&len), sizeof(len));
      out->append(s);
      return true;
    }
    case DataType::kInvalid:
      break;
  }
  return false;
}

bool IsFloatType(DataType type) {
  return type == DataType::kFp16 || type == DataType::kBf16 || type == DataType::kFp32 ||
         type == DataType::kFp64;
}

struct Filler {
  DataType type;
  const std::string& what;
  bool null_is_nan;
  std::string* out;
  int64_t index = 0;

  Status Fill(const Json& value) {
    if (value.is_array()) {
      for (const Json& element : value) SOMM_RETURN_IF_ERROR(Fill(element));
      return Status::Ok();
    }
    static const Json kNan = std::numeric_limits<double>::quiet_NaN();
    const bool as_nan = null_is_nan && value.is_null() && IsFloatType(type);
    if (!StoreElement(as_nan ? kNan : value, type, out, index)) {
      return InvalidArgument(what + ": data element " + std::to_string(index) + " must be " +
                             Expectation(type) + " for " + DataTypeName(type) + ", got " +
                             Quote(value));
    }
    ++index;
    return Status::Ok();
  }
};

// The double whose shortest decimal form is the float's shortest decimal form,
// so 0.1f prints as 0.1 rather than 0.10000000149011612. Parsing that text
// back and narrowing to float gives the same float.
double FloatForJson(float f) {
  if (!std::isfinite(f)) return f;
  char buf[32];
  const auto printed = std::to_chars(buf, buf + sizeof(buf), f);
  double d = f;
  std::from_chars(buf, printed.ptr, d);
  return d;
}

template <typename T, typename Convert>
Json EncodeFixed(const Tensor& tensor, Convert convert) {
  const size_t n = tensor.data.size() / sizeof(T);
  Json array = Json::array();
  auto& elements = array.get_ref<Json::array_t&>();
  elements.reserve(n);
  for (size_t i = 0; i < n; ++i) elements.emplace_back(convert(LoadElement<T>(tensor.data, i)));
  return array;
}

template <typename T>
Json EncodeFixed(const Tensor& tensor) {
  return EncodeFixed<T>(tensor, [](T v) { return v; });
}

Json EncodeBytes(const Tensor& tensor) {
  Json array = Json::array();
  size_t offset = 0;
  while (offset + 4 <= tensor.data.size()) {
    uint32_t len;
    std::memcpy(&len, tensor.data.data() + offset, 4);
    offset += 4;
    const size_t take = std::min<size_t>(len, tensor.data.size() - offset);
    array.emplace_back(tensor.data.substr(offset, take));
    offset += take;
  }
  return array;
}

}  // namespace

Status DecodeTensorData(const Json& data, DataType datatype, const Shape& shape,
                        int64_t element_count, const std::string& what, bool null_is_nan,
                        std::string* out) {
  if (!data.is_array()) {
    return InvalidArgument(what + ": 'data' must be an array, got " + JsonTypeName(data));
  }
  int64_t found = 0;
  SOMM_RETURN_IF_ERROR(CountElements(data, 0, what, &found));
  if (found != element_count) {
    return InvalidArgument(what + " has shape " + ShapeToString(shape) + " (" +
                           std::to_string(element_count) + " elements) but 'data' holds " +
                           std::to_string(found) + " elements");
  }
  out->clear();
  if (datatype != DataType::kBytes) {
    out->resize(static_cast<size_t>(element_count) * DataTypeSize(datatype));
  }
  Filler filler{datatype, what, null_is_nan, out};
  return filler.Fill(data);
}

Json EncodeTensorData(const Tensor& tensor) {
  switch (tensor.datatype) {
    case DataType::kBool:
      return EncodeFixed<uint8_t>(tensor, [](uint8_t v) { return v != 0; });
    case DataType::kUint8:
      return EncodeFixed<uint8_t>(tensor);
    case DataType::kUint16:
      return EncodeFixed<uint16_t>(tensor);
    case DataType::kUint32:
      return EncodeFixed<uint32_t>(tensor);
    case DataType::kUint64:
      return EncodeFixed<uint64_t>(tensor);
    case DataType::kInt8:
      return EncodeFixed<int8_t>(tensor);
    case DataType::kInt16:
      return EncodeFixed<int16_t>(tensor);
    case DataType::kInt32:
      return EncodeFixed<int32_t>(tensor);
    case DataType::kInt64:
      return EncodeFixed<int64_t>(tensor);
    case DataType::kFp16:
      return EncodeFixed<uint16_t>(tensor, [](uint16_t v) { return FloatForJson(HalfToFloat(v)); });
    case DataType::kBf16:
      return EncodeFixed<uint16_t>(tensor, [](uint16_t v) { return FloatForJson(Bf16ToFloat(v)); });
    case DataType::kFp32:
      return EncodeFixed<float>(tensor, FloatForJson);
    case DataType::kFp64:
      return EncodeFixed<double>(tensor);
    case DataType::kBytes:
      return EncodeBytes(tensor);
    case DataType::kInvalid:
      break;
  }
  return Json::array();
}

}  // namespace somm::oip::internal
