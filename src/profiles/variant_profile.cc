#include "profiles/variant_profile.h"

#include <algorithm>

#include <nlohmann/json.hpp>

namespace somm {

std::string HardwareConfig::Name() const {
  if (device == DeviceKind::kCuda) return "cuda" + std::to_string(device_index);
  return "cpu" + std::to_string(threads);
}

double LatencyCurve::Measured(int64_t batch) const {
  // points are sorted by batch (Fit and FromJson sort them).
  for (size_t i = 0; i + 1 < points.size(); ++i) {
    const LatencyPoint& a = points[i];
    const LatencyPoint& b = points[i + 1];
    if (batch == a.batch) return a.latency_ms;
    if (batch > a.batch && batch < b.batch) {
      const double f =
          static_cast<double>(batch - a.batch) / static_cast<double>(b.batch - a.batch);
      return a.latency_ms + f * (b.latency_ms - a.latency_ms);
    }
  }
  if (!points.empty() && points.back().batch == batch) return points.back().latency_ms;
  if (!points.empty() && batch < points.front().batch) return points.front().latency_ms;
  return std::max(Predict(batch), 0.0);
}

LatencyCurve LatencyCurve::Fit(std::vector<LatencyPoint> points) {
  LatencyCurve c;
  std::sort(points.begin(), points.end(),
            [](const LatencyPoint& a, const LatencyPoint& b) { return a.batch < b.batch; });
  c.points = points;  // as measured, for inspection
  if (points.empty()) return c;
  // A profile taken on a shared machine catches other work's bursts. Two
  // facts bound a measurement from above, and the fit uses the bounded values:
  // a batch never takes longer than a larger batch did (so a slow small batch
  // was disturbed), and never longer than its samples one at a time.
  for (size_t i = points.size() - 1; i-- > 0;) {
    points[i].latency_ms = std::min(points[i].latency_ms, points[i + 1].latency_ms);
  }
  const LatencyPoint first = points.front();
  for (LatencyPoint& p : points) {
    const double serial = first.latency_ms * static_cast<double>(p.batch) /
                           static_cast<double>(std::max<int64_t>(first.batch, 1));
    if (p.batch > first.batch) p.latency_ms = std::min(p.latency_ms, serial);
  }
  const double n = static_cast<double>(points.size());
  if (points.size() == 1) {
    c.intercept_ms = points[0].latency_ms;
    return c;
  }
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const auto& p : points) {
    const double x = static_cast<double>(p.batch);
    sx += x;
    sy += p.latency_ms;
    sxx += x * x;
    sxy += x * p.latency_ms;
  }
  const double denom = n * sxx - sx * sx;
  c.slope_ms = denom == 0 ? 0 : (n * sxy - sx * sy) / denom;
  c.intercept_ms = (sy - c.slope_ms * sx) / n;
  // A batch never runs faster than nothing: keep both terms non-negative.
  if (c.slope_ms < 0) {
    c.slope_ms = 0;
    c.intercept_ms = sy / n;
  }
  if (c.intercept_ms < 0) c.intercept_ms = 0;
  return c;
}

const HardwareProfile* VariantProfile::For(const HardwareConfig& hw) const {
  for (const auto& h : hardware) {
    if (h.hardware == hw) return &h;
  }
  return nullptr;
}

std::string ProfileToJson(const VariantProfile& p) {
  nlohmann::json hw = nlohmann::json::array();
  for (const auto& h : p.hardware) {
    nlohmann::json points = nlohmann::json::array();
    for (const auto& pt : h.latency.points) points.push_back({{"batch", pt.batch}, {"latency_ms", pt.latency_ms}});
    hw.push_back({{"device", h.hardware.device == DeviceKind::kCuda ? "cuda" : "cpu"},
                  {"device_index", h.hardware.device_index},
                  {"threads", h.hardware.threads},
                  {"latency", {{"points", points}, {"intercept_ms", h.latency.intercept_ms},
                               {"slope_ms", h.latency.slope_ms}}},
                  {"peak_memory_mb", h.peak_memory_mb},
                  {"load_time_ms", h.load_time_ms}});
  }
  nlohmann::json j = {{"model", p.model},         {"version", p.version},
                      {"variant", p.variant},     {"precision", p.precision},
                      {"optimization", p.optimization}, {"file", p.file},
                      {"accuracy", p.accuracy ? nlohmann::json(*p.accuracy) : nlohmann::json()},
                      {"accuracy_source", p.accuracy_source},
                      {"usable", p.usable},       {"unusable_reason", p.unusable_reason},
                      {"hardware", hw}};
  return j.dump(2);
}

StatusOr<VariantProfile> ProfileFromJson(const std::string& text, const std::string& source) {
  try {
    const auto j = nlohmann::json::parse(text);
    VariantProfile p;
    p.model = j.at("model").get<std::string>();
    p.version = j.at("version").get<int64_t>();
    p.variant = j.at("variant").get<std::string>();
    p.precision = j.at("precision").get<std::string>();
    p.optimization = j.at("optimization").get<std::string>();
    p.file = j.at("file").get<std::string>();
    if (!j.at("accuracy").is_null()) p.accuracy = j.at("accuracy").get<double>();
    p.accuracy_source = j.at("accuracy_source").get<std::string>();
    p.usable = j.at("usable").get<bool>();
    p.unusable_reason = j.at("unusable_reason").get<std::string>();
    for (const auto& h : j.at("hardware")) {
      HardwareProfile hp;
      hp.hardware.device = h.at("device") == "cuda" ? DeviceKind::kCuda : DeviceKind::kCpu;
      hp.hardware.device_index = h.at("device_index").get<int>();
      hp.hardware.threads = h.at("threads").get<int>();
      std::vector<LatencyPoint> points;
      for (const auto& pt : h.at("latency").at("points")) {
        points.push_back({pt.at("batch").get<int64_t>(), pt.at("latency_ms").get<double>()});
      }
      // Sorted, as Fit leaves them (a profile edited by hand may not be):
      // LatencyCurve::Measured walks them in order.
      std::sort(points.begin(), points.end(),
                [](const LatencyPoint& a, const LatencyPoint& b) { return a.batch < b.batch; });
      hp.latency.points = points;
      hp.latency.intercept_ms = h.at("latency").at("intercept_ms").get<double>();
      hp.latency.slope_ms = h.at("latency").at("slope_ms").get<double>();
      hp.peak_memory_mb = h.at("peak_memory_mb").get<double>();
      hp.load_time_ms = h.at("load_time_ms").get<double>();
      p.hardware.push_back(std::move(hp));
    }
    return p;
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument(source + ": malformed variant profile: " + e.what());
  }
}

}  // namespace somm
