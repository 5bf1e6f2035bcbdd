// Tensor: the wire-independent form of one named input or output.
//
// Data is held as raw little-endian, row-major bytes, exactly as the Open
// Inference Protocol's binary extension and gRPC raw_*_contents carry it, so
// frontends decode once and the backend adapter wraps the bytes without a
// second conversion. BYTES tensors use the OIP layout: a 4-byte little-endian
// length before each element.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace somm {

enum class DataType {
  kInvalid = 0,
  kBool,
  kUint8,
  kUint16,
  kUint32,
  kUint64,
  kInt8,
  kInt16,
  kInt32,
  kInt64,
  kFp16,
  kBf16,
  kFp32,
  kFp64,
  kBytes,
};

// "FP32" <-> DataType::kFp32, the OIP spellings. Unknown names give kInvalid.
DataType DataTypeFromString(std::string_view name);
const char* DataTypeName(DataType type);
// Bytes per element; 0 for BYTES (variable) and kInvalid.
size_t DataTypeSize(DataType type);

using Shape = std::vector<int64_t>;

// Number of elements; -1 if any dim is negative.
int64_t ElementCount(const Shape& shape);
std::string ShapeToString(const Shape& shape);

struct Tensor {
  std::string name;
  DataType datatype = DataType::kInvalid;
  Shape shape;
  std::string data;  // raw bytes; size == ElementCount(shape) * DataTypeSize(datatype)

  // Checks that data holds exactly the bytes the shape and datatype imply.
  Status CheckByteSize() const;
};

// IEEE half <-> float, for JSON encoding of FP16 tensors.
uint16_t FloatToHalf(float f);
float HalfToFloat(uint16_t h);
// bfloat16 <-> float (round to nearest even).
uint16_t FloatToBf16(float f);
float Bf16ToFloat(uint16_t b);

}  // namespace somm
