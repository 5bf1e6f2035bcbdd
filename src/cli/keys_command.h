// `somm keys create|list|revoke`: manages the API keys of a repository
// (auth/key_store.h) from the command line. A running server re-reads the
// key file on its next call, so no restart is needed. Each change is
// written to the audit log (auth/audit_log.h) as the local operator's.
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
  std::string id;             // revoke
};

// Adds `keys` and its three subcommands to `app`, filling `*options` (which
// must outlive the parse).
CLI::App* AddKeysCommand(CLI::App& app, KeysOptions* options);

// Runs whichever subcommand was parsed; the process's exit code. `create`
// prints the new key as its last line, and nothing else on stdout after it.
int RunKeys(const CLI::App& keys_command, const KeysOptions& options);

}  // namespace somm
