#include "dashboard/prometheus_text.h"

#include <cmath>
#include <cstdlib>
#include <limits>

namespace somm::dashboard {
namespace {

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == ':';
}

// Label values escape \\, \" and \n (the exposition format's three escapes).
bool ParseLabels(std::string_view& rest, std::map<std::string, std::string>& labels) {
  rest.remove_prefix(1);  // '{'
  while (true) {
    while (!rest.empty() && (rest.front() == ' ' || rest.front() == ',')) rest.remove_prefix(1);
    if (rest.empty()) return false;
    if (rest.front() == '}') {
      rest.remove_prefix(1);
      return true;
    }
    size_t n = 0;
    while (n < rest.size() && IsNameChar(rest[n])) ++n;
    if (n == 0 || n + 1 >= rest.size() || rest[n] != '=' || rest[n + 1] != '"') return false;
    std::string key(rest.substr(0, n));
    rest.remove_prefix(n + 2);
    std::string value;
    while (true) {
      if (rest.empty()) return false;
      const char c = rest.front();
      rest.remove_prefix(1);
      if (c == '"') break;
      if (c == '\\') {
        if (rest.empty()) return false;
        const char e = rest.front();
        rest.remove_prefix(1);
        value += e == 'n' ? '\n' : e;
      } else {
        value += c;
      }
    }
    labels[std::move(key)] = std::move(value);
  }
}

bool ParseValue(std::string_view text, double& value) {
  const size_t end = text.find(' ');
  const std::string token(text.substr(0, end));
  if (token == "+Inf" || token == "Inf") {
    value = std::numeric_limits<double>::infinity();
    return true;
  }
  if (token == "-Inf") {
    value = -std::numeric_limits<double>::infinity();
    return true;
  }
  if (token == "NaN") {
    value = std::nan("");
    return true;
  }
  if (token.empty()) return false;
  char* parsed_end = nullptr;
  value = std::strtod(token.c_str(), &parsed_end);
  return parsed_end == token.c_str() + token.size();
}

}  // namespace

StatusOr<std::vector<PromSample>> ParsePrometheusText(std::string_view text) {
  std::vector<PromSample> samples;
  int line_number = 0;
  while (!text.empty()) {
    const size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text.remove_prefix(eol == std::string_view::npos ? text.size() : eol + 1);
    ++line_number;
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
    if (line.empty() || line.front() == '#') continue;
    PromSample sample;
    std::string_view rest = line;
    size_t n = 0;
    while (n < rest.size() && IsNameChar(rest[n])) ++n;
    sample.name = std::string(rest.substr(0, n));
    rest.remove_prefix(n);
    bool ok = !sample.name.empty();
    if (ok && !rest.empty() && rest.front() == '{') ok = ParseLabels(rest, sample.labels);
    while (ok && !rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
    if (ok) ok = ParseValue(rest, sample.value);
    if (!ok) {
      return InvalidArgument("metrics text line " + std::to_string(line_number) +
                             " does not parse: " + std::string(line.substr(0, 200)));
    }
    samples.push_back(std::move(sample));
  }
  return samples;
}

}  // namespace somm::dashboard
