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

int Create(const KeysOptions& o) {
  StatusOr<auth::Role> role = auth::ParseRole(o.role);
  if (!role.ok()) {
    std::fprintf(stderr, "error: %s\n", role.status().message().c_str());
    return 2;
  }
  auth::KeyStore store(KeysPath(o));
  StatusOr<auth::NewKey> made = store.Create(o.tenant, *role);
  if (!made.ok()) {
    Audit(o, "key_create", "", made.status(), "");
    std::fprintf(stderr, "error: %s\n", made.status().message().c_str());
    return 1;
  }
  Audit(o, "key_create", made->record.id, Status::Ok(),
        "tenant=" + o.tenant + " role=" + auth::RoleName(*role));
  std::fprintf(stderr, "created key %s for tenant %s, role %s, in %s\n", made->record.id.c_str(),
               o.tenant.c_str(), auth::RoleName(*role), store.path().c_str());
  std::fprintf(stderr,
               "it is shown only now; clients send it as SOMM_API_KEY or "
               "'Authorization: Bearer <key>'\n");
  std::printf("%s\n", made->key.c_str());
  return 0;
}

int List(const KeysOptions& o) {
  auth::KeyStore store(KeysPath(o));
  StatusOr<std::vector<auth::KeyRecord>> keys = store.List();
  if (!keys.ok()) {
    std::fprintf(stderr, "error: %s\n", keys.status().message().c_str());
    return 1;
  }
  std::printf("%-16s  %-20s  %-7s  %-20s  %s\n", "ID", "TENANT", "ROLE", "CREATED (UTC)", "STATE");
  for (const auth::KeyRecord& k : *keys) {
    char created[32] = "?";
    const std::time_t t = static_cast<std::time_t>(k.created_unix);
    std::tm tm{};
    if (gmtime_r(&t, &tm) != nullptr)
      std::strftime(created, sizeof created, "%Y-%m-%d %H:%M:%S", &tm);
    std::printf("%-16s  %-20s  %-7s  %-20s  %s\n", k.id.c_str(), k.tenant.c_str(),
                auth::RoleName(k.role), created, k.revoked ? "revoked" : "active");
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
  auto* keys = app.add_subcommand("keys", "Create, list and revoke API keys (docs/security.md)");
  keys->require_subcommand(1);
  for (const char* name : {"create", "list", "revoke"}) {
    const std::string what =
        name == std::string("create") ? "Create a key; prints it as the last line"
        : name == std::string("list") ? "List keys (ids, tenants, roles; never keys)"
                                      : "Revoke a key by its id";
    auto* sub = keys->add_subcommand(name, what);
    sub->add_option("--repo,--model-repository", o->repository,
                    "Model repository; keys live in <repo>/.somm/keys");
    sub->add_option("--keys-file", o->keys_file, "Key file (default <repo>/.somm/keys)");
    if (name == std::string("create")) {
      sub->add_option("--tenant", o->tenant, "Tenant the key acts for")->required();
      sub->add_option("--role", o->role, "admin, user or metrics")
          ->capture_default_str()
          ->check(CLI::IsMember({"admin", "user", "metrics"}));
    }
    if (name == std::string("revoke")) sub->add_option("id", o->id, "The key's id")->required();
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
  if (keys_command.get_subcommand("revoke")->parsed()) return Revoke(o);
  return 2;
}

}  // namespace somm
