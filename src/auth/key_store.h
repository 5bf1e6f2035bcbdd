// KeyStore: somm's API keys, one file per repository (by default
// <repo>/.somm/keys). `somm keys` creates, lists and revokes keys in it; a
// serving process verifies each call's key against it and re-reads the file
// whenever it changes (its mtime, size or inode), so a new or revoked key
// takes effect on the next call, with no restart.
//
// A key is "somm_<id>_<secret>": a public id of 16 hex digits (what logs,
// `somm keys list` and the audit log show) and a secret of 64 hex digits
// (32 random bytes). The file stores, per key, its id, tenant, role,
// creation time, state and SHA-256("<id>:<secret>") - never the key. The id
// in the hash binds each hash to its key, so equal secrets cannot be
// matched across keys. SHA-256 without stretching is enough: the secrets are
// 256 random bits, not passwords.
//
// File format (text, 0600): "#" comments, then one line per key:
//   <id> <tenant> <role> <created_unix> active|revoked <sha256 hex>
// Writers (Create, Revoke) take an exclusive flock on "<path>.lock", write
// a temporary file and rename it over the old one, so a reader sees either
// the old file or the new one.
//
// Thread-safety: every method may be called concurrently (mu_ guards the
// cached records); several processes may share one file.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"

namespace somm::auth {

// admin: everything; user: queries and its own tenant's private models;
// metrics: GET /metrics only (auth/roles.h has the table).
enum class Role { kAdmin, kUser, kMetrics };

const char* RoleName(Role role);
StatusOr<Role> ParseRole(std::string_view name);

// Tenant names: 1-64 letters, digits, '-', '_' or '.'.
Status CheckTenantName(std::string_view tenant);

struct KeyRecord {
  std::string id;
  std::string tenant;
  Role role = Role::kUser;
  int64_t created_unix = 0;
  bool revoked = false;
  std::string hash;  // SHA-256("<id>:<secret>"), hex
};

struct NewKey {
  KeyRecord record;
  std::string key;  // shown once, to whoever created it
};

class KeyStore {
 public:
  explicit KeyStore(std::string path);

  // <repo>/.somm/keys
  static std::string DefaultPath(const std::string& repository);

  const std::string& path() const { return path_; }

  StatusOr<NewKey> Create(const std::string& tenant, Role role);
  // NotFound for an unknown id; revoking twice is not an error.
  Status Revoke(const std::string& id);
  // Every key, revoked ones included, in file order. A missing file is an
  // empty store.
  StatusOr<std::vector<KeyRecord>> List() const;

  // The record of `key` when it is known, matches and is not revoked;
  // otherwise UNAUTHENTICATED with a message that never contains the key.
  StatusOr<KeyRecord> Verify(std::string_view key);

 private:
  struct FileSignature {
    int64_t mtime_ns = -1;
    int64_t size = -1;
    ino_t inode = 0;
    bool operator==(const FileSignature&) const = default;
  };
  // Re-reads the file when its signature changed since the last read.
  void Refresh() SOMM_EXCLUDES(mu_);
  // Read-modify-write under the file lock.
  Status Update(const std::function<Status(std::vector<KeyRecord>&)>& change);

  const std::string path_;
  Mutex mu_;
  FileSignature seen_ SOMM_GUARDED_BY(mu_);
  std::map<std::string, KeyRecord> by_id_ SOMM_GUARDED_BY(mu_);
};

// Parses and renders the file format above (exposed for tests).
StatusOr<std::vector<KeyRecord>> ParseKeyFile(const std::string& text, const std::string& source);
std::string RenderKeyFile(const std::vector<KeyRecord>& records);

}  // namespace somm::auth
