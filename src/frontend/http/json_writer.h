// JsonWriter: appends JSON text to a string directly, for the one document
// written per query (the inference response), where building an nlohmann
// tree first cost a fifth of the REST server's CPU.
//
// The text reads back to the same values as DumpJson of the equivalent tree:
// doubles keep a fraction or exponent (3.0, not 3) so their type survives,
// floats print their shortest form (0.1, not 0.10000000149011612),
// non-finite numbers are null, and a string that is not plain printable
// ASCII goes through nlohmann's escaping (invalid UTF-8 becomes U+FFFD).
// The caller writes commas with Comma() and keeps the nesting right.
//
// Thread-safety: one writer per thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/tensor.h"
#include "api/inference.h"

namespace somm::oip::internal {

class JsonWriter {
 public:
  explicit JsonWriter(std::string* out) : out_(*out) {}

  void Raw(std::string_view text) { out_.append(text); }
  void String(std::string_view s);
  // "key": (quoted and escaped like any string)
  void Key(std::string_view key);
  void Int(int64_t v);
  void Uint(uint64_t v);
  void Double(double v);
  void Float(float v);
  void Bool(bool v) { out_.append(v ? "true" : "false"); }
  void Parameters(const somm::Parameters& parameters);
  // The elements of a tensor as a flat JSON array, as EncodeTensorData.
  void TensorData(const Tensor& tensor);
  void Shape(const somm::Shape& shape);

 private:
  std::string& out_;
};

}  // namespace somm::oip::internal
