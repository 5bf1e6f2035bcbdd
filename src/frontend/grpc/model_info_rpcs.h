// Triton's model configuration and statistics extensions on the gRPC
// frontend: ModelConfig and ModelStatistics of inference.GRPCInferenceService
// (proto/inference.proto, proto/model_config.proto), answered from
// InferenceServer::GetModelConfiguration and GetModelStatistics in the
// messages Triton's clients decode.
//
// Contract:
//   * Both methods are guarded as model metadata is: the key is checked
//     from the metadata before the message is read (key_first.h), then a
//     named model the caller may not see is answered NOT_FOUND exactly as
//     a model that does not exist. ModelStatistics without a name lists
//     every model the caller may see (CallGuard::MaySee), as the
//     repository index does.
//   * Declared on the frontend's KeyFirstService before the server is
//     built, beside the other OIP methods; answered at once on the
//     frontend's threads (both are reads of memory).
//   * The encoders are free functions on values, for the tests.
#pragma once

#include <vector>

#include "api/inference_server.h"
#include "api/model_statistics.h"
#include "frontend/grpc/key_first.h"
#include "proto/inference.pb.h"
#include "serving/call_guard.h"
#include "transport/grpc/async_unary.h"

namespace somm::grpc_codec {

void EncodeModelStatistics(const std::vector<ModelStatistics>& stats,
                           inference::ModelStatisticsResponse* out);
void EncodeModelConfiguration(const ModelConfiguration& configuration, inference::ModelConfig* out);

}  // namespace somm::grpc_codec

namespace somm::grpc_async {

class ModelInfoRpcs {
 public:
  // `server` and `guard` (null = no checks) must outlive the frontend.
  ModelInfoRpcs(InferenceServer& server, CallGuard* guard) : server_(server), guard_(guard) {}

  // Registers ModelConfig and ModelStatistics with `service` through `table`.
  void Declare(CallQueue* queue, KeyFirstService* service, KeyFirstTable& table);

 private:
  void Config(const GatedContext& context, const inference::ModelConfigRequest& request,
              inference::ModelConfigResponse* response, const Answer& answer);
  void Statistics(const GatedContext& context, const inference::ModelStatisticsRequest& request,
                  inference::ModelStatisticsResponse* response, const Answer& answer);
  Admission Admit(const GatedContext& context, Operation op, const std::string& model) const;

  InferenceServer& server_;
  CallGuard* const guard_;
};

}  // namespace somm::grpc_async
