#include "router/cost_calibration.h"

#include <algorithm>
#include <cmath>

namespace somm {

CostCalibration::CostCalibration(Options options) : options_(options) {}

bool CostCalibration::Counts(const Differences& d, TimePoint now) const {
  return d.ring.size() >= static_cast<size_t>(std::max(1, options_.min_batches)) &&
         now - d.last <= options_.max_age;
}

void CostCalibration::Add(Differences& d, double difference, TimePoint now) const {
  const size_t window = static_cast<size_t>(std::max(1, options_.window));
  // After a gap longer than max_age the old batches are forgotten all at
  // once, so the ring only holds batches of the present load.
  if (!d.ring.empty() && now - d.last > options_.max_age) {
    d.ring.clear();
    d.sorted.clear();
    d.next = 0;
  }
  d.last = now;
  // The ring in order as well, updated in place: this runs for every batch,
  // and moving at most `window` doubles costs less than selecting anew.
  if (d.ring.size() < window) {
    d.ring.push_back(difference);
  } else {
    const double oldest = d.ring[d.next];
    d.sorted.erase(std::lower_bound(d.sorted.begin(), d.sorted.end(), oldest));
    d.ring[d.next] = difference;
    d.next = (d.next + 1) % window;
  }
  d.sorted.insert(std::upper_bound(d.sorted.begin(), d.sorted.end(), difference), difference);
  if (!Counts(d, now)) return;
  const double q = std::clamp(options_.quantile, 0.0, 1.0);
  const size_t at = static_cast<size_t>(std::ceil(q * static_cast<double>(d.sorted.size() - 1)));
  d.overhead_ms = std::max(0.0, d.sorted[at]);
}

void CostCalibration::Observe(const std::string& device, const std::string& variant,
                              double measured_ms, double profiled_ms, TimePoint now) {
  if (!(measured_ms > 0) || !(profiled_ms > 0)) return;
  const double difference = measured_ms - profiled_ms;
  WriterLock lock(&mu_);
  DeviceDifferences& d = by_device_[device];
  Add(d.all, difference, now);
  Add(d.by_variant[variant], difference, now);
}

void CostCalibration::AddCold(ColdDifferences& d, double difference, TimePoint now) const {
  const size_t window = static_cast<size_t>(std::max(1, options_.cold_window));
  if (!d.ring.empty() && now - d.last > options_.cold_max_age) {
    d.ring.clear();
    d.next = 0;
  }
  d.last = now;
  if (d.ring.size() < window) {
    d.ring.push_back(difference);
  } else {
    d.ring[d.next] = difference;
    d.next = (d.next + 1) % window;
  }
  std::vector<double> sorted = d.ring;
  std::sort(sorted.begin(), sorted.end());
  d.median_ms = std::max(0.0, sorted[sorted.size() / 2]);
}

void CostCalibration::ObserveCold(const std::string& device, const std::string& variant,
                                  double measured_ms, double profiled_ms, TimePoint now) {
  if (!(measured_ms > 0) || !(profiled_ms > 0)) return;
  const double difference = measured_ms - profiled_ms;
  WriterLock lock(&mu_);
  DeviceDifferences& d = by_device_[device];
  AddCold(d.cold, difference, now);
  AddCold(d.cold_by_variant[variant], difference, now);
}

double CostCalibration::OverheadMs(const std::string& device, const std::string& variant,
                                   TimePoint now) const {
  const Learnt learnt = Lookup(device, variant, now);
  return learnt.variant_ms.value_or(learnt.device_ms.value_or(0));
}

CostCalibration::Learnt CostCalibration::Lookup(const std::string& device,
                                                const std::string& variant, TimePoint now) const {
  Learnt learnt;
  ReaderLock lock(&mu_);
  auto d = by_device_.find(device);
  if (d == by_device_.end()) return learnt;
  auto v = d->second.by_variant.find(variant);
  if (v != d->second.by_variant.end() && Counts(v->second, now)) {
    learnt.variant_ms = v->second.overhead_ms;
  }
  if (Counts(d->second.all, now)) learnt.device_ms = d->second.all.overhead_ms;
  auto recent = [this, now](const ColdDifferences& c) {
    return !c.ring.empty() && now - c.last <= options_.cold_max_age;
  };
  auto cold = d->second.cold_by_variant.find(variant);
  if (cold != d->second.cold_by_variant.end() && recent(cold->second)) {
    learnt.cold_ms = cold->second.median_ms;
  } else if (recent(d->second.cold)) {
    learnt.cold_ms = d->second.cold.median_ms;
  }
  return learnt;
}

double CandidateOverheadMs(const CostCalibration::Learnt& learnt, const Candidate& c,
                           const std::vector<cluster::GroupState>& groups) {
  if (learnt.variant_ms) return *learnt.variant_ms;
  double own = -1, model = -1;
  for (const cluster::GroupState& g : groups) {
    if (g.warm_overhead_ms < 0 || g.model != c.model || g.hardware.device != c.hardware.device ||
        g.hardware.device_index != c.hardware.device_index) {
      continue;
    }
    const bool same = c.variant_id == g.model + ":" + std::to_string(g.version) + ":" + g.variant;
    double& best = same ? own : model;
    best = std::max(best, g.warm_overhead_ms);
  }
  if (own >= 0) return own;
  if (model >= 0) return model;
  return learnt.device_ms.value_or(0);
}

bool CandidateIsCold(const Candidate& c, const std::vector<cluster::GroupState>& groups,
                     cluster::TimePoint now, std::chrono::milliseconds cold_after) {
  bool loaded = false;
  for (const cluster::GroupState& g : groups) {
    if (g.loading || g.instances.empty() || g.model != c.model ||
        g.hardware.device != c.hardware.device ||
        g.hardware.device_index != c.hardware.device_index ||
        c.variant_id != g.model + ":" + std::to_string(g.version) + ":" + g.variant) {
      continue;
    }
    if (now - g.last_used < cold_after) return false;
    loaded = true;
  }
  return loaded;
}

}  // namespace somm
