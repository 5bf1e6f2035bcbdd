// InferenceServer: everything a protocol frontend (REST, gRPC) may ask of
// somm, by audience: applications (InferenceApi), models' owners and
// operators managing models (ModelAdminApi) and operators' views
// (OperatorApi). A part that serves one audience takes that interface
// only: batch jobs run on InferenceApi, the dashboard's views on
// OperatorApi. Frontends hold a reference to one and never see models,
// instances or batchers. The router (router/router.h) implements it, in
// one process and in the cluster.
//
// Thread-safety: every method may be called concurrently from any thread.
#pragma once

#include "api/inference_api.h"
#include "api/model_admin_api.h"
#include "api/operator_api.h"
#include "api/records.h"

namespace somm {

class InferenceServer : public InferenceApi, public ModelAdminApi, public OperatorApi {
 public:
  ~InferenceServer() override = default;
};

}  // namespace somm
