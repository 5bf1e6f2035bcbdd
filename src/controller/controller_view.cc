// The controller's view for placement (controller.h): the store's state
// with loads under way and unreported counted as loading groups,
// unreachable workers left out, and the reservations a load takes and
// gives back.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>

#include "controller/controller.h"
#include "controller/placement.h"

namespace somm {
namespace {

constexpr int64_t kMiB = 1024 * 1024;

// The loading group that stands for `bytes` of (worker, label) taken by
// loads under way or unreported (PlacementView()); `model` holds the label.
cluster::GroupState TakenGroup(const std::string& worker, const std::string& label,
                               int64_t bytes) {
  cluster::GroupState g;
  g.worker = worker;
  g.model = label;
  g.device = "cpu";
  g.loading = true;
  g.replicas = 1;
  g.memory_bytes = bytes;
  return g;
}


// Removes the entries of the workers in `gone`. A function, not a lambda
// over the member: clang's lock analysis follows a lambda's captures back to
// the guarded member but cannot see that the lambda runs under its lock.
template <typename Entry>
void DropWorkers(std::vector<Entry>* entries,
                 const std::map<std::string, cluster::TimePoint>& gone) {
  std::erase_if(*entries, [&gone](const Entry& e) { return gone.count(e.worker) > 0; });
}

}  // namespace

std::shared_ptr<const cluster::ClusterState> Controller::ReadStore(bool fresh) {
  if (fresh && options_.fresh_reports) {
    for (const std::string& id : workers_.Ids()) {
      if (auto stub = workers_.Find(id)) store_.PutWorker(stub->Report());
    }
  }
  return store_.Read();
}

void Controller::ReadTickState() {
  const auto snapshot = ReadStore(true);
  bool catalog_changed = false;
  // Listing every version (thousands at scale) only when the catalog says
  // its records moved.
  const uint64_t changes = catalog_.VersionsChanged();
  if (!catalog_listed_ || changes != catalog_changes_) {
    std::vector<VersionPtr> versions = catalog_.All();
    catalog_changes_ = changes;
    catalog_listed_ = true;
    if (versions != catalog_versions_) {
      // A version record's options never change (VersionOptions keys them
      // by record), so the same records give the same rows.
      catalog_options_.clear();
      for (const VersionPtr& v : versions) version_options_.Append(v, &catalog_options_);
      catalog_versions_ = std::move(versions);
      catalog_changed = true;
    }
  }
  cluster::ClusterState& state = tick_state_;
  state.devices = snapshot->devices;
  state.groups = snapshot->groups;
  state.demand = snapshot->demand;
  if (snapshot->options.empty()) {
    if (catalog_changed || !tick_options_are_catalog_ ||
        state.options.size() != catalog_options_.size()) {
      state.options = catalog_options_;
      tick_options_scaled_by_ = 1.0;
    }
    // Else the same rows as the last tick's, their latencies scaled by
    // tick_options_scaled_by_: Tick() rescales them only if its slowdown
    // differs.
    tick_options_are_catalog_ = true;
  } else {
    state.options = snapshot->options;
    state.options.insert(state.options.end(), catalog_options_.begin(), catalog_options_.end());
    tick_options_are_catalog_ = false;
    tick_options_scaled_by_ = 1.0;
  }
}

int64_t Controller::EstimateBytes(const VersionRecord& v, const std::string& variant,
                                  const HardwareConfig& hw, bool* guessed) const {
  if (guessed) *guessed = false;
  for (const auto& p : v.profiles) {
    if (p.variant != variant) continue;
    if (const HardwareProfile* hp = p.For(hw)) return static_cast<int64_t>(hp->peak_memory_mb * kMiB);
  }
  // Unprofiled: what the worker measured for this variant (now or when it
  // was last loaded), else twice the file (weights plus the framework's
  // copies and workspace) until measured.
  const std::string label = cluster::GroupLabel(v.config.name, v.version, variant, hw);
  const auto state = store_.Read();
  for (const auto& g : state->groups) {
    if (control::HasLabel(g, label) && !g.loading && g.memory_bytes > 0) return g.memory_bytes;
  }
  {
    MutexLock lock(&placement_mu_);
    auto it = measured_.find(label);
    if (it != measured_.end()) return it->second;
  }
  if (guessed) *guessed = true;
  std::error_code ec;
  const auto file_bytes = static_cast<int64_t>(std::filesystem::file_size(v.path, ec));
  return ec ? 0 : 2 * file_bytes;
}

StatusOr<std::vector<cluster::Action>> Controller::Reserve(const std::string& label,
                                                           int64_t extra_bytes,
                                                           std::string* worker) {
  MutexLock lock(&placement_mu_);
  PlacementView();
  cluster::ClusterState& state = view_.state;
  // Never its own victim: its groups count as loading for this placement
  // only (the view is shared with the next one).
  struct OwnGroups {
    cluster::ClusterState& state;
    std::vector<size_t> marked;
    ~OwnGroups() {
      for (size_t i : marked) state.groups[i].loading = false;
    }
  } own{state, {}};
  for (size_t i = 0; i < state.groups.size(); ++i) {
    cluster::GroupState& g = state.groups[i];
    if (!g.loading && control::HasLabel(g, label)) {
      g.loading = true;
      own.marked.push_back(i);
    }
  }
  if (!options_.managed || extra_bytes <= 0) {
    // Static provisioning places without evicting; a worker is still chosen.
    if (worker->empty()) {
      auto placed = control::PlaceAcrossWorkers(state, std::max<int64_t>(extra_bytes, 0), "cpu",
                                                label, Now());
      if (placed.ok()) *worker = placed->worker;
      else if (!state.devices.empty()) *worker = state.devices.front().worker;
    }
    reserved_[{*worker, label}] += std::max<int64_t>(extra_bytes, 0);
    if (extra_bytes > 0) SetTakenInView(*worker, label, TakenInView(*worker, label) + extra_bytes);
    return std::vector<cluster::Action>{};
  }
  auto placed = worker->empty()
                    ? control::PlaceAcrossWorkers(state, extra_bytes, "cpu", label, Now())
                    : control::Place(control::WorkerShare(state, *worker), extra_bytes, "cpu",
                                     Now());
  if (!placed.ok()) {
    if (worker->empty()) NoteShortfall("refused " + label + ": " + placed.status().message());
    return ResourceExhausted("cannot place " + label + ": " + placed.status().message());
  }
  std::vector<cluster::Action> evictions;
  if (worker->empty()) {
    for (const control::EvictionVictim& v : placed->victims) {
      const cluster::GroupState& g = state.groups[v.group];
      // Evicting a group in use for another is the cluster short of memory:
      // its queries come back and evict something else.
      if (g.uses_total > 0 && std::chrono::duration<double>(Now() - g.last_used).count() <=
                                  options_.in_use_window_s) {
        NoteShortfall("evicted " + cluster::GroupLabel(g) + ", in use, for " + label);
      }
    }
    *worker = placed->worker;
    evictions = control::EvictionActions(state, *placed);
  } else {
    evictions = control::EvictionActions(control::WorkerShare(state, *worker), *placed);
  }
  reserved_[{*worker, label}] += extra_bytes;
  SetTakenInView(*worker, label, TakenInView(*worker, label) + extra_bytes);
  return evictions;
}

void Controller::NoteShortfall(const std::string& what) {
  ++shortfalls_.total;
  shortfalls_.last = what;
  spdlog::info("control: placement short of memory: {}", what);
}

Controller::Shortfalls Controller::PlacementShortfalls() const {
  MutexLock lock(&placement_mu_);
  return shortfalls_;
}


const cluster::ClusterState& Controller::PlacementView() {
  const cluster::TimePoint now = Now();
  auto snapshot = store_.Read();
  if (view_.source == snapshot && view_.epoch == placement_epoch_ && now < view_.valid_until) {
    return view_.state;
  }
  // What placement reads (devices and groups, WithoutInstances); not the
  // demand, which it never reads.
  // Cleared, not replaced: the groups' storage (hundreds of KB at scale)
  // is kept from one view to the next.
  cluster::ClusterState& state = view_.state;
  state.options.clear();
  state.demand.clear();
  state.groups.clear();
  view_.taken_at.clear();
  state.devices = snapshot->devices;
  state.groups.reserve(snapshot->groups.size());
  for (const cluster::GroupState& g : snapshot->groups) {
    state.groups.push_back(cluster::WithoutInstances(g));
  }
  DropUnreachable(&state);
  // Loads under way count as loading groups: never victims, and their memory
  // is taken. So do loads done whose group the store does not show yet (the
  // worker's report trails its answer), until it does.
  std::map<std::pair<std::string, std::string>, int64_t> taken = reserved_;
  // (worker, label) -> its groups, and worker -> its devices, built once: a
  // scan of every group (device) per entry made this quadratic at scale.
  // Only the groups of workers that an entry names are indexed (labelling
  // every group of the cluster per view was most of its cost).
  std::map<std::pair<std::string, std::string>, std::vector<size_t>> groups_at;
  if (!unreported_.empty() || !busy_.empty()) {
    std::unordered_set<std::string_view> named;
    for (const auto& [at, _] : unreported_) named.insert(at.first);
    for (const auto& [at, _] : busy_) named.insert(at.first);
    for (size_t i = 0; i < state.groups.size(); ++i) {
      const cluster::GroupState& g = state.groups[i];
      if (named.count(g.worker) == 0) continue;
      groups_at[{g.worker, cluster::GroupLabel(g)}].push_back(i);
    }
  }
  auto groups_of = [&groups_at](const std::pair<std::string, std::string>& at)
      -> const std::vector<size_t>& {
    static const std::vector<size_t> kNone;
    auto found = groups_at.find(at);
    return found == groups_at.end() ? kNone : found->second;
  };
  // The view holds until the first entry that it shows lapses.
  cluster::TimePoint valid_until = cluster::TimePoint::max();
  for (auto it = unreported_.begin(); it != unreported_.end();) {
    const std::vector<size_t>& at = groups_of(it->first);
    // A loop, not std::any_of with a lambda: clang's lock analysis cannot
    // see that a lambda runs under placement_mu_, held here.
    bool shown = false;
    for (size_t i : at) shown = shown || !state.groups[i].loading;
    if (shown || it->second.second <= now) {
      it = unreported_.erase(it);
    } else {
      taken[it->first] += it->second.first;
      valid_until = std::min(valid_until, it->second.second);
      ++it;
    }
  }
  for (auto it = busy_.begin(); it != busy_.end();) {
    if (it->second <= now) {
      it = busy_.erase(it);
      continue;
    }
    valid_until = std::min(valid_until, it->second);
    for (size_t i : groups_of(it->first)) {
      state.groups[i].executing = std::max<int64_t>(state.groups[i].executing, 1);
    }
    ++it;
  }
  for (const auto& [_, until] : evicted_) valid_until = std::min(valid_until, until);
  for (const auto& [_, until] : unreachable_) valid_until = std::min(valid_until, until);
  // Bytes taken per worker, added to its CPU devices in one pass over the
  // devices (few workers have any; an index of every device per view cost
  // more than the view's other work).
  std::unordered_map<std::string_view, int64_t> taken_on;
  for (const auto& [where, bytes] : taken) {
    if (bytes <= 0) continue;
    taken_on[where.first] += bytes;
    view_.taken_at[where] = state.groups.size();
    state.groups.push_back(TakenGroup(where.first, where.second, bytes));
  }
  if (!taken_on.empty()) {
    for (cluster::DeviceState& d : state.devices) {
      if (d.name != "cpu") continue;
      if (auto on = taken_on.find(d.worker); on != taken_on.end()) d.used_bytes += on->second;
    }
  }
  view_.source = std::move(snapshot);
  view_.epoch = placement_epoch_;
  view_.valid_until = valid_until;
  return state;
}

int64_t Controller::TakenInView(const std::string& worker, const std::string& label) const {
  auto at = view_.taken_at.find({worker, label});
  return at == view_.taken_at.end() ? 0 : view_.state.groups[at->second].memory_bytes;
}

void Controller::SetTakenInView(const std::string& worker, const std::string& label,
                                int64_t bytes) {
  if (!ViewCurrent()) return;  // rebuilt when next read
  const int64_t before = TakenInView(worker, label);
  if (bytes == before) return;
  if (bytes <= 0) {
    ChangedPlacement();  // a rebuild shows no group for it
    return;
  }
  cluster::ClusterState& state = view_.state;
  auto [at, added] = view_.taken_at.try_emplace({worker, label}, state.groups.size());
  if (added) {
    state.groups.push_back(TakenGroup(worker, label, bytes));
  } else {
    state.groups[at->second].memory_bytes = bytes;
  }
  for (cluster::DeviceState& d : state.devices) {
    if (d.name == "cpu" && d.worker == worker) d.used_bytes += bytes - before;
  }
}

void Controller::MarkUnreachable(const std::string& worker) {
  MutexLock lock(&placement_mu_);
  unreachable_[worker] = Now() + kUnreachableFor;
  ChangedPlacement();
}

void Controller::PruneDropped() {
  const cluster::TimePoint now = Now();
  std::erase_if(evicted_, [now](const auto& e) { return e.second <= now; });
  std::erase_if(unreachable_, [now](const auto& e) { return e.second <= now; });
}

bool Controller::Dropped(const cluster::GroupState& g) const {
  if (unreachable_.count(g.worker) > 0) return true;
  if (g.loading) return false;
  for (auto it = evicted_.lower_bound({g.worker, std::string()});
       it != evicted_.end() && it->first.first == g.worker; ++it) {
    if (control::HasLabel(g, it->first.second)) return true;
  }
  return false;
}

void Controller::DropUnreachable(cluster::ClusterState* state) {
  PruneDropped();
  // Groups evicted that the store still shows (the worker's report trails
  // its answer) are gone: a query for one must load it again, with its
  // memory reserved, not find it "present".
  for (const auto& [at, _] : evicted_) {
    // Named, not a structured binding: the lambda below captures them,
    // which clang accepts only from version 16.
    const std::string& worker = at.first;
    const std::string& label = at.second;
    for (const cluster::GroupState& g : state->groups) {
      if (g.worker != worker || g.loading || !control::HasLabel(g, label)) continue;
      for (auto& d : state->devices) {
        if (d.worker == worker && d.name == g.device) d.used_bytes -= g.memory_bytes * g.replicas;
      }
    }
    std::erase_if(state->groups, [&](const cluster::GroupState& g) {
      return g.worker == worker && !g.loading && control::HasLabel(g, label);
    });
  }
  if (unreachable_.empty()) return;
  DropWorkers(&state->devices, unreachable_);
  DropWorkers(&state->groups, unreachable_);
}

void Controller::Release(const std::string& worker, const std::string& label, bool loaded_new,
                         bool measure) {
  // Read before the lock (the store's lock is taken outside placement_mu_),
  // and only when needed: at 1,000 workers each read after a change merges
  // the whole cluster's reports again.
  std::shared_ptr<const cluster::ClusterState> state;
  if (measure) state = store_.Read();
  MutexLock lock(&placement_mu_);
  const std::pair<std::string, std::string> key{worker, label};
  auto reservation = reserved_.find(key);
  const int64_t reserved = reservation == reserved_.end() ? 0 : reservation->second;
  // What PlacementView() counts for the pair after this: the new group's
  // bytes until the store shows it, else what was unreported before.
  int64_t taken = 0;
  if (loaded_new && reserved > 0) {
    const cluster::TimePoint until = Now() + kReportWithin;
    unreported_[key] = {reserved, until};
    view_.valid_until = std::min(view_.valid_until, until);
    taken = reserved;
    // Shown already (not loading) in the view's snapshot: a rebuild drops it.
    if (ViewCurrent()) {
      for (const cluster::GroupState& g : view_.state.groups) {
        if (g.worker == worker && !g.loading && control::HasLabel(g, label)) taken = 0;
      }
    }
  } else if (unreported_.count(key) > 0) {
    taken = TakenInView(worker, label) - reserved;
  }
  if (reservation != reserved_.end()) reserved_.erase(reservation);
  if (loaded_new && evicted_.erase(key) > 0) ChangedPlacement();
  SetTakenInView(worker, label, taken);
  if (!state) return;
  for (const auto& g : state->groups) {
    if (!g.loading && g.memory_bytes > 0 && control::HasLabel(g, label)) {
      measured_[label] = std::max(measured_[label], g.memory_bytes);
    }
  }
}

void Controller::FitBudget(const std::string& worker, const std::string& protect) {
  std::vector<cluster::Action> evictions;
  {
    MutexLock lock(&placement_mu_);
    cluster::ClusterState state = control::WorkerShare(*store_.Read(), worker);
    for (auto& g : state.groups) {
      if (control::HasLabel(g, protect)) g.loading = true;
    }
    auto placed = control::Place(state, 0, "cpu", Now());
    if (!placed.ok()) {
      spdlog::warn("memory budget exceeded after loading {}: {}", protect, placed.status().message());
      return;
    }
    evictions = control::EvictionActions(state, *placed);
  }
  SendEvictions(std::move(evictions), "the measured size of " + protect + " took the budget over",
                /*urgent=*/false);
}

}  // namespace somm
