// The OIP v2 REST URL space: which endpoint a path names, and with what
// model name and version.
//
// Paths (KServe v2 required API + Triton's model repository extension):
//   GET  /v2                                              server metadata
//   GET  /v2/health/live, /v2/health/ready                server health
//   GET  /v2/models/{m}[/versions/{v}]                    model metadata
//   GET  /v2/models/{m}[/versions/{v}]/ready              model health
//   POST /v2/models/{m}[/versions/{v}]/infer              inference
//   POST /v2/repository/index                             repository index
//   POST /v2/repository/models/{m}/load | /unload         load / unload
// A single trailing slash is tolerated. Matching is on the decoded path and
// is independent of the HTTP method, so the caller can tell "no such path"
// (404) from "wrong method" (405).
//
// Thread-safety: pure function.
#pragma once

#include <string>
#include <string_view>

namespace somm::oip {

enum class RestEndpoint {
  kNone,
  kServerLive,
  kServerReady,
  kServerMetadata,
  kModelMetadata,
  kModelReady,
  kModelInfer,
  kRepositoryIndex,
  kRepositoryLoad,
  kRepositoryUnload,
};

struct RestRoute {
  RestEndpoint endpoint = RestEndpoint::kNone;
  std::string model;    // "" when the endpoint has none
  std::string version;  // "" = not given in the path
  // "GET" or "POST": the one method the endpoint accepts (HEAD goes with GET).
  const char* method = "";
};

RestRoute MatchRestRoute(std::string_view path);

}  // namespace somm::oip
