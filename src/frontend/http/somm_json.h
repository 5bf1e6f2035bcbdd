// somm_json: the JSON bodies of somm's model-less REST extension, both
// directions (the HttpFrontend decodes requests and encodes answers; the
// HttpClient does the reverse). The URLs are in rest_routes.h.
//
// Registration, POST /v2/repository/models/{name}/register:
//   {"task": "classification/digits",
//    "inputs":  [{"name": "pixels", "datatype": "FP32", "shape": [64]}],
//    "outputs": [{"name": "logits", "datatype": "FP32", "shape": [10]}],
//    "max_batch_size": 64,                       optional, default 0
//    "model": "<base64 of the TorchScript file>",
//    "validation": {"count": N,                  optional
//                   "inputs": "<base64: N samples of the single input, raw LE>",
//                   "labels": "<base64: N INT64 labels, LE>"},
//    "preprocessing": {"image": {"channels": 1, "height": 8, "width": 8,
//                                "scale": 0.0627, "mean": [..], "std": [..],
//                                "invert": false}},   optional, model.yaml's fields
//    "description": "...",                       optional
//    "name": "<the URL's name>"}                 optional, must match the URL
// Shapes are per sample, as in model.yaml: dims are integers >= -1 (-1 =
// variable). Base64 is strict (common/base64.h). Unlike the OIP inference
// body, unknown fields are rejected, at every level: this is somm's own API and
// a misspelt optional field ("max_batch") would otherwise be silently dropped.
// Every error is InvalidArgument and reads
//   "registration of model 'm': field 'inputs[0].datatype': unknown datatype 'FLOAT' ..."
// The server then validates what only it can (name rules, task form, the
// model file itself); the decoder checks the wire form.
//
// Registration accepted (202): {"name", "state": "GENERATING", "status_url"}.
// Variants, GET /v2/repository/models/{name}/variants: RegistrationStatus as
//   {"name","state","phase","done","total","message","skipped":[...],
//    "variants":[<ProfileToJson object>, ...]}
// Decision log, GET /v2/somm/decisions?limit=N (newest first):
//   {"decisions":[{"unix_ms","target","requirements","outcome","variant",
//                  "hardware","predicted_latency_ms","cost_usd","reason"}]}
//
// Decoders never throw. Thread-safety: free functions on values.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "api/inference_server.h"

namespace somm::oip {

// Server side: `name` is the model named by the URL.
StatusOr<RegistrationRequest> DecodeRegistrationRequest(std::string_view body,
                                                        const std::string& name);
// Client side.
std::string EncodeRegistrationRequest(const RegistrationRequest& request);

// "/v2/repository/models/<name>/variants", where registration progress shows.
std::string VariantsPath(const std::string& name);
// The 202 body answering a registration.
std::string EncodeRegistrationAccepted(const std::string& name);

std::string EncodeRegistrationStatus(const RegistrationStatus& status);
StatusOr<RegistrationStatus> DecodeRegistrationStatus(std::string_view body);

// The decision log's ?limit=: absent = 100; otherwise decimal 0..10000.
inline constexpr size_t kDefaultDecisionLimit = 100;
inline constexpr size_t kMaxDecisionLimit = 10000;
StatusOr<size_t> ParseDecisionLimit(std::optional<std::string_view> value);

std::string EncodeDecisions(const std::vector<DecisionRecord>& decisions);
StatusOr<std::vector<DecisionRecord>> DecodeDecisions(std::string_view body);

}  // namespace somm::oip
