#include "node/log_format.h"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <string_view>

#include <spdlog/details/log_msg.h>
#include <spdlog/pattern_formatter.h>

namespace somm::node {
namespace {

// spdlog's default line, with the time in UTC as JSON has it.
constexpr const char* kTextPattern = "[%Y-%m-%dT%H:%M:%S.%eZ] [%n] [%l] %v";

// "2026-11-29T01:02:03.456Z"
void AppendTime(std::chrono::system_clock::time_point t, spdlog::memory_buf_t& out) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch());
  const std::time_t seconds = static_cast<std::time_t>(ms.count() / 1000);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char text[32];
  const int n = std::snprintf(text, sizeof(text), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ",
                              utc.tm_year + 1900, utc.tm_mon + 1, utc.tm_mday, utc.tm_hour,
                              utc.tm_min, utc.tm_sec, static_cast<int>(ms.count() % 1000));
  out.append(text, text + n);
}

void Append(std::string_view s, spdlog::memory_buf_t& out) { out.append(s.data(), s.data() + s.size()); }

std::string_view LevelName(spdlog::level::level_enum level) {
  const auto& name = spdlog::level::to_string_view(level);
  return std::string_view(name.data(), name.size());
}

// A JSON string's contents (RFC 8259): quotes, backslashes and control
// characters escaped; other bytes as they are (the messages are UTF-8).
void AppendJsonEscaped(std::string_view s, spdlog::memory_buf_t& out) {
  for (const char c : s) {
    switch (c) {
      case '"': Append("\\\"", out); break;
      case '\\': Append("\\\\", out); break;
      case '\n': Append("\\n", out); break;
      case '\r': Append("\\r", out); break;
      case '\t': Append("\\t", out); break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char hex[8];
          const int n = std::snprintf(hex, sizeof(hex), "\\u%04x", static_cast<unsigned char>(c));
          out.append(hex, hex + n);
        } else {
          out.push_back(c);
        }
    }
  }
}

class JsonFormatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& out) override {
    Append("{\"time\":\"", out);
    AppendTime(msg.time, out);
    Append("\",\"logger\":\"", out);
    AppendJsonEscaped(std::string_view(msg.logger_name.data(), msg.logger_name.size()), out);
    Append("\",\"level\":\"", out);
    Append(LevelName(msg.level), out);
    Append("\",\"message\":\"", out);
    AppendJsonEscaped(std::string_view(msg.payload.data(), msg.payload.size()), out);
    Append("\"}\n", out);
  }
  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<JsonFormatter>();
  }
};

}  // namespace

Status CheckLogFormat(const std::string& format) {
  if (format == "text" || format == "json") return Status::Ok();
  return InvalidArgument("--log-format must be text or json, not '" + format + "'");
}

std::unique_ptr<spdlog::formatter> MakeLogFormatter(const std::string& format) {
  if (format == "json") return std::make_unique<JsonFormatter>();
  return std::make_unique<spdlog::pattern_formatter>(kTextPattern,
                                                     spdlog::pattern_time_type::utc);
}

}  // namespace somm::node
