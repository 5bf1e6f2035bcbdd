// The OIP inference request decoder (oip_json.h) on hostile bytes: JSON, and
// JSON followed by a binary section (Triton's binary tensor extension).
//
// The first byte picks the form: even = plain JSON (no
// Inference-Header-Content-Length); odd = binary, with the header length
// taken from the next two bytes (modulo the body's size + 2, so lengths just
// past the end are tried too). The rest is the body.
//
// Differential check: wherever the simdjson fast path answers, the general
// decoder must accept the same body and give the same request
// (fast_infer_json.h promises that), and DecodeInferRequest, which tries the
// fast path first, must agree with the general decoder on ok/error.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string_view>

#include "frontend/http/fast_infer_json.h"
#include "frontend/http/oip_json.h"

namespace {

using somm::InferenceRequest;
using somm::Tensor;

void Check(bool ok) {
  if (!ok) std::abort();
}

bool SameTensor(const Tensor& a, const Tensor& b) {
  return a.name == b.name && a.datatype == b.datatype && a.shape == b.shape && a.data == b.data;
}

bool SameRequest(const InferenceRequest& a, const InferenceRequest& b) {
  if (a.id != b.id || a.parameters != b.parameters || a.inputs.size() != b.inputs.size() ||
      a.outputs.size() != b.outputs.size()) {
    return false;
  }
  for (size_t i = 0; i < a.inputs.size(); ++i) {
    if (!SameTensor(a.inputs[i], b.inputs[i])) return false;
  }
  for (size_t i = 0; i < a.outputs.size(); ++i) {
    if (a.outputs[i].name != b.outputs[i].name ||
        a.outputs[i].parameters != b.outputs[i].parameters) {
      return false;
    }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  std::optional<size_t> header_length;
  const std::string_view body(reinterpret_cast<const char*>(data) + 3, size - 3);
  if (data[0] & 1) header_length = (size_t{data[1]} << 8 | data[2]) % (body.size() + 2);

  const auto general = somm::oip::internal::GeneralDecodeInferRequest(body, header_length);
  const auto fast = somm::oip::internal::FastDecodeInferRequest(body, header_length);
  if (fast) {
    Check(general.ok());
    Check(SameRequest(*fast, general.value()));
  }
  const auto decoded = somm::oip::DecodeInferRequest(body, header_length);
  Check(decoded.ok() == general.ok());
  if (decoded.ok()) (void)somm::oip::BinaryOutputs::FromRequest(decoded.value());
  return 0;
}
