#include "dashboard/static_files.h"

#include <string>
#include <vector>

#include "dashboard/embedded_files.h"

namespace somm::dashboard {
namespace {

std::string_view ContentType(std::string_view name) {
  auto ends = [name](std::string_view suffix) {
    return name.size() >= suffix.size() && name.substr(name.size() - suffix.size()) == suffix;
  };
  if (ends(".html")) return "text/html; charset=utf-8";
  if (ends(".js")) return "text/javascript; charset=utf-8";
  if (ends(".css")) return "text/css; charset=utf-8";
  if (ends(".svg")) return "image/svg+xml";
  return "application/octet-stream";
}

http::Response Text(int status, std::string body) {
  http::Response res;
  res.status = status;
  res.body = std::move(body);
  res.headers.emplace_back("Content-Type", "text/plain; charset=utf-8");
  return res;
}

}  // namespace

const StaticFile* FindStaticFile(std::string_view name) {
  static const std::vector<StaticFile> kFiles = [] {
    std::vector<StaticFile> files;
    for (const EmbeddedFile& f : EmbeddedFiles()) {
      files.push_back(StaticFile{f.name, ContentType(f.name), f.body});
    }
    return files;
  }();
  for (const StaticFile& f : kFiles) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

bool IsDashboardPath(std::string_view path) {
  return path == "/dashboard" || path.rfind("/dashboard/", 0) == 0;
}

http::Response ServeDashboard(std::string_view method, std::string_view path) {
  if (method != "GET" && method != "HEAD") {
    http::Response res = Text(405, "the dashboard accepts GET\n");
    res.headers.emplace_back("Allow", "GET");
    return res;
  }
  if (path == "/dashboard") {
    http::Response res;
    res.status = 302;
    res.headers.emplace_back("Location", "/dashboard/");
    return res;
  }
  std::string_view name = path.substr(std::string_view("/dashboard/").size());
  if (name.empty()) name = "index.html";
  const StaticFile* file = FindStaticFile(name);
  if (file == nullptr) return Text(404, "no dashboard file " + std::string(name) + "\n");
  http::Response res;
  res.body = std::string(file->body);
  res.headers.emplace_back("Content-Type", std::string(file->content_type));
  // The files change only with the binary; a reload after an upgrade must
  // not mix old and new scripts, so the browser revalidates every time.
  res.headers.emplace_back("Cache-Control", "no-cache");
  return res;
}

}  // namespace somm::dashboard
