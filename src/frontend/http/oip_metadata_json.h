// The Open Inference Protocol v2 REST metadata and repository messages.
//
// Server metadata ($metadata_server_response), model metadata
// ($metadata_model_response, plus our optional "parameters" object), and
// Triton's model repository extension: the index request and response, and
// the optional load / unload request bodies. The server side encodes what
// InferenceServer reports; the client side decodes it back.
//
// Decoders never throw; malformed input is an InvalidArgument Status naming
// the field. Thread-safety: free functions on values.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "api/inference.h"
#include "api/inference_server.h"

namespace somm::oip {

std::string EncodeServerMetadata(const ServerMetadata& metadata);
StatusOr<ServerMetadata> DecodeServerMetadata(std::string_view body);

// "versions" and "parameters" are omitted when empty.
std::string EncodeModelMetadata(const ModelMetadata& metadata);
StatusOr<ModelMetadata> DecodeModelMetadata(std::string_view body);

// $repository_index_request: an empty body or {"ready": <bool>}; returns
// the "ready" flag (default false = every model).
StatusOr<bool> DecodeRepositoryIndexRequest(std::string_view body);
std::string EncodeRepositoryIndexRequest(bool ready_only);

// $repository_index_response: a JSON array; "version" omitted when unknown.
std::string EncodeRepositoryIndex(const std::vector<RepositoryEntry>& entries);
StatusOr<std::vector<RepositoryEntry>> DecodeRepositoryIndex(std::string_view body);

// $repository_load_request / $repository_unload_request: an empty body or
// {"parameters": {...}}; returns the parameters.
StatusOr<Parameters> DecodeRepositoryModelRequest(std::string_view body);

}  // namespace somm::oip
