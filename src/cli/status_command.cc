// `somm status [--url host:port] [-i http|grpc] [--watch]`: fetches the
// operator's views (REST's GETs, or SommControl/OperatorCall over gRPC) and
// prints status_format.h's table; --watch refreshes it in place until
// interrupted.
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "cli/any_client.h"
#include "cli/commands.h"
#include "cli/status_format.h"

namespace somm {
namespace {

StatusOr<StatusViews> Fetch(AnyClient& client) {
  StatusViews v;
  SOMM_ASSIGN_OR_RETURN(v.overview, client.GetBody("/v2/somm/overview"));
  SOMM_ASSIGN_OR_RETURN(v.workers, client.GetBody("/v2/somm/workers"));
  SOMM_ASSIGN_OR_RETURN(v.actions, client.GetBody("/v2/somm/actions?limit=20"));
  return v;
}

}  // namespace

int RunStatus(const StatusOptions& o) {
  StatusOr<AnyClient> made = AnyClient::Create(o.client);
  if (!made.ok()) {
    std::fprintf(stderr, "error: %s\n", made.status().message().c_str());
    return 2;
  }
  AnyClient& client = *made;
  StatusFormatOptions format;
  format.url = o.client.url;
  if (format.url.empty()) {
    format.url = "127.0.0.1:" + std::to_string(o.client.protocol == "grpc" ? kDefaultGrpcPort
                                                                           : kDefaultRestPort);
  }
  format.actions = static_cast<size_t>(o.actions);
  while (true) {
    StatusOr<StatusViews> views = Fetch(client);
    StatusOr<std::string> table = views.ok() ? FormatStatus(*views, format) : views.status();
    if (!table.ok()) {
      std::fprintf(stderr, "error: %s\n", table.status().message().c_str());
      if (!o.watch) return 1;
    } else {
      // Home and clear, so that the table refreshes in place.
      if (o.watch) std::printf("\033[H\033[2J");
      std::printf("%s", table->c_str());
      std::fflush(stdout);
      format.previous_overview = views->overview;
    }
    if (!o.watch) return 0;
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(o.interval_ms));
  }
}

}  // namespace somm
