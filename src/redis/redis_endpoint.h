// RedisEndpoint: where a process's Redis is and how to reach it, as the
// cluster processes' --redis flag and the environment give it.
//
// --redis takes "host:port" or a URL:
//   redis://[user@]host[:port][/db]                      plaintext
//   rediss://[user@]host[:port][/db][?ca=F&cert=F&key=F]  TLS
// The password never comes from the command line, where ps shows it to
// every user of the machine (and the controller's local provisioner passes
// --redis on to its workers): a URL that carries one is refused. It comes
// from the environment, which child processes inherit: the file that
// SOMM_REDIS_PASSWORD_FILE names (one trailing newline or more stripped),
// or SOMM_REDIS_PASSWORD itself. With a password, every connection sends
// AUTH (with the URL's user, if any: a Redis 6 ACL user) before anything
// else; with a db other than 0, SELECT.
//
// TLS (rediss://) checks the server's certificate against `ca` (a PEM
// file), or the system's trust store when no ca is given, and that it names
// the host; `cert` and `key` present a client certificate to servers that
// ask for one (Redis's tls-auth-clients). See docs/cluster-state.md.
//
// Thread-safety: values; copy freely. Nothing here prints the password:
// ToString is host:port, and every parse error shows the URL with its
// credentials left out.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "common/status.h"
#include "crypto/tls_files.h"

namespace somm::redis {

struct RedisEndpoint {
  std::string host = "127.0.0.1";
  int port = 6379;
  // Connecting, and each command's round trip, fail after this long.
  std::chrono::milliseconds timeout{1000};
  // Given to Redis (CLIENT SETNAME) after each connect, so that CLIENT LIST
  // and MONITOR tell which process sent what (bench/cluster_state_cost.sh
  // attributes commands by it). Empty: none. No spaces.
  std::string client_name;
  // AUTH [user] password after each connect when password is not empty.
  std::string user;
  std::string password;
  // SELECT db after each connect when not 0.
  int db = 0;
  // rediss://: TLS, checked against tls_files.ca_file ("" = the system's
  // trust store), with a client certificate when tls_files.cert_file is set.
  bool tls = false;
  crypto::TlsClientFiles tls_files;

  // host:port, for messages; never the password.
  std::string ToString() const;
};

// The environment's variable `name`, or null when unset. std::getenv in the
// processes; tests pass their own.
using EnvLookup = std::function<const char*(const char*)>;

inline constexpr char kRedisPasswordFileEnv[] = "SOMM_REDIS_PASSWORD_FILE";
inline constexpr char kRedisPasswordEnv[] = "SOMM_REDIS_PASSWORD";

// The --redis flag's text (see above) and the password from `env` (null:
// no environment, so no password).
// InvalidArgument names what is wrong: a bad port or db, an unknown scheme
// or TLS option, a password in the URL, both password variables set, an
// unreadable or empty password file, a user without a password.
StatusOr<RedisEndpoint> ParseRedisEndpoint(const std::string& text, const EnvLookup& env);

}  // namespace somm::redis
