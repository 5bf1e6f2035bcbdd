// How a process writes its log lines (--log-format, as Triton's): "text",
// one line per message as "[2026-11-29T01:02:03.456Z] [somm] [info] message", or
// "json", one JSON object per line with the same fields:
// {"time":"2026-11-29T01:02:03.456Z","logger":"somm","level":"info",
//  "message":"..."}. Both give the time in UTC with milliseconds; JSON
// escapes the message (quotes, backslashes, control characters) so that a
// log collector reads every line whatever the message holds.
//
// Thread-safety: the formatters are spdlog's, called under its sink lock.
#pragma once

#include <memory>
#include <string>

#include <spdlog/formatter.h>

#include "common/status.h"

namespace somm::node {

// InvalidArgument for a format other than "text" and "json".
Status CheckLogFormat(const std::string& format);
// The formatter for `format` ("text" or "json"; anything else is text).
std::unique_ptr<spdlog::formatter> MakeLogFormatter(const std::string& format);

}  // namespace somm::node
