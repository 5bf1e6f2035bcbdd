// Tensor contents <-> the OIP JSON "data" array.
//
// Private to the codec library (see json_util.h). Decoding accepts flat or
// nested arrays in row-major order, counts the scalars first (so a count
// mismatch reports both numbers), then converts each one with the type
// checked strictly against the datatype:
//   BOOL      true / false only
//   UINT*/INT* JSON integers within the type's range (1.0 is not an integer)
//   FP*       any JSON number; finite values beyond the type's range are
//             rejected rather than turned into infinity. FP16 and BF16 are
//             rounded to nearest even.
//   BYTES     strings, stored with the OIP 4-byte little-endian length prefix
// The result is raw little-endian bytes, the somm::Tensor layout; the host is
// assumed little-endian (checked at compile time in tensor_json.cc).
//
// Encoding produces a flat array. NaN and infinity have no JSON form and come
// out as null (nlohmann's behaviour), which response decoding reads back as
// NaN; clients that must tell infinity from NaN should ask for binary outputs.
#pragma once

#include <cstring>
#include <string>

#include "common/status.h"
#include "common/tensor.h"
#include "frontend/http/json_util.h"

namespace somm::oip::internal {

// Decodes `data` for a tensor of `datatype` whose shape holds `element_count`
// elements. `what` names the tensor in errors ("input 'x'"), `shape` is quoted
// in the count-mismatch message. null_is_nan accepts null as NaN for FP types:
// the reading of what EncodeTensorData writes for NaN and infinity, used for
// responses only (requests stay strict).
Status DecodeTensorData(const Json& data, DataType datatype, const Shape& shape,
                        int64_t element_count, const std::string& what, bool null_is_nan,
                        std::string* out);

// Encodes tensor.data (already checked with Tensor::CheckByteSize) as a flat
// JSON array.
Json EncodeTensorData(const Tensor& tensor);

// Element `index` of a tensor's raw bytes as T (unaligned-safe).
template <typename T>
T LoadElement(const std::string& data, size_t index) {
  T value;
  std::memcpy(&value, data.data() + index * sizeof(T), sizeof(T));
  return value;
}

}  // namespace somm::oip::internal
