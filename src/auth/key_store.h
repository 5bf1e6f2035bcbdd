// KeyStore: somm's API keys, one file per repository (by default
// <repo>/.somm/keys). `somm keys` creates, lists, rotates and revokes keys
// in it; a serving process verifies each call's key against it and re-reads
// the file whenever it changes (its mtime, size or inode, looked at when an
// inotify watch of its folder says it may have changed: common/
// file_change_watch.h), so a new, rotated or revoked key takes effect on the
// next call, with no restart.
//
// A key may carry an expiry (unix seconds): from then on Verify refuses it,
// judged against the store's clock on every call, so expiry needs no file
// change. Rotate replaces a key without downtime: one locked rewrite adds a
// new key of the same tenant and role and makes the old one expire after a
// grace period, during which both work.
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
//   <id> <tenant> <role> <created_unix> active|revoked <sha256 hex> [expires=<unix>]
// The 7th field is optional and written only for a key that expires, so a
// file of keys without expiry stays readable by older somm (which ignore
// trailing fields: they would not enforce an expiry). Any other 7th field,
// or an 8th, is a malformed line.
// Writers (Create, Rotate, Revoke) take an exclusive flock on "<path>.lock",
// write a temporary file and rename it over the old one, so a reader sees
// either the old file or the new one.
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

#include "common/file_change_watch.h"
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
  std::string hash;          // SHA-256("<id>:<secret>"), hex
  int64_t expires_unix = 0;  // 0: never; else refused from this second on

  bool ExpiredAt(int64_t now_unix) const { return expires_unix != 0 && now_unix >= expires_unix; }
};

struct NewKey {
  KeyRecord record;
  std::string key;  // shown once, to whoever created it
};

struct Rotation {
  NewKey fresh;   // the replacement, same tenant and role
  KeyRecord old;  // the rotated key as written, with its new expiry
};

// Wall-clock seconds since the epoch; tests pass a fake one.
using UnixClock = std::function<int64_t()>;
int64_t SystemUnixNow();

// "90d", "12h", "30m", "45s" (also "2w"): whole seconds, >= 0.
StatusOr<int64_t> ParseDurationSeconds(std::string_view text);
// When something given as `text` ends: a duration from `now_unix` (as
// above), or a UTC date "YYYY-MM-DD" (its midnight) or an RFC 3339 time
// ("2026-03-01T12:00:00Z", "...+02:00", fractions of a second dropped).
StatusOr<int64_t> ParseExpiry(std::string_view text, int64_t now_unix);
// RFC 3339 in UTC, "2026-03-01T12:00:00Z".
std::string FormatUtc(int64_t unix_seconds);

class KeyStore {
 public:
  // `now_unix` empty = SystemUnixNow. It stamps creation times and decides
  // expiry, so tests need not sleep.
  explicit KeyStore(std::string path, UnixClock now_unix = {});

  // <repo>/.somm/keys
  static std::string DefaultPath(const std::string& repository);

  const std::string& path() const { return path_; }

  // `expires_unix` 0 = never; one not after now is InvalidArgument (a key
  // that could never be used is a mistake, not a request).
  StatusOr<NewKey> Create(const std::string& tenant, Role role, int64_t expires_unix = 0);
  // A new key for the tenant and role of key `id`, which expires `grace_s`
  // seconds from now (or keeps an earlier expiry it had), in one rewrite.
  // The new key expires at `new_expires_unix` (0 = never). NotFound for an
  // unknown id; FailedPrecondition for a revoked or expired key (create a
  // key instead: there is nothing live to hand over from).
  StatusOr<Rotation> Rotate(const std::string& id, int64_t grace_s, int64_t new_expires_unix = 0);
  // NotFound for an unknown id; revoking twice is not an error.
  Status Revoke(const std::string& id);
  // Every key, revoked ones included, in file order. A missing file is an
  // empty store.
  StatusOr<std::vector<KeyRecord>> List() const;

  // The record of `key` when it is known, matches, is not revoked and has
  // not expired; otherwise UNAUTHENTICATED with a message that never
  // contains the key's secret (the public id at most).
  StatusOr<KeyRecord> Verify(std::string_view key);

  int64_t Now() const { return now_unix_(); }

 private:
  struct FileSignature {
    int64_t mtime_ns = -1;
    int64_t size = -1;
    ino_t inode = 0;
    bool operator==(const FileSignature&) const = default;
  };
  // Re-reads the file when its signature changed since the last read,
  // looking at it only when watch_ says it may have changed (or cannot
  // tell).
  void Refresh() SOMM_EXCLUDES(mu_);
  // Read-modify-write under the file lock.
  Status Update(const std::function<Status(std::vector<KeyRecord>&)>& change);

  // A new key's record and text (not yet written).
  StatusOr<NewKey> MakeKey(const std::string& tenant, Role role, int64_t expires_unix) const;

  const std::string path_;
  const UnixClock now_unix_;
  // Whether the file may have changed, without a stat() per call.
  FileChangeWatch watch_;
  Mutex mu_;
  FileSignature seen_ SOMM_GUARDED_BY(mu_);
  // watch_'s generation when the file was last looked at; -2 = never.
  int64_t seen_generation_ SOMM_GUARDED_BY(mu_) = -2;
  std::map<std::string, KeyRecord> by_id_ SOMM_GUARDED_BY(mu_);
};

// Parses and renders the file format above (exposed for tests).
StatusOr<std::vector<KeyRecord>> ParseKeyFile(const std::string& text, const std::string& source);
std::string RenderKeyFile(const std::vector<KeyRecord>& records);

}  // namespace somm::auth
