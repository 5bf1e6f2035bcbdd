// The dashboard's static files (web/ and the charting library from npm),
// compiled into the binary so that `somm serve` and `somm router` serve the
// pages with no file beside the binary and no network. ServeDashboard() is
// the REST frontend's one hook (frontend/http/http_frontend.cc):
//   GET /dashboard          302 to /dashboard/
//   GET /dashboard/         index.html
//   GET /dashboard/{file}   that file, else 404
// The pages then read the JSON endpoints (operator_api.h and the OIP ones)
// from the same port, with the key the user typed as a Bearer header.
//
// Thread-safety: the files are constants; every function is pure.
#pragma once

#include <optional>
#include <string_view>

#include "transport/http/http_server.h"

namespace somm::dashboard {

struct StaticFile {
  std::string_view name;  // "index.html"
  std::string_view content_type;
  std::string_view body;
};

// The embedded file called `name`; null when there is none.
const StaticFile* FindStaticFile(std::string_view name);

bool IsDashboardPath(std::string_view path);
// The answer for GET/HEAD `path` (IsDashboardPath(path) holds).
http::Response ServeDashboard(std::string_view method, std::string_view path);

}  // namespace somm::dashboard
