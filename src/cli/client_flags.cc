#include "cli/client_flags.h"

#include <CLI/CLI.hpp>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <iterator>

namespace somm {
namespace {

struct Unit {
  const char* name;
  double seconds;
};
constexpr Unit kUnits[] = {{"us", 1e-6}, {"ms", 1e-3}, {"s", 1}, {"m", 60}, {"h", 3600}};

}  // namespace

void AddClientFlags(CLI::App* cmd, ClientOptions* o) {
  cmd->add_option("--url,-u", o->url,
                  "The server: host:port, http://host:port or https://host:port (default "
                  "127.0.0.1:8000, with -i grpc 127.0.0.1:8001)");
  cmd->add_option("--protocol,-i", o->protocol, "http (REST) or grpc")
      ->capture_default_str()
      ->check(CLI::IsMember({"http", "grpc"}));
  cmd->add_option("--api-key", o->api_key,
                  "API key sent with every call (default: $SOMM_API_KEY, if set)");
  cmd->add_option("--tls-ca", o->tls.ca_file,
                  "TLS: the CA (PEM) that signed the server's certificate; HTTPS over REST, TLS "
                  "over gRPC")
      ->check(CLI::ExistingFile);
  cmd->add_option("--tls-cert", o->tls.cert_file, "Mutual TLS: client certificate (PEM)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--tls-key", o->tls.key_file, "Mutual TLS: its private key (PEM)")
      ->check(CLI::ExistingFile);
}

StatusOr<double> ParseDurationFlag(std::string_view text) {
  const auto bad = [&] {
    return InvalidArgument("'" + std::string(text) +
                           "' is not a duration: give a number and a unit, e.g. 250ms, 2s, "
                           "1.5m, 1h");
  };
  double value = 0;
  const char* end = text.data() + text.size();
  const auto [unit, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || unit == text.data() || !std::isfinite(value) || value < 0) {
    return bad();
  }
  const std::string_view suffix(unit, static_cast<size_t>(end - unit));
  for (const Unit& u : kUnits) {
    if (suffix == u.name) return value * u.seconds;
  }
  return bad();
}

std::string FormatDurationFlag(double seconds) {
  char text[64];
  // The largest unit that counts it in whole numbers.
  for (auto u = std::rbegin(kUnits); u != std::rend(kUnits); ++u) {
    const double count = seconds / u->seconds;
    if (u->seconds >= 1e-3 && count >= 1 && std::fabs(count - std::round(count)) < 1e-9) {
      std::snprintf(text, sizeof text, "%.0f%s", std::round(count), u->name);
      return text;
    }
  }
  std::snprintf(text, sizeof text, "%gs", seconds);
  return text;
}

CLI::Option* AddDurationFlag(CLI::App* cmd, const std::string& name, double* target,
                             double unit_seconds, const std::string& description, double min_s,
                             double max_s) {
  const std::string shown_default = FormatDurationFlag(*target * unit_seconds);
  CLI::Option* option = cmd->add_option_function<std::string>(
      name,
      [target, unit_seconds](const std::string& text) {
        // The check below has already parsed it.
        *target = ParseDurationFlag(text).value() / unit_seconds;
      },
      description);
  option->type_name("DURATION")
      ->default_str(*target == 0 ? "" : shown_default)
      ->check(CLI::Validator(
          [min_s, max_s](std::string& text) -> std::string {
            StatusOr<double> seconds = ParseDurationFlag(text);
            if (!seconds.ok()) return seconds.status().message();
            if (*seconds < min_s || *seconds > max_s) {
              return "'" + text + "' is outside " + FormatDurationFlag(min_s) + " to " +
                     FormatDurationFlag(max_s);
            }
            return "";
          },
          "", "duration"));
  return option;
}

void AddHiddenAlias(CLI::App* cmd, const std::string& name, std::string* target) {
  cmd->add_option(name, *target)->group("");
}

void AddHiddenAlias(CLI::App* cmd, const std::string& name, double* target) {
  cmd->add_option(name, *target)->group("");
}

}  // namespace somm
