// Fast paths for the two JSON documents decoded once per query: an inference
// request (server) and an inference response (REST client, load generator).
//
// Both parse with simdjson (On Demand) and cover the common shape only:
// FP32/FP64 tensors with their elements in 'data' (flat or nested) after
// their 'datatype' and 'shape' (the order every OIP client writes), scalar
// parameters, no null, no repeated keys; a binary request's inputs of
// fixed-size datatypes with their bytes in the binary section. On anything else it
// returns nullopt and the caller decodes with the general decoder
// (oip_json.cc), which also writes every error message; so these never fail,
// and where they succeed the result is the one the general decoder gives
// (fast_infer_json_test.cc checks that on valid and mutated bodies).
// Unknown keys are skipped, as the general decoder ignores them.
//
// Thread-safety: pure functions (each thread keeps a parser of its own for
// bodies up to 2 MB).
#pragma once

#include <optional>
#include <string_view>

#include "common/status.h"
#include "api/inference.h"

namespace somm::oip::internal {

// header_length: the Inference-Header-Content-Length of a binary request
// (the JSON header, then each input's bytes in order, as
// parameters.binary_data_size says); nullopt = all JSON.
std::optional<InferenceRequest> FastDecodeInferRequest(
    std::string_view body, std::optional<size_t> header_length = std::nullopt);
// The error the general decoder gives a request whose plain-form input
// ({name, datatype, shape, data} in that order) holds more or fewer 'data'
// elements than its shape declares, found by counting them without keeping
// one; nullopt when none is found that way. The general decoder would build
// a tree of every number first: a 60 MB body of mismatched data cost 1.6 GB.
std::optional<Status> DataCountMismatch(std::string_view body,
                                        std::optional<size_t> header_length = std::nullopt);
std::optional<InferenceResponse> FastDecodeInferResponse(
    std::string_view body, std::optional<size_t> header_length = std::nullopt);

}  // namespace somm::oip::internal
