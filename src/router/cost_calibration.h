// CostCalibration: how much longer a batch takes when serving than its
// profile says, per variant on each device ("cpu", "cuda:0"), learned from
// the batches the router sees finish.
//
// Why: a query is charged its share of its batch's measured hardware time
// (docs/selection.md, "What a query pays"), while the selector predicts that
// charge from the profile. Profiles time one reused input back to back on
// warm caches; serving adds a fresh input, caches cooled by the request's
// own handling and neighbours on the same cores. That difference is mostly a
// fixed time per batch (tens of microseconds on a CPU, several times a small
// model's profiled compute), so it is learned as milliseconds to add to the
// profiled batch time, not as a ratio.
//
// The overhead differs between models (about 30 us for the digits logistic
// regression, 75 us for the CNN on one CPU thread here), so each variant
// on a device has its own. A variant without enough recent batches of its
// own gets the device's, learned from every variant's batches there: close
// enough that a variant that has served does not look dearer than one that
// has not merely for having been measured (which would send queries, and
// loads, to unmeasured variants).
//
// An overhead is a quantile (Options::quantile) of measured minus profiled
// over the last Options::window batches, never below 0 (a profile slower
// than serving stays as it is). It counts once Options::min_batches batches
// are in, so that one or two batches do not set it; few, because until then
// a query is predicted from a prior (CandidateOverheadMs), and the first
// batches after a load are no longer the model's slow first runs (the
// worker warms each instance on its serving thread, Batcher::WarmUp).
// The first batch after an instance has idled (Options::cold_after) runs on
// caches that other work has taken, at several times a settled batch's time
// (digits-logistic: about 300 us against 40). Such batches are learnt apart
// (ObserveCold), per variant and per device, and predict the next query
// that finds its variant's instances idle (CandidateIsCold); they do not
// enter the settled figures, where the first of them would make a variant
// look dearer than it is for its next 64 batches.
//
// Batches older than Options::max_age are forgotten: a burst of other work
// that pushed the predictions above the clients' ceilings (so that no batch
// runs to correct them) does not keep queries out for good. Only the cost prediction uses it; predicted latency
// stays the profile's.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <absl/container/flat_hash_map.h>

#include "cluster/cluster_state.h"
#include "common/clock.h"
#include "common/mutex.h"
#include "selector/selector.h"

namespace somm {

class CostCalibration {
 public:
  using TimePoint = Clock::TimePoint;

  struct Options {
    // Batches remembered per variant and per device.
    int window = 64;
    // Batches needed before the overhead counts (0 until then).
    int min_batches = 4;
    // Which quantile of measured - profiled is the overhead. The median:
    // a higher one would err high more often, but after an idle spell the
    // first few batches run on cold caches at several times the usual time,
    // and a quantile that they set would refuse a tight ceiling until
    // max_age clears them, then again after the next first few.
    double quantile = 0.5;
    // Batches older than this no longer count. Short, because when every
    // query has a ceiling, a prediction that a burst pushed above them stays
    // there (no batch runs to lower it) until the burst's batches expire.
    std::chrono::milliseconds max_age{5000};
    // An instance group that has run no query for this long serves its next
    // batch cold (CandidateIsCold).
    std::chrono::milliseconds cold_after{1000};
    // Cold batches remembered per variant and per device; they count from
    // the first. Rare by nature, so they are kept longer than settled ones,
    // but not for good: a disturbed one would otherwise keep every query
    // that finds its instances idle out of a tight ceiling (and no cold
    // batch would run to correct it).
    int cold_window = 16;
    std::chrono::milliseconds cold_max_age{30000};
  };

  CostCalibration() : CostCalibration(Options()) {}
  explicit CostCalibration(Options options);

  // A batch of `variant` ("model:version:variant") on `device`
  // (Device::ToString()) finished at `now` after `measured_ms`; its profile
  // predicted `profiled_ms` for that batch size. Ignored when either time
  // is not positive.
  void Observe(const std::string& device, const std::string& variant, double measured_ms,
               double profiled_ms, TimePoint now);

  // The same for a batch that ran cold (its instance had idled): learnt
  // apart, for the next query that finds its instances idle.
  void ObserveCold(const std::string& device, const std::string& variant, double measured_ms,
                   double profiled_ms, TimePoint now);

  const Options& options() const { return options_; }

  // Milliseconds to add to a profiled batch time of `variant` on `device`:
  // its own, else the device's, else 0.
  double OverheadMs(const std::string& device, const std::string& variant, TimePoint now) const;

  // The same two, apart: each set only when its batches count, so that a
  // caller with a better prior than the device's (what the variant's
  // instances measured when they loaded) can put it between them.
  struct Learnt {
    std::optional<double> variant_ms;
    std::optional<double> device_ms;
    // A cold batch's (ObserveCold): the variant's own, else the device's.
    std::optional<double> cold_ms;
  };
  Learnt Lookup(const std::string& device, const std::string& variant, TimePoint now) const;

 private:
  struct Differences {
    std::vector<double> ring;    // up to Options::window, in ms
    std::vector<double> sorted;  // the ring's values in order (kept so, per batch)
    size_t next = 0;             // where the next one goes once the ring is full
    double overhead_ms = 0;    // the quantile of `ring`, at least 0 (set once it counts)
    TimePoint last{};          // when the newest one finished
  };
  struct ColdDifferences {
    std::vector<double> ring;  // up to Options::cold_window, in ms
    size_t next = 0;
    double median_ms = 0;  // of `ring`, at least 0 (set as each comes in)
    TimePoint last{};      // when the newest one finished
  };
  struct DeviceDifferences {
    Differences all;
    absl::flat_hash_map<std::string, Differences> by_variant;
    ColdDifferences cold;
    absl::flat_hash_map<std::string, ColdDifferences> cold_by_variant;
  };
  void AddCold(ColdDifferences& d, double difference, TimePoint now) const;
  void Add(Differences& d, double difference, TimePoint now) const;
  // Recent enough, and enough batches, to count.
  bool Counts(const Differences& d, TimePoint now) const;

  const Options options_;
  mutable SharedMutex mu_;
  absl::flat_hash_map<std::string, DeviceDifferences> by_device_ SOMM_GUARDED_BY(mu_);
};

// What a batch of candidate `c` adds to its profile in the predicted charge
// (Candidate::batch_overhead_ms), from the best figure there is, in order:
// the variant's own served batches, once they count (`learnt`); what its
// instances measured when they loaded (GroupState::warm_overhead_ms; the
// largest among `groups` of it on that device), so that the first queries
// after a load are predicted at what they will cost and not at the profile
// alone (a few microseconds for the digits models, against tens served);
// what its model's other instances on the device measured at load (the
// same model's variants share most of it; a variant that needs a load has
// no instance yet); the device's served batches; else 0.
double CandidateOverheadMs(const CostCalibration::Learnt& learnt, const Candidate& c,
                           const std::vector<cluster::GroupState>& groups);

// Whether candidate `c`'s next batch runs cold: it has loaded groups on its
// device and none of them has run a query for `cold_after` (GroupState::
// last_used; a group's clock starts when its instances finished their
// warm-up). A candidate that needs a load is not: its instances warm up
// right before its query.
bool CandidateIsCold(const Candidate& c, const std::vector<cluster::GroupState>& groups,
                     cluster::TimePoint now, std::chrono::milliseconds cold_after);

}  // namespace somm
