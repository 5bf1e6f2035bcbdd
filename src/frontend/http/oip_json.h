// The Open Inference Protocol v2 REST inference messages, both directions,
// with Triton's binary tensor data extension.
//
// The server side (HttpFrontend) decodes requests and encodes responses; the
// client side (HttpClient, the load generator) encodes requests and decodes
// responses. Bodies follow the KServe v2 REST spec: a JSON object, optionally
// followed by a binary section whose start is given by the
// Inference-Header-Content-Length header. Tensors that carry
// `parameters.binary_data_size` take that many bytes from the binary section,
// in the order they appear in the JSON; every binary byte must be claimed.
//
// Decoding never throws and rejects anything the spec does not allow with an
// InvalidArgument Status whose message names the field, the tensor, its shape
// and the problem. Unknown top-level fields (e.g. "model_name", which Triton's
// examples send) are ignored for forward compatibility. The wire-only
// parameter binary_data_size is consumed; binary_data_output (request) and
// binary_data (requested output) stay in the parameters so the encoder of the
// response can honour them (see BinaryOutputs).
//
// Thread-safety: free functions on values.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"
#include "api/inference.h"

namespace somm::oip {

// The binary extension's header, request and response.
inline constexpr char kInferenceHeaderContentLength[] = "Inference-Header-Content-Length";
// Parameter names of the binary extension.
inline constexpr char kBinaryDataSize[] = "binary_data_size";
inline constexpr char kBinaryData[] = "binary_data";
inline constexpr char kBinaryDataOutput[] = "binary_data_output";

// An encoded body: a JSON object, then the binary section when some tensor
// went binary. json_size is then the Inference-Header-Content-Length value
// (body.size() - json_size binary bytes follow); nullopt means plain JSON.
struct EncodedBody {
  std::string body;
  std::optional<size_t> json_size;
};

// Which response outputs go binary: request parameter binary_data_output sets
// the default, a requested output's binary_data overrides it (Triton's rule).
class BinaryOutputs {
 public:
  BinaryOutputs() = default;
  explicit BinaryOutputs(bool all) : all_(all) {}
  // Reads the request's binary_data_output and outputs[].binary_data; a
  // non-boolean value is InvalidArgument.
  static StatusOr<BinaryOutputs> FromRequest(const InferenceRequest& request);

  bool IsBinary(const std::string& output_name) const;

 private:
  bool all_ = false;
  std::map<std::string, bool> per_output_;
};

// Parses an Inference-Header-Content-Length value: decimal digits only.
StatusOr<size_t> ParseHeaderLength(std::string_view value);

// Server side. header_length is the Inference-Header-Content-Length value,
// nullopt when the header was absent (the whole body is JSON). The caller sets
// model_name and model_version from the URL.
StatusOr<InferenceRequest> DecodeInferRequest(std::string_view body,
                                              std::optional<size_t> header_length);
namespace internal {
// DecodeInferRequest without its fast path (fast_infer_json.h): the tests
// and bench/json_decode.cc compare the two.
StatusOr<InferenceRequest> GeneralDecodeInferRequest(std::string_view body,
                                                     std::optional<size_t> header_length);
StatusOr<InferenceResponse> GeneralDecodeInferResponse(std::string_view body,
                                                       std::optional<size_t> header_length);
}  // namespace internal
// Fails (Internal) only when an output's bytes disagree with its shape.
StatusOr<EncodedBody> EncodeInferResponse(const InferenceResponse& response,
                                          const BinaryOutputs& binary);

// How a client encodes its request.
struct RequestEncoding {
  // Send every input in the binary section rather than as JSON "data".
  bool binary_inputs = false;
  // Add binary_data_output: true to the request parameters (unless the
  // request already sets it), so every output comes back binary unless a
  // requested output's binary_data says otherwise.
  bool binary_outputs = false;
};

// Client side. Fails (InvalidArgument) only when an input's bytes disagree
// with its shape.
StatusOr<EncodedBody> EncodeInferRequest(const InferenceRequest& request, RequestEncoding encoding);
StatusOr<InferenceResponse> DecodeInferResponse(std::string_view body,
                                                std::optional<size_t> header_length);

// {"error": "<message>"}, the body of every OIP error response.
std::string EncodeError(std::string_view message);
// The message of an error body; the raw body (truncated) when it is not one.
std::string DecodeError(std::string_view body);

// A REST client's reading of a reply with a non-2xx HTTP status: the
// Status its code maps to (StatusCodeFromHttp), carrying the server's
// message ("HTTP <status>" when the body has none).
Status ErrorFromReply(int http_status, std::string_view body);
// A REST client's reading of an infer reply: ErrorFromReply unless the status
// is 200; a 200 body that does not decode is INTERNAL, naming `server`
// ("host:port"), since the fault is the server's.
StatusOr<InferenceResponse> DecodeInferReply(int http_status, std::string_view body,
                                             std::optional<size_t> json_size,
                                             std::string_view server);

}  // namespace somm::oip
