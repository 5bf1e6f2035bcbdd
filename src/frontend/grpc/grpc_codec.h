// grpc_codec: conversions between the generated Open Inference Protocol gRPC
// messages (proto/inference.proto) and somm's wire-independent types
// (api/inference.h), for both ends of the wire: the gRPC frontend decodes
// requests and encodes responses, the gRPC client does the reverse.
//
// Contract:
//   * Decoders treat their input as hostile. Every malformed message (unknown
//     datatype, negative or overflowing shape, wrong element or byte count,
//     raw and typed contents mixed, out-of-range typed values) comes back as
//     an InvalidArgument Status naming the tensor and the problem; nothing
//     throws, aborts or reads out of bounds.
//   * Tensors always leave as raw contents, which is what Triton sends and
//     what keeps FP16/BF16 representable. Typed contents are accepted on the
//     way in, from clients that prefer them.
//   * somm <-> gRPC status codes are mapped in transport/grpc/grpc_runtime.h,
//     below every protocol that answers over gRPC.
//   * Pure functions; safe to call from any thread.
//
// Only gRPC adapter code may include this header, since it pulls in the
// generated protobuf headers.
#pragma once

#include <grpcpp/support/status.h>

#include <string>

#include "common/status.h"
#include "common/tensor.h"
#include "proto/inference.grpc.pb.h"
#include "api/inference.h"
#include "api/inference_server.h"

namespace somm::grpc_codec {

using ProtoParameters = google::protobuf::Map<std::string, inference::InferParameter>;

// `what` names the owner in error messages, e.g. "request", "input 'x'".
Status DecodeParameters(const ProtoParameters& in, const std::string& what, Parameters* out);
void EncodeParameters(const Parameters& in, ProtoParameters* out);

// Builds a tensor from a datatype name, a shape and its raw bytes, checking
// that the bytes are exactly what the shape and datatype need. `role` is
// "input" or "output", for messages.
StatusOr<Tensor> TensorFromRaw(const std::string& role, const std::string& name,
                               const std::string& datatype,
                               const google::protobuf::RepeatedField<int64_t>& shape,
                               std::string raw);
// The same from typed contents (the field matching the datatype).
StatusOr<Tensor> TensorFromContents(const std::string& role, const std::string& name,
                                    const std::string& datatype,
                                    const google::protobuf::RepeatedField<int64_t>& shape,
                                    const inference::InferTensorContents& contents);

// Server side. The request's bytes are copied (the message is read as
// const). An empty model_name is accepted when the string
// parameter "task" is set: that is a task-form query (InferenceRequest::task).
Status DecodeInferRequest(const inference::ModelInferRequest& in, InferenceRequest* out);
// Moves the output bytes into `out`. An output whose bytes do not match its
// shape is a server bug and gives Internal.
Status EncodeInferResponse(InferenceResponse response, inference::ModelInferResponse* out);

// Client side. Inputs go out as raw_input_contents.
Status EncodeInferRequest(const InferenceRequest& in, inference::ModelInferRequest* out);
// Moves the output bytes out of `in`. Accepts raw or typed output contents.
StatusOr<InferenceResponse> DecodeInferResponse(inference::ModelInferResponse* in);

// Metadata, both directions.
void EncodeServerMetadata(const ServerMetadata& in, inference::ServerMetadataResponse* out);
ServerMetadata DecodeServerMetadata(const inference::ServerMetadataResponse& in);
void EncodeModelMetadata(const ModelMetadata& in, inference::ModelMetadataResponse* out);
ModelMetadata DecodeModelMetadata(const inference::ModelMetadataResponse& in);

}  // namespace somm::grpc_codec
