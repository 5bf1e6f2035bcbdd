#include "batch/batch_routes.h"

#include <string>
#include <utility>

namespace somm {

RestMount BatchRoutes(BatchJobs& jobs, CallGuard* guard) {
  using oip::RestEndpoint;
  auto handler = [&jobs, guard](const oip::RestRoute& route, const http::Request& req,
                                const Caller& caller) -> http::Response {
    StatusOr<BatchJobStatus> status = Internal("unreachable");
    switch (route.endpoint) {
      case RestEndpoint::kBatchList: {
        std::string out = "{\"jobs\":[";
        bool first = true;
        for (const BatchJobStatus& s : jobs.List(caller)) {
          out += (first ? "" : ",") + BatchJobStatusToJson(s);
          first = false;
        }
        return rest::JsonResponse(200, out + "]}");
      }
      case RestEndpoint::kBatchJob:
        status = jobs.Get(route.job, caller);
        break;
      case RestEndpoint::kBatchCancel:
        status = jobs.Cancel(route.job, caller);
        break;
      default: {
        StatusOr<BatchJobSpec> spec = BatchJobSpecFromJson(std::string(req.body));
        if (!spec.ok()) return rest::StatusResponse(spec.status());
        Caller runs_as = caller;
        const CallInfo call{spec->model.empty() ? Operation::kTaskInfer : Operation::kInfer,
                            spec->model,
                            rest::AuthorizationOf(req.head),
                            false,
                            0,
                            rest::VerifiedKeyOf(req)};
        if (guard != nullptr) {
          // Admitted as a query of its target: a tenant's job runs only what
          // the tenant may query (another's private model is unknown).
          Admission a = guard->Admit(call);
          if (!a.status.ok()) return rest::RefusalResponse(a);
          runs_as = std::move(a.caller);
        }
        status = jobs.Submit(std::move(spec).value(), runs_as);
        // The admission took one of the tenant's query slots; the submission
        // is answered now, so it gives it back (the items run at low priority
        // outside the tenant's online quota).
        if (guard != nullptr) guard->Done(runs_as, call, status.status());
        break;
      }
    }
    if (!status.ok()) return rest::StatusResponse(status.status());
    return rest::JsonResponse(200, BatchJobStatusToJson(*status));
  };
  return RestMount{{RestEndpoint::kBatchList, RestEndpoint::kBatchSubmit, RestEndpoint::kBatchJob,
                    RestEndpoint::kBatchCancel},
                   std::move(handler)};
}

}  // namespace somm
