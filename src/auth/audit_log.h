// AuditLog: one record per repository change (register, load, unload) and
// per key change (create, revoke): who (key id and tenant), what, when and
// the outcome. Each record goes to the process log as a line starting with
// "audit " and, as one JSON object per line, to a file (by default
// <repo>/.somm/audit.log), opened for append on every record so that
// several processes (servers, `somm keys`) can share it and rotation needs
// no signal. No record ever holds a key or a hash: only key ids.
//
// Thread-safety: Record may be called concurrently (mu_ serialises appends
// so lines never interleave).
#pragma once

#include <cstdint>
#include <string>

#include "common/mutex.h"

namespace somm::auth {

struct AuditEvent {
  std::string key_id;  // "" without authentication
  std::string tenant;
  std::string action;   // register, load, unload, key_create, key_revoke
  std::string target;   // the model, or the key id a key change is about
  std::string outcome;  // "ok" or the error's code
  std::string detail;   // the error message, or e.g. "private"
};

class AuditLog {
 public:
  // `path` "" = the process log only.
  explicit AuditLog(std::string path);

  // <repo>/.somm/audit.log
  static std::string DefaultPath(const std::string& repository);

  void Record(const AuditEvent& event) SOMM_EXCLUDES(mu_);

  // The JSON line of `event` at `unix_ms` (exposed for tests).
  static std::string JsonLine(const AuditEvent& event, int64_t unix_ms);

 private:
  const std::string path_;
  Mutex mu_;
};

}  // namespace somm::auth
