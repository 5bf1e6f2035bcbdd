#include "common/tensor.h"

#include <array>
#include <cstring>
#include <utility>

namespace somm {
namespace {

struct DataTypeInfo {
  DataType type;
  const char* name;
  size_t size;
};

constexpr std::array<DataTypeInfo, 14> kDataTypes = {{
    {DataType::kBool, "BOOL", 1},
    {DataType::kUint8, "UINT8", 1},
    {DataType::kUint16, "UINT16", 2},
    {DataType::kUint32, "UINT32", 4},
    {DataType::kUint64, "UINT64", 8},
    {DataType::kInt8, "INT8", 1},
    {DataType::kInt16, "INT16", 2},
    {DataType::kInt32, "INT32", 4},
    {DataType::kInt64, "INT64", 8},
    {DataType::kFp16, "FP16", 2},
    {DataType::kBf16, "BF16", 2},
    {DataType::kFp32, "FP32", 4},
    {DataType::kFp64, "FP64", 8},
    {DataType::kBytes, "BYTES", 0},
}};

}  // namespace

DataType DataTypeFromString(std::string_view name) {
  for (const auto& info : kDataTypes) {
    if (name == info.name) return info.type;
  }
  return DataType::kInvalid;
}

const char* DataTypeName(DataType type) {
  for (const auto& info : kDataTypes) {
    if (type == info.type) return info.name;
  }
  return "INVALID";
}

size_t DataTypeSize(DataType type) {
  for (const auto& info : kDataTypes) {
    if (type == info.type) return info.size;
  }
  return 0;
}

int64_t ElementCount(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return -1;
    n *= d;
  }
  return n;
}

std::string ShapeToString(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ",";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

Status Tensor::CheckByteSize() const {
  const int64_t count = ElementCount(shape);
  if (count < 0) {
    return InvalidArgument("tensor '" + name + "' has a negative dimension in shape " +
                           ShapeToString(shape));
  }
  if (datatype == DataType::kBytes) {
    // Walk the length prefixes: they must account for every byte.
    size_t offset = 0;
    for (int64_t i = 0; i < count; ++i) {
      if (offset + 4 > data.size()) {
        return InvalidArgument("tensor '" + name + "': BYTES data holds fewer than " +
                               std::to_string(count) + " elements");
      }
      uint32_t len;
      std::memcpy(&len, data.data() + offset, 4);
      offset += 4 + len;
    }
    if (offset != data.size()) {
      return InvalidArgument("tensor '" + name + "': BYTES data size does not match shape " +
                             ShapeToString(shape));
    }
    return Status::Ok();
  }
  const size_t expected = static_cast<size_t>(count) * DataTypeSize(datatype);
  if (data.size() != expected) {
    return InvalidArgument("tensor '" + name + "': shape " + ShapeToString(shape) + " and " +
                           DataTypeName(datatype) + " need " + std::to_string(expected) +
                           " bytes, got " + std::to_string(data.size()));
  }
  return Status::Ok();
}

uint16_t FloatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  int32_t exp = static_cast<int32_t>((x >> 23) & 0xff) - 127 + 15;
  uint32_t mant = x & 0x7fffffu;
  if (((x >> 23) & 0xff) == 0xff) {  // inf or nan
    return static_cast<uint16_t>(sign | 0x7c00u | (mant ? 0x200u : 0));
  }
  if (exp >= 31) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (exp <= 0) {
    if (exp < -10) return static_cast<uint16_t>(sign);  // underflow -> 0
    mant |= 0x800000u;
    const uint32_t shift = static_cast<uint32_t>(14 - exp);
    uint32_t half_mant = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (half_mant & 1))) ++half_mant;
    return static_cast<uint16_t>(sign | half_mant);
  }
  uint32_t half = sign | (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
  const uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1))) ++half;
  return static_cast<uint16_t>(half);
}

float HalfToFloat(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ffu;
  uint32_t x;
  if (exp == 0) {
    if (mant == 0) {
      x = sign;
    } else {  // subnormal: normalise
      exp = 127 - 15 + 1;
      while (!(mant & 0x400u)) {
        mant <<= 1;
        --exp;
      }
      mant &= 0x3ffu;
      x = sign | (exp << 23) | (mant << 13);
    }
  } else if (exp == 31) {
    x = sign | 0x7f800000u | (mant << 13);
  } else {
    x = sign | ((exp - 15 + 127) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

uint16_t FloatToBf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40);  // nan
  const uint32_t rounding = 0x7fffu + ((x >> 16) & 1);
  return static_cast<uint16_t>((x + rounding) >> 16);
}

float Bf16ToFloat(uint16_t b) {
  const uint32_t x = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

}  // namespace somm
