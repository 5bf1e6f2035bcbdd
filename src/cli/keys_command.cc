#include "cli/keys_command.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <ctime>

#include "auth/audit_log.h"
#include "auth/key_store.h"

namespace somm {
namespace {

std::string KeysPath(const KeysOptions& o) {
  return o.keys_file.empty() ? auth::KeyStore::DefaultPath(o.repository) : o.keys_file;
}

std::string AuditPath(const KeysOptions& o) {
  return o.repository.empty() ? std::string() : auth::AuditLog::DefaultPath(o.repository);
}

// Key changes from the command line are the local operator's: no key id.
void Audit(const KeysOptions& o, const std::string& action, const std::string& target,
           const Status& outcome, const std::string& detail) {
  auth::AuditLog(AuditPath(o))
      .Record({"", "local-cli", action, target,
               outcome.ok() ? "ok" : StatusCodeName(outcome.code()),
               outcome.ok() ? detail : outcome.message()});
}

// --expires as unix seconds (0 = never); a usage error is printed here.
bool ExpiryOf(const KeysOptions& o, const auth::KeyStore& store, int64_t* out) {
  *out = 0;
  if (o.expires.empty()) return true;
  StatusOr<int64_t> at = auth::ParseExpiry(o.expires, store.Now());
  if (!at.ok()) {
    std::fprintf(stderr, "error: --expires: %s\n", at.status().message().c_str());
    return false;
  }
  *out = *at;
  return true;
}

std::string ExpiryText(int64_t expires_unix) {
  return expires_unix == 0 ? "never" : auth::FormatUtc(expires_unix);
}

void ShowNewKey(const auth::NewKey& made) {
  std::fprintf(stderr,
               "it is shown only now; clients send it as SOMM_API_KEY or "
               "'Authorization: Bearer <key>'\n");
  std::printf("%s\n", made.key.c_str());
}

int Create(const KeysOptions& o) {
  StatusOr<auth::Role> role = auth::ParseRole(o.role);
  if (!role.ok()) {
    std::fprintf(stderr, "error: %s\n", role.status().message().c_str());
    return 2;
  }
  auth::KeyStore store(KeysPath(o));
  int64_t expires = 0;
  if (!ExpiryOf(o, store, &expires)) return 2;
  StatusOr<auth::NewKey> made = store.Create(o.tenant, *role, expires);
  if (!made.ok()) {
    Audit(o, "key_create", "", made.status(), "");
    std::fprintf(stderr, "error: %s\n", made.status().message().c_str());
    return 1;
  }
  Audit(o, "key_create", made->record.id, Status::Ok(),
        "tenant=" + o.tenant + " role=" + auth::RoleName(*role) +
            (expires == 0 ? "" : " expires=" + auth::FormatUtc(expires)));
  std::fprintf(stderr, "created key %s for tenant %s, role %s, expiring %s, in %s\n",
               made->record.id.c_str(), o.tenant.c_str(), auth::RoleName(*role),
               ExpiryText(expires).c_str(), store.path().c_str());
  ShowNewKey(*made);
  return 0;
}

int Rotate(const KeysOptions& o) {
  StatusOr<int64_t> grace = auth::ParseDurationSeconds(o.grace);
  if (!grace.ok()) {
    std::fprintf(stderr, "error: --grace: %s\n", grace.status().message().c_str());
    return 2;
  }
  auth::KeyStore store(KeysPath(o));
  int64_t expires = 0;
  if (!ExpiryOf(o, store, &expires)) return 2;
  StatusOr<auth::Rotation> done = store.Rotate(o.id, *grace, expires);
  if (!done.ok()) {
    Audit(o, "key_rotate", o.id, done.status(), "");
    std::fprintf(stderr, "error: %s\n", done.status().message().c_str());
    return 1;
  }
  const auth::KeyRecord& fresh = done->fresh.record;
  // Target is the old key, as for revoke; the new id is in the detail so
  // the log links the two.
  Audit(o, "key_rotate", o.id, Status::Ok(),
        "new_key=" + fresh.id + " tenant=" + fresh.tenant + " role=" + auth::RoleName(fresh.role) +
            " old_expires=" + auth::FormatUtc(done->old.expires_unix) +
            (expires == 0 ? "" : " new_expires=" + auth::FormatUtc(expires)));
  std::fprintf(stderr,
               "rotated key %s: new key %s for tenant %s, role %s, expiring %s, in %s\n"
               "the old key %s %s %s\n",
               o.id.c_str(), fresh.id.c_str(), fresh.tenant.c_str(), auth::RoleName(fresh.role),
               ExpiryText(expires).c_str(), store.path().c_str(), o.id.c_str(),
               done->old.ExpiredAt(store.Now()) ? "expired at" : "keeps working until",
               auth::FormatUtc(done->old.expires_unix).c_str());
  ShowNewKey(done->fresh);
  return 0;
}

// "2026-03-01 12:00:00", the list's columns.
std::string Utc(int64_t unix_seconds) {
  char out[32] = "?";
  const std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  if (gmtime_r(&t, &tm) != nullptr) std::strftime(out, sizeof out, "%Y-%m-%d %H:%M:%S", &tm);
  return out;
}

int List(const KeysOptions& o) {
  auth::KeyStore store(KeysPath(o));
  StatusOr<std::vector<auth::KeyRecord>> keys = store.List();
  if (!keys.ok()) {
    std::fprintf(stderr, "error: %s\n", keys.status().message().c_str());
    return 1;
  }
  const int64_t now = store.Now();
  std::printf("%-16s  %-20s  %-7s  %-20s  %-20s  %s\n", "ID", "TENANT", "ROLE", "CREATED (UTC)",
              "EXPIRES (UTC)", "STATE");
  for (const auth::KeyRecord& k : *keys) {
    // Revoked outranks expired: it is the operator's act, and final.
    const char* state = k.revoked ? "revoked" : k.ExpiredAt(now) ? "EXPIRED" : "active";
    std::printf("%-16s  %-20s  %-7s  %-20s  %-20s  %s\n", k.id.c_str(), k.tenant.c_str(),
                auth::RoleName(k.role), Utc(k.created_unix).c_str(),
                k.expires_unix == 0 ? "never" : Utc(k.expires_unix).c_str(), state);
  }
  return 0;
}

int Revoke(const KeysOptions& o) {
  auth::KeyStore store(KeysPath(o));
  const Status s = store.Revoke(o.id);
  Audit(o, "key_revoke", o.id, s, "");
  if (!s.ok()) {
    std::fprintf(stderr, "error: %s\n", s.message().c_str());
    return 1;
  }
  std::printf("revoked key %s\n", o.id.c_str());
  return 0;
}

}  // namespace

CLI::App* AddKeysCommand(CLI::App& app, KeysOptions* o) {
  auto* keys =
      app.add_subcommand("keys", "Create, list, rotate and revoke API keys (docs/security.md)");
  keys->require_subcommand(1);
  for (const std::string name : {"create", "list", "rotate", "revoke"}) {
    const std::string what =
        name == "create" ? "Create a key; prints it as the last line"
        : name == "list" ? "List keys (ids, tenants, roles, expiry; never keys)"
        : name == "rotate"
            ? "Replace a key: a new one (printed as the last line) for the same tenant and "
              "role; the old one works until the grace period ends"
            : "Revoke a key by its id";
    auto* sub = keys->add_subcommand(name, what);
    sub->add_option("--repo,--model-repository", o->repository,
                    "Model repository; keys live in <repo>/.somm/keys");
    sub->add_option("--keys-file", o->keys_file, "Key file (default <repo>/.somm/keys)");
    if (name == "create") {
      sub->add_option("--tenant", o->tenant, "Tenant the key acts for")->required();
      sub->add_option("--role", o->role, "admin, user or metrics")
          ->capture_default_str()
          ->check(CLI::IsMember({"admin", "user", "metrics"}));
    }
    if (name == "create" || name == "rotate") {
      sub->add_option(
          "--expires", o->expires,
          std::string(name == "rotate" ? "When the new key expires: " : "When it expires: ") +
              "a duration (90d, 12h, 30m) or a UTC date (YYYY-MM-DD, RFC 3339); "
              "default never");
    }
    if (name == "rotate") {
      sub->add_option("id", o->id, "The id of the key to replace")->required();
      sub->add_option("--grace", o->grace,
                      "How long the old key keeps working (e.g. 24h, 7d; 0s ends it now); an "
                      "earlier expiry it has stands")
          ->capture_default_str();
    }
    if (name == "revoke") sub->add_option("id", o->id, "The key's id")->required();
  }
  return keys;
}

int RunKeys(const CLI::App& keys_command, const KeysOptions& o) {
  // Logs (the audit lines) go to stderr: stdout ends with the new key.
  spdlog::set_default_logger(spdlog::stderr_color_mt("somm"));
  if (o.repository.empty() && o.keys_file.empty()) {
    std::fprintf(stderr, "error: give --repo DIR (or --keys-file FILE)\n");
    return 2;
  }
  if (keys_command.get_subcommand("create")->parsed()) return Create(o);
  if (keys_command.get_subcommand("list")->parsed()) return List(o);
  if (keys_command.get_subcommand("rotate")->parsed()) return Rotate(o);
  if (keys_command.get_subcommand("revoke")->parsed()) return Revoke(o);
  return 2;
}

}  // namespace somm
