// `somm status [--url host:port] [--watch]`: fetches the operator's views
// over REST and prints status_format.h's table; --watch refreshes it in
// place until interrupted.
#include <charconv>
#include <chrono>
#include <cstdio>
#include <thread>

#include "cli/commands.h"
#include "cli/status_format.h"
#include "client/http_client.h"

namespace somm {
namespace {

StatusOr<StatusViews> Fetch(HttpClient& client) {
  StatusViews v;
  SOMM_ASSIGN_OR_RETURN(v.overview, client.GetBody("/v2/somm/overview"));
  SOMM_ASSIGN_OR_RETURN(v.workers, client.GetBody("/v2/somm/workers"));
  SOMM_ASSIGN_OR_RETURN(v.actions, client.GetBody("/v2/somm/actions?limit=20"));
  return v;
}

}  // namespace

int RunStatus(const StatusOptions& o) {
  const auto colon = o.url.rfind(':');
  int port = 0;
  const char* end = o.url.data() + o.url.size();
  if (colon == std::string::npos ||
      std::from_chars(o.url.data() + colon + 1, end, port).ptr != end || port <= 0 ||
      port > 65535) {
    std::fprintf(stderr, "error: --url must be host:port, got '%s'\n", o.url.c_str());
    return 2;
  }
  HttpClient client(o.url.substr(0, colon), port);
  StatusFormatOptions format;
  format.url = o.url;
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
    std::this_thread::sleep_for(std::chrono::milliseconds(o.interval_ms));
  }
}

}  // namespace somm
