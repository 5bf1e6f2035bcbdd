// The gRPC inference request codec (frontend/grpc/grpc_codec.h) on hostile
// bytes: protobuf parses a ModelInferRequest (as gRPC does before our
// handler runs), then DecodeInferRequest turns it into somm's request:
// raw_input_contents against shapes and datatypes, typed contents,
// parameters. Invariant: a request that decodes re-encodes and decodes again
// to the same tensors.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "frontend/grpc/grpc_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  inference::ModelInferRequest proto;
  if (!proto.ParseFromArray(data, static_cast<int>(size))) return 0;
  somm::InferenceRequest request;
  if (!somm::grpc_codec::DecodeInferRequest(proto, &request).ok()) return 0;
  inference::ModelInferRequest again;
  if (!somm::grpc_codec::EncodeInferRequest(request, &again).ok()) std::abort();
  somm::InferenceRequest decoded;
  if (!somm::grpc_codec::DecodeInferRequest(again, &decoded).ok()) std::abort();
  if (decoded.inputs.size() != request.inputs.size()) std::abort();
  for (size_t i = 0; i < request.inputs.size(); ++i) {
    const somm::Tensor& a = request.inputs[i];
    const somm::Tensor& b = decoded.inputs[i];
    if (a.name != b.name || a.datatype != b.datatype || a.shape != b.shape || a.data != b.data) {
      std::abort();
    }
  }
  return 0;
}
