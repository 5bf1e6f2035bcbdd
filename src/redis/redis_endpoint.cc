#include "redis/redis_endpoint.h"

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace somm::redis {
namespace {

constexpr char kUseEnv[] =
    "set SOMM_REDIS_PASSWORD_FILE (a file holding it) or SOMM_REDIS_PASSWORD instead";

// `text` as messages may show it: a URL's user information cut down to the
// user name, so that a password given there is never repeated.
std::string Shown(const std::string& text) {
  const size_t scheme = text.find("://");
  const size_t start = scheme == std::string::npos ? 0 : scheme + 3;
  // The last @: a password may hold @, / or ? itself.
  const size_t at = text.rfind('@');
  if (at == std::string::npos || at < start) return text;
  const size_t colon = text.find(':', start);
  if (colon == std::string::npos || colon > at) return text;
  return text.substr(0, colon) + ":(hidden)" + text.substr(at);
}

// A number in [low, high], or nullopt.
std::optional<long> Number(const std::string& s, long low, long high) {
  if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos || s.size() > 10) {
    return std::nullopt;
  }
  const long n = std::strtol(s.c_str(), nullptr, 10);
  if (n < low || n > high) return std::nullopt;
  return n;
}

// %XX escapes decoded (a user name or a file path may need them in a URL).
StatusOr<std::string> Decoded(const std::string& s, const std::string& shown) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out += s[i];
      continue;
    }
    const std::string hex = i + 2 < s.size() ? s.substr(i + 1, 2) : "";
    if (hex.size() != 2 || hex.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos) {
      return InvalidArgument("redis address '" + shown +
                             "': a % is not followed by two hex digits");
    }
    out += static_cast<char>(std::strtol(hex.c_str(), nullptr, 16));
    i += 2;
  }
  return out;
}

// host, host:port, [v6], [v6]:port.
Status ParseHostPort(const std::string& hostport, const std::string& shown, RedisEndpoint* e) {
  std::string port;
  if (!hostport.empty() && hostport[0] == '[') {
    const size_t close = hostport.find(']');
    if (close == std::string::npos) {
      return InvalidArgument("redis address '" + shown + "': '[' without ']'");
    }
    e->host = hostport.substr(1, close - 1);
    const std::string after = hostport.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') return InvalidArgument("redis address '" + shown + "': junk after ']'");
      port = after.substr(1);
      if (port.empty()) port = "-";  // "[::1]:" names no port: say so below
    }
  } else {
    const size_t colon = hostport.rfind(':');
    e->host = hostport.substr(0, colon);
    if (colon != std::string::npos) {
      port = hostport.substr(colon + 1);
      if (port.empty()) port = "-";
    }
  }
  if (e->host.empty()) return InvalidArgument("redis address '" + shown + "' names no host");
  if (!port.empty()) {
    const std::optional<long> p = Number(port, 1, 65535);
    if (!p) {
      return InvalidArgument("redis address '" + shown + "': port '" + (port == "-" ? "" : port) +
                             "' is not a number in 1..65535");
    }
    e->port = static_cast<int>(*p);
  }
  return Status::Ok();
}

// ?ca=F&cert=F&key=F, TLS only.
Status ParseQuery(const std::string& query, const std::string& shown, RedisEndpoint* e) {
  std::istringstream parts(query);
  for (std::string part; std::getline(parts, part, '&');) {
    if (part.empty()) continue;
    const size_t eq = part.find('=');
    const std::string key = part.substr(0, eq);
    SOMM_ASSIGN_OR_RETURN(std::string value,
                          Decoded(eq == std::string::npos ? "" : part.substr(eq + 1), shown));
    std::string* field = key == "ca"     ? &e->tls_files.ca_file
                         : key == "cert" ? &e->tls_files.cert_file
                         : key == "key"  ? &e->tls_files.key_file
                                         : nullptr;
    if (field == nullptr) {
      return InvalidArgument("redis address '" + shown + "': unknown option '" + key +
                             "' (rediss:// takes ca, cert and key)");
    }
    if (value.empty()) {
      return InvalidArgument("redis address '" + shown + "': option '" + key + "' names no file");
    }
    *field = value;
  }
  if (e->tls_files.cert_file.empty() != e->tls_files.key_file.empty()) {
    return InvalidArgument("redis address '" + shown + "': cert and key go together");
  }
  return Status::Ok();
}

// The password from the environment; "" when none is set.
StatusOr<std::string> PasswordFromEnv(const EnvLookup& env) {
  const char* file = env ? env(kRedisPasswordFileEnv) : nullptr;
  const char* value = env ? env(kRedisPasswordEnv) : nullptr;
  const bool has_file = file != nullptr && *file != '\0';
  const bool has_value = value != nullptr && *value != '\0';
  if (has_file && has_value) {
    return InvalidArgument(std::string("both ") + kRedisPasswordFileEnv + " and " +
                           kRedisPasswordEnv + " are set: set one");
  }
  if (has_value) return std::string(value);
  if (!has_file) return std::string();
  std::ifstream in(file, std::ios::binary);
  std::ostringstream read;
  if (in) read << in.rdbuf();
  if (!in || in.bad()) {
    return InvalidArgument(std::string(kRedisPasswordFileEnv) + " names " + file +
                           ", which cannot be read: " + std::strerror(errno));
  }
  std::string password = read.str();
  while (!password.empty() && (password.back() == '\n' || password.back() == '\r')) {
    password.pop_back();
  }
  if (password.empty()) {
    return InvalidArgument(std::string(kRedisPasswordFileEnv) + " names " + file +
                           ", which holds no password");
  }
  return password;
}

}  // namespace

std::string RedisEndpoint::ToString() const {
  const std::string h = host.find(':') == std::string::npos ? host : "[" + host + "]";
  return h + ":" + std::to_string(port);
}

StatusOr<RedisEndpoint> ParseRedisEndpoint(const std::string& text, const EnvLookup& env) {
  const std::string shown = Shown(text);
  RedisEndpoint e;
  std::string rest = text;
  const size_t scheme_end = text.find("://");
  const bool url = scheme_end != std::string::npos;
  if (url) {
    const std::string scheme = text.substr(0, scheme_end);
    if (scheme != "redis" && scheme != "rediss") {
      return InvalidArgument("redis address '" + shown + "': scheme '" + scheme +
                             "' is neither redis:// nor rediss://");
    }
    e.tls = scheme == "rediss";
    rest = text.substr(scheme_end + 3);
  }

  // User information first, up to the last @, so that a password holding
  // '/', '?' or '@' is still recognised as one (and never shown).
  if (const size_t at = rest.rfind('@'); at != std::string::npos) {
    const std::string userinfo = rest.substr(0, at);
    rest = rest.substr(at + 1);
    if (userinfo.find(':') != std::string::npos) {
      return InvalidArgument("redis address '" + shown +
                             "' carries a password; passwords are not taken from the command "
                             "line, where ps shows them: " +
                             kUseEnv);
    }
    if (!url) {
      return InvalidArgument("redis address '" + shown + "': a user needs the redis:// form");
    }
    SOMM_ASSIGN_OR_RETURN(e.user, Decoded(userinfo, shown));
    if (e.user.empty()) return InvalidArgument("redis address '" + shown + "': empty user name");
  }
  if (!url && text.find_first_of("/?") != std::string::npos) {
    return InvalidArgument("redis address '" + shown +
                           "': a database or options need the redis:// form");
  }
  std::string query;
  if (const size_t q = rest.find('?'); q != std::string::npos) {
    query = rest.substr(q + 1);
    rest = rest.substr(0, q);
  }
  std::string path;
  if (const size_t slash = rest.find('/'); slash != std::string::npos) {
    path = rest.substr(slash + 1);
    rest = rest.substr(0, slash);
  }
  SOMM_RETURN_IF_ERROR(ParseHostPort(rest, shown, &e));
  if (!path.empty()) {
    const std::optional<long> db = Number(path, 0, INT_MAX);
    if (!db) {
      return InvalidArgument("redis address '" + shown + "': database '" + path +
                             "' is not a number of 0 or more");
    }
    e.db = static_cast<int>(*db);
  }
  if (!query.empty()) {
    if (!e.tls) {
      return InvalidArgument("redis address '" + shown +
                             "': options (ca, cert, key) are for rediss:// only");
    }
    SOMM_RETURN_IF_ERROR(ParseQuery(query, shown, &e));
  }
  SOMM_ASSIGN_OR_RETURN(e.password, PasswordFromEnv(env));
  if (!e.user.empty() && e.password.empty()) {
    return InvalidArgument("redis address '" + shown + "' names user '" + e.user +
                           "' but no password is set: " + kUseEnv);
  }
  return e;
}

}  // namespace somm::redis
