// The OIP v2 REST URL space: which endpoint a path names, and with what
// model name and version.
//
// Paths (KServe v2 required API + Triton's model repository extension):
//   GET  /v2                                              server metadata
//   GET  /v2/health/live, /v2/health/ready                server health
//   GET  /v2/models/{m}[/versions/{v}]                    model metadata
//   GET  /v2/models/{m}[/versions/{v}]/ready              model health
//   POST /v2/models/{m}[/versions/{v}]/infer              inference
//   GET  /v2/models/stats                                 every model's statistics
//   GET  /v2/models/{m}[/versions/{v}]/stats              one model's (Triton's
//                                                         statistics extension)
//   GET  /v2/models/{m}[/versions/{v}]/config             its configuration (Triton's
//                                                         model configuration extension)
//   POST /v2/repository/index                             repository index
//   POST /v2/repository/models/{m}/load | /unload         load / unload
// and somm's model-less extension (see somm_json.h for the bodies):
//   POST /v2/tasks/{task}/infer                           task-form inference;
//                                                         {task} is one or two
//                                                         segments ("classification/digits")
//   GET  /v2/tasks                                        every task (task discovery)
//   GET  /v2/tasks/{task}                                 one task: signature, models, ranges
//   POST /v2/repository/models/{m}/register               register a model
//   GET  /v2/repository/models/{m}/variants               variant generation status
//   GET  /v2/somm/decisions                               the selector's decision log
// and the operator's view (src/dashboard/operator_api.h):
//   GET  /v2/somm/overview                                counters, memory, cost per hour
//   GET  /v2/somm/workers                                 workers, devices, instance groups
//   GET  /v2/somm/actions                                 control actions, newest first
// (the dashboard's static files, under /dashboard, are not part of this URL space)
// As in Triton, /v2/models/stats is every model's statistics, never the
// metadata of a model named "stats" (its other endpoints still answer).
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
  kTaskInfer,
  kRepositoryRegister,
  kModelVariants,
  kDecisions,
  kOverview,
  kWorkers,
  kActions,
  kTaskList,
  kTaskMetadata,
  // /v2/repository/models/{m}/rollout: GET reads the model's rollout, POST
  // (kModelRolloutChange, chosen by the method) changes it.
  kModelRollout,
  kModelRolloutChange,
  // Offline batch jobs: GET /v2/somm/batch lists them, POST submits one
  // (kBatchSubmit, chosen by the method); GET /v2/somm/batch/{id};
  // POST /v2/somm/batch/{id}/cancel.
  kBatchList,
  kBatchSubmit,
  kBatchJob,
  kBatchCancel,
  // Triton's statistics (of every model: kStatisticsAll; of one model or
  // version: kModelStatistics) and model configuration extensions.
  kStatisticsAll,
  kModelStatistics,
  kModelConfig,
};

struct RestRoute {
  RestEndpoint endpoint = RestEndpoint::kNone;
  std::string model;    // "" when the endpoint has none
  std::string version;  // "" = not given in the path
  std::string task;     // kTaskInfer, kTaskMetadata: "classification/digits"
  std::string job;      // kBatchJob, kBatchCancel: the job's id
  // "GET" or "POST": the one method the endpoint accepts (HEAD goes with GET).
  const char* method = "";
};

RestRoute MatchRestRoute(std::string_view path);
// The route of `method` at `path`: as above, where the paths with two
// methods (a rollout, the batch jobs) take POST's endpoint for a POST.
RestRoute MatchRestRoute(std::string_view path, std::string_view method);

// Percent-encodes one path segment (RFC 3986 unreserved characters pass
// through), so that a model or task name can never change the shape of a URL.
std::string EncodePathSegment(std::string_view segment);

// "/v2/models/{name}" or "/v2/models/{name}/versions/{version}" (version ""),
// each segment encoded: the prefix of a model's endpoints, for clients.
std::string ModelPath(std::string_view name, std::string_view version);

}  // namespace somm::oip
