// The flags the somm commands share, added in one place so that they are
// spelled, checked and described the same way everywhere:
//
//   * AddClientFlags: what every client command takes (--url/-u, -i,
//     --api-key, --tls-ca, --tls-cert, --tls-key) into a ClientOptions
//     (cli/client_options.h). A new client command calls it and has them all.
//   * AddDurationFlag: a duration with its unit in the value ("250ms", "2s",
//     "1.5m", "1h"), the one style of the client commands' durations (as
//     `somm keys --grace 24h`); a bare number is refused, since its unit
//     would be a guess.
//   * AddHiddenAlias: an old spelling that keeps working (scripts,
//     manifests) but is left out of --help, and so of README's table.
//
// Each takes the command and pointers into an options struct that must
// outlive the parse.
#pragma once

#include <string>
#include <string_view>

#include "cli/client_options.h"
#include "common/status.h"

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace somm {

void AddClientFlags(CLI::App* command, ClientOptions* options);

// "250ms", "2s", "1.5m", "1h" (also "us") as seconds; a number alone, a
// negative one or an unknown unit is an error naming the forms.
StatusOr<double> ParseDurationFlag(std::string_view text);
// 2.0 -> "2s", 0.25 -> "250ms": the shortest exact form, for defaults.
std::string FormatDurationFlag(double seconds);

// --name DURATION into *target, counted in `unit_seconds` (0.001: the
// target holds milliseconds); the value must lie within [min_s, max_s]
// seconds. The default shown is *target's value at the call.
CLI::Option* AddDurationFlag(CLI::App* command, const std::string& name, double* target,
                             double unit_seconds, const std::string& description,
                             double min_s = 0, double max_s = 1e9);

// `name` (e.g. "--version") as a hidden second spelling of an option that
// writes `target`.
void AddHiddenAlias(CLI::App* command, const std::string& name, std::string* target);
void AddHiddenAlias(CLI::App* command, const std::string& name, double* target);

}  // namespace somm
