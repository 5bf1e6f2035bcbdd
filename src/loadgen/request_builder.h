// RequestBuilder: the inference requests a bench run sends, built once before
// the load starts so the senders only copy them.
//
//   * From a file: an OIP REST request body (JSON, as `somm infer` takes),
//     decoded with oip::DecodeInferRequest. With batch size b > 1 every input
//     is repeated b times along dim 0 (a [1,64] sample becomes [b,64]).
//   * Synthetic: from the model's metadata, one input per declared input, a
//     leading -1 dim set to the batch size and random values (uniform [0,1)
//     for floats, [0,16) for integers, 0/1 for BOOL) from a seeded generator.
//     Any other -1 dim, or a BYTES input, needs --input: there is no
//     meaningful random value for it.
//   * From bytes (`--input-bytes FILE`, e.g. an encoded image for a
//     pipeline): the model's one BYTES input, one element per sample, each
//     element the file's bytes (OIP's BYTES layout: a 4-byte little-endian
//     length before each element). A model with another input, or none of
//     datatype BYTES, is refused naming its inputs.
//   * Trace rows add their SLO columns to the request parameters under the
//     same names (latency_slo_ms, min_accuracy, max_cost as doubles, task as
//     a string), which is how model-less queries carry requirements.
//
// Thread-safety: pure functions on values.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "loadgen/trace.h"
#include "common/status.h"
#include "api/inference.h"
#include "api/inference_server.h"

namespace somm::loadgen {

// Decodes a request body; `source` names it in errors.
StatusOr<InferenceRequest> RequestFromJson(std::string_view body, std::string_view source);
StatusOr<InferenceRequest> LoadRequestFile(const std::string& path);

// Repeats every input `batch_size` times along dim 0. InvalidArgument for a
// rank-0 input or inputs that disagree on dim 0.
Status ReplicateBatch(int64_t batch_size, InferenceRequest* request);

StatusOr<InferenceRequest> SyntheticRequest(const ModelMetadata& metadata, int64_t batch_size,
                                            uint64_t seed);

StatusOr<InferenceRequest> BytesRequest(const ModelMetadata& metadata, const std::string& bytes,
                                        int64_t batch_size);
StatusOr<std::string> ReadBytesFile(const std::string& path);

// Samples in one query: dim 0 of the first input (1 for rank 0 or none).
int64_t SamplesPerQuery(const InferenceRequest& request);

void ApplyTraceQuery(const TraceQuery& query, InferenceRequest* request);

}  // namespace somm::loadgen
