// `somm keys create|list|rotate|revoke`: manages the API keys of a
// repository (auth/key_store.h) from the command line. A running server
// re-reads the key file on its next call, so no restart is needed. Each
// change is written to the audit log (auth/audit_log.h) as the local
// operator's. `create --expires` gives a key an expiry; `rotate` replaces a
// key with a new one of the same tenant and role and lets the old one live
// on for a grace period, so clients can switch without downtime.
#pragma once

#include <string>

namespace CLI {
class App;
}  // namespace CLI

namespace somm {

struct KeysOptions {
  std::string repository;     // --repo: the keys live under <repo>/.somm/
  std::string keys_file;      // --keys-file: overrides <repo>/.somm/keys
  std::string tenant;         // create
  std::string role = "user";  // create: admin, user or metrics
  std::string id;             // rotate, revoke
  std::string expires;        // create, rotate (the new key): a duration or a UTC date
  std::string grace = "24h";  // rotate: how long the old key keeps working
};

// Adds `keys` and its four subcommands to `app`, filling `*options` (which
// must outlive the parse).
CLI::App* AddKeysCommand(CLI::App& app, KeysOptions* options);

// Runs whichever subcommand was parsed; the process's exit code. `create`
// and `rotate` print the new key as their last line, and nothing else on
// stdout after it.
int RunKeys(const CLI::App& keys_command, const KeysOptions& options);

}  // namespace somm
