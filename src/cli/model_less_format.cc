#include "cli/model_less_format.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>

namespace somm {
namespace {

// Left-aligned columns two spaces apart, each as wide as its widest cell.
class TextTable {
 public:
  explicit TextTable(std::vector<std::string> header) { rows_.push_back(std::move(header)); }
  void Add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }

  std::string Render() const {
    std::vector<size_t> width;
    for (const auto& row : rows_) {
      if (width.size() < row.size()) width.resize(row.size(), 0);
      for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
    }
    std::string out;
    for (const auto& row : rows_) {
      std::string line;
      for (size_t c = 0; c < row.size(); ++c) {
        line += row[c];
        if (c + 1 < row.size()) line += std::string(width[c] - row[c].size() + 2, ' ');
      }
      out += line + "\n";
    }
    return out;
  }

 private:
  std::vector<std::vector<std::string>> rows_;
};

std::string Fixed(double value, int digits) {
  if (std::isnan(value)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, value);
  return buf;
}

std::string General(double value) {
  if (std::isnan(value)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.3g", value);
  return buf;
}

double LatencyAtBatchOne(const LatencyCurve& curve) {
  for (const LatencyPoint& p : curve.points) {
    if (p.batch == 1) return p.latency_ms;
  }
  return curve.Predict(1);
}

std::string UtcTime(int64_t unix_ms) {
  const std::time_t seconds = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>(unix_ms % 1000));
  return buf;
}

}  // namespace

StatusOr<TensorSpec> ParseTensorFlag(std::string_view text, const std::string& flag) {
  const auto bad = [&](const std::string& why) {
    return InvalidArgument(flag + " '" + std::string(text) + "': " + why +
                           " (expected name:DATATYPE:dims, e.g. pixels:FP32:64 or "
                           "image:FP32:3x224x224)");
  };
  const size_t first = text.find(':');
  const size_t second = first == std::string_view::npos ? first : text.find(':', first + 1);
  if (second == std::string_view::npos) return bad("needs two ':'");
  TensorSpec spec;
  spec.name = std::string(text.substr(0, first));
  if (spec.name.empty()) return bad("the name is empty");
  const std::string_view datatype = text.substr(first + 1, second - first - 1);
  spec.datatype = DataTypeFromString(datatype);
  if (spec.datatype == DataType::kInvalid) {
    return bad("unknown datatype '" + std::string(datatype) + "'");
  }
  std::string_view dims = text.substr(second + 1);
  while (!dims.empty()) {
    const size_t sep = dims.find_first_of("x,");
    const std::string_view dim = dims.substr(0, sep);
    int64_t value = 0;
    const auto [ptr, ec] = std::from_chars(dim.data(), dim.data() + dim.size(), value);
    if (dim.empty() || ec != std::errc() || ptr != dim.data() + dim.size() || value < -1) {
      return bad("dimension '" + std::string(dim) + "' is not an integer >= -1");
    }
    spec.shape.push_back(value);
    if (sep == std::string_view::npos) break;
    dims.remove_prefix(sep + 1);
    if (dims.empty()) return bad("the dims end with a separator");
  }
  return spec;
}

StatusOr<std::pair<std::string, Parameter>> ParseParamFlag(std::string_view text) {
  const size_t eq = text.find('=');
  if (eq == std::string_view::npos || eq == 0) {
    return InvalidArgument("--param '" + std::string(text) +
                           "': expected key=value (e.g. latency_slo_ms=5)");
  }
  std::string key(text.substr(0, eq));
  const std::string value(text.substr(eq + 1));
  if (value == "true") return std::pair<std::string, Parameter>(std::move(key), true);
  if (value == "false") return std::pair<std::string, Parameter>(std::move(key), false);
  if (!value.empty()) {
    char* end = nullptr;
    errno = 0;
    const double number = std::strtod(value.c_str(), &end);
    if (end == value.c_str() + value.size() && errno == 0 && std::isfinite(number)) {
      return std::pair<std::string, Parameter>(std::move(key), number);
    }
  }
  return std::pair<std::string, Parameter>(std::move(key), value);
}

std::string ProgressLine(const RegistrationStatus& status) {
  constexpr int kCells = 10;
  int filled = 0;
  if (status.total > 0) {
    filled = static_cast<int>(static_cast<int64_t>(std::clamp(status.done, 0, status.total)) *
                              kCells / status.total);
  }
  std::string line = "[" + std::string(static_cast<size_t>(filled), '#') +
                     std::string(static_cast<size_t>(kCells - filled), '.') + "] " +
                     std::to_string(status.done) + "/" + std::to_string(status.total);
  if (!status.phase.empty()) line += " " + status.phase;
  return line;
}

std::string VariantsSummary(const RegistrationStatus& status) {
  if (status.state == "READY") {
    const size_t n = status.variants.size();
    return "READY (" + std::to_string(n) + (n == 1 ? " variant)" : " variants)");
  }
  if (status.state == "GENERATING") {
    return "GENERATING " + std::to_string(status.done) + "/" + std::to_string(status.total);
  }
  return status.state.empty() ? "-" : status.state;
}

std::string VariantTable(const RegistrationStatus& status) {
  // Hardware columns in order of first appearance.
  std::vector<std::string> hardware;
  for (const VariantProfile& v : status.variants) {
    for (const HardwareProfile& h : v.hardware) {
      const std::string name = h.hardware.Name();
      if (std::find(hardware.begin(), hardware.end(), name) == hardware.end()) {
        hardware.push_back(name);
      }
    }
  }
  std::vector<std::string> header = {"VARIANT", "PRECISION", "USABLE", "ACCURACY"};
  for (const std::string& hw : hardware) header.push_back(hw + " ms@1");
  header.push_back("LOAD ms");
  header.push_back("MEM MB");
  TextTable table(std::move(header));
  std::string notes;
  for (const VariantProfile& v : status.variants) {
    std::vector<std::string> row = {v.Id(), v.precision, v.usable ? "yes" : "no",
                                    v.accuracy ? Fixed(*v.accuracy, 4) : "-"};
    double load_ms = 0, memory_mb = 0;
    for (const std::string& hw : hardware) {
      std::string cell = "-";
      for (const HardwareProfile& h : v.hardware) {
        if (h.hardware.Name() != hw) continue;
        cell = Fixed(LatencyAtBatchOne(h.latency), 3);
        load_ms = std::max(load_ms, h.load_time_ms);
        memory_mb = std::max(memory_mb, h.peak_memory_mb);
      }
      row.push_back(cell);
    }
    row.push_back(v.hardware.empty() ? "-" : Fixed(load_ms, 1));
    row.push_back(v.hardware.empty() ? "-" : Fixed(memory_mb, 1));
    table.Add(std::move(row));
    if (!v.usable) notes += "unusable " + v.Id() + ": " + v.unusable_reason + "\n";
  }
  for (const std::string& s : status.skipped) notes += "skipped " + s + "\n";
  return table.Render() + notes;
}

std::string DecisionTable(const std::vector<DecisionRecord>& decisions) {
  TextTable table({"TIME (UTC)", "TARGET", "REQUIREMENTS", "OUTCOME", "VARIANT", "HW", "PRED ms",
                   "COST $", "REASON"});
  for (const DecisionRecord& d : decisions) {
    table.Add({UtcTime(d.unix_ms), d.target, d.requirements, d.outcome,
               d.variant.empty() ? "-" : d.variant, d.hardware.empty() ? "-" : d.hardware,
               Fixed(d.predicted_latency_ms, 3), General(d.cost_usd), d.reason});
  }
  return table.Render();
}

}  // namespace somm
