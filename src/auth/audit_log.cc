#include "auth/audit_log.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>

namespace somm::auth {

AuditLog::AuditLog(std::string path) : path_(std::move(path)) {}

std::string AuditLog::DefaultPath(const std::string& repository) {
  return (std::filesystem::path(repository) / ".somm" / "audit.log").string();
}

std::string AuditLog::JsonLine(const AuditEvent& e, int64_t unix_ms) {
  nlohmann::json j = {{"unix_ms", unix_ms}, {"key_id", e.key_id}, {"tenant", e.tenant},
                      {"action", e.action}, {"target", e.target}, {"outcome", e.outcome},
                      {"detail", e.detail}};
  // Replace, not throw, on bytes that are not UTF-8 (a hostile model name).
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void AuditLog::Record(const AuditEvent& event) {
  const int64_t unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count();
  const std::string line = JsonLine(event, unix_ms);
  spdlog::info("audit {}", line);
  if (path_.empty()) return;
  MutexLock lock(&mu_);
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path_).parent_path(), ec);
  // O_APPEND: one write per line, so lines from several processes do not
  // interleave.
  const int fd = ::open(path_.c_str(), O_CREAT | O_WRONLY | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) {
    spdlog::warn("audit log {} cannot be opened; the record is only in this log", path_);
    return;
  }
  const std::string text = line + "\n";
  if (::write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
    spdlog::warn("audit log {}: short write", path_);
  }
  ::close(fd);
}

}  // namespace somm::auth
