#include "simulator/policy_replay.h"

#include <deque>
#include <random>
#include <tuple>

#include "simulator/replay_harness.h"

namespace somm::sim {

using replay::Grow;
using replay::Harness;
using replay::Instance;
using replay::Seconds;
using replay::TimePoint;
using replay::ZooModel;

namespace {

// One worker as INFaaS's master keeps it.
struct InfaasWorker {
  bool in_pool = false;  // INFaaS's VM daemon has it (the fleet is the simulation's)
  bool joining = false;  // asked for, not joined yet
  bool leaving = false;  // chosen to go: takes nothing new, drains
  double util = 0;       // CPU utilisation over the last VM period
  double blacklisted_until_s = -1;
  infaas::BurstState burst;
};

// What the worker's monitor keeps of one instance.
struct InfaasMonitor {
  bool blacklisted = false;
  double mean_latency_ms = 0;
};

}  // namespace

StatusOr<PolicyResult> RunInfaas(const SimulationOptions& options, const loadgen::Trace& trace) {
  const infaas::InfaasOptions& io = options.infaas;
  Harness h(options, trace);
  SOMM_RETURN_IF_ERROR(h.Init());
  std::mt19937_64 rng(options.seed * 7919 + 17);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  auto now_s = [&h] { return Seconds(h.loop().Now() - h.t0()); };
  const int fleet = h.workers();
  const int floor_workers = io.initial_workers <= 0 ? fleet : std::min(io.initial_workers, fleet);
  std::vector<InfaasWorker> ws(fleet);
  for (int w = 0; w < floor_workers; ++w) ws[w].in_pool = true;
  // The pool's size over time, for its worker-seconds.
  std::vector<std::pair<TimePoint, int>> pool_sizes = {{h.loop().Now(), floor_workers}};
  auto pool_size = [&ws] {
    return static_cast<int>(
        std::count_if(ws.begin(), ws.end(), [](const InfaasWorker& w) { return w.in_pool; }));
  };
  auto usable = [&ws](int w) { return ws[w].in_pool && !ws[w].leaving; };
  auto blacklisted = [&](int w) { return !usable(w) || now_s() < ws[w].blacklisted_until_s; };
  std::map<std::string, InfaasMonitor> monitors;                     // by instance key
  std::map<std::tuple<const ZooModel*, size_t, int>, int> backlogs;  // scale-down requests
  std::deque<std::string> recent;  // the master's last chosen variants (model-less queries)
  int last_picked = -1;
  const double period_s = std::max(io.monitor_period_s, 1e-3);
  // The master reads what the workers published: an instance is running
  // for it once its load is done and the view's lag has passed.
  const EventLoop::Duration lag = FromMs(options.view_lag_ms);
  auto seen_running = [&](const Instance& inst) {
    return usable(inst.worker) && inst.ready_at + lag <= h.loop().Now();
  };

  auto prepare = [&]() -> Status {
    // As somm starts: each model's configured instances of its
    // as-registered variant, on the pool's workers where the cores allow; a
    // model left out loads on its first query.
    std::vector<bool> avoid(fleet);
    for (int w = 0; w < fleet; ++w) avoid[w] = !ws[w].in_pool;
    int placed = 0;
    for (auto& [name, m] : h.zoo()) {
      placed += Grow(h, m, m.base, std::max(m.version->config.instance_count, 1), &avoid) > 0;
    }
    if (placed == 0 && !h.zoo().empty()) {
      return FailedPrecondition("start-up: no worker has room for any model");
    }
    return Status::Ok();
  };

  // Sends query `i` to candidate `c` of `m`: on a worker that serves it
  // when `running`, else (or when all of those are blacklisted) on the
  // least utilised worker, which loads it unless it holds it already.
  auto send = [&](size_t i, const ZooModel& m, size_t c, bool running) {
    std::vector<Instance*> held;  // the candidate's instances, by worker
    std::vector<Instance*> serving;
    for (auto& [key, inst] : h.InstancesOf(m)) {
      if (inst.model != &m || inst.cand != c) continue;
      held.push_back(&inst);
      if (seen_running(inst)) serving.push_back(&inst);
    }
    auto held_on = [&held](int worker) -> Instance* {
      for (Instance* inst : held) {
        if (inst->worker == worker) return inst;
      }
      return nullptr;
    };
    int w = -1;
    if (running && !serving.empty()) {
      std::stable_sort(serving.begin(), serving.end(), [](const Instance* a, const Instance* b) {
        return a->rate_qps < b->rate_qps;
      });
      if (serving.size() > static_cast<size_t>(std::max(io.least_loaded_workers, 1))) {
        serving.resize(std::max(io.least_loaded_workers, 1));
      }
      std::shuffle(serving.begin(), serving.end(), rng);
      std::vector<int> order;
      std::vector<bool> flags;
      for (const Instance* inst : serving) {
        order.push_back(inst->worker);
        flags.push_back(blacklisted(inst->worker));
      }
      w = infaas::PickServingWorker(order, flags);
    }
    const Candidate& cand = m.cands[c];
    if (w < 0) {
      std::vector<double> util(fleet);
      std::vector<bool> can_hold(fleet);
      for (int k = 0; k < fleet; ++k) {
        util[k] = ws[k].util;
        can_hold[k] = usable(k) && (held_on(k) != nullptr || (h.FreeCores(k) >= cand.cores &&
                                                              h.FreeBytes(k) >= cand.memory_bytes));
      }
      w = infaas::PickLoadingWorker(util, can_hold, last_picked);
      if (w >= 0) last_picked = w;
    }
    Instance* inst = w < 0 ? nullptr : held_on(w);
    if (w >= 0 && inst == nullptr) {
      auto placed = h.Set(m, c, w, 1);
      if (placed.ok()) inst = &h.instances().at(*placed);
    }
    if (inst == nullptr) {
      h.Finish(i, Unavailable("infaas: no worker can hold " + m.name + "/" + cand.variant));
      return;
    }
    if (infaas::NoteQuery(ws[w].burst, now_s() * 1000, io) && pool_size() > 1) {
      ws[w].blacklisted_until_s =
          std::max(ws[w].blacklisted_until_s, now_s() + io.burst_blacklist_s);
    }
    h.Dispatch(i, *inst);
  };

  auto arrive = [&](size_t i) {
    const loadgen::TraceQuery& q = trace.queries[i];
    // The candidates the master may choose among: the row's model's, or
    // every model's of its task, that honour its floor and ceiling.
    std::vector<Candidate> cands;
    std::vector<std::pair<const ZooModel*, size_t>> origin;
    for (const ZooModel* m : h.ModelsOf(q)) {
      for (size_t c = 0; c < m->cands.size(); ++c) {
        if (!Honours(m->cands[c], q)) continue;
        cands.push_back(m->cands[c]);
        origin.emplace_back(m, c);
      }
    }
    if (cands.empty()) {
      h.Refuse(i, "infaas: no variant of " + h.trace_zoo().TargetOf(q).label +
                      " honours the query's min_accuracy and max_cost");
      return;
    }
    // Running: loaded on some worker; blacklisted: on the worker that
    // serves it least.
    std::vector<infaas::VariantState> states(cands.size());
    std::map<std::pair<const ZooModel*, size_t>, size_t> index;
    for (size_t k = 0; k < origin.size(); ++k) index[origin[k]] = k;
    std::vector<double> least_rate(cands.size(), std::numeric_limits<double>::infinity());
    for (const ZooModel* m : h.ModelsOf(q)) {
      for (auto& [key, inst] : h.InstancesOf(*m)) {
        auto it = index.find({inst.model, inst.cand});
        if (inst.model != m || it == index.end() || !seen_running(inst)) continue;
        const size_t k = it->second;
        states[k].running = true;
        if (inst.rate_qps < least_rate[k]) {
          least_rate[k] = inst.rate_qps;
          auto mon = monitors.find(key);
          states[k].blacklisted = mon != monitors.end() && mon->second.blacklisted;
        }
      }
    }
    auto id_of = [](const std::pair<const ZooModel*, size_t>& o) {
      return o.first->name + "#" + std::to_string(o.second);
    };
    infaas::VariantChoice choice;
    if (!q.task.empty()) {
      std::vector<size_t> recent_here;
      for (const std::string& id : recent) {
        for (size_t k = 0; k < origin.size(); ++k) {
          if (id_of(origin[k]) == id) recent_here.push_back(k);
        }
      }
      choice = infaas::ChooseForTask(cands, states, q.latency_slo_ms, recent_here, io);
      if (choice.ok) infaas::RememberChoice(recent, id_of(origin[choice.candidate]), io);
    } else {
      choice = infaas::ChooseForModel(cands, states, q.latency_slo_ms, uniform(rng), io);
    }
    if (!choice.ok) {
      h.Finish(i, Unavailable("infaas: " + choice.why + " for " + h.trace_zoo().TargetOf(q).label));
      return;
    }
    const auto [m, c] = origin[choice.candidate];
    send(i, *m, c, choice.running);
  };

  // The worker's monitor and autoscaler, every period; the VM daemon every
  // vm_period_s.
  double vm_elapsed_s = 0;
  infaas::VmState vm;
  auto scale_workers = [&] {
    // Per worker, per model (by name: the same order every run).
    std::map<std::pair<int, std::string>, std::vector<infaas::VariantLoad>> loads;
    for (auto& [key, inst] : h.instances()) {
      infaas::VariantLoad l;
      l.candidate = inst.cand;
      l.replicas = inst.ready_at <= h.loop().Now() ? inst.replicas : 0;
      l.rate_qps = inst.rate_qps;
      loads[{inst.worker, inst.model->name}].push_back(l);
    }
    for (const auto& [where, here] : loads) {
      const int w = where.first;
      const ZooModel* m = &h.zoo().at(where.second);
      if (!usable(w)) continue;
      for (const infaas::ScaleRequest& r :
           infaas::ScaleModel(m->cands, here, h.FreeBytes(w), h.FreeCores(w), io)) {
        int have = 0;
        const Instance* inst = nullptr;
        for (const auto& [key, i] : h.InstancesOf(*m)) {
          if (i.model == m && i.cand == r.candidate && i.worker == w) inst = &i;
        }
        // A variant still loading here has a request under way: the
        // released daemon takes no other for it until that one is done.
        if (inst != nullptr && inst->ready_at > h.loop().Now()) continue;
        if (inst != nullptr) have = inst->replicas;
        const int want = infaas::CarryOut(r, have, backlogs[{m, r.candidate, w}], io);
        if (want == have || (want == 0 && inst != nullptr && inst->in_flight > 0)) continue;
        (void)h.Set(*m, r.candidate, w, want);
      }
    }
  };
  auto vm_step = [&] {
    std::vector<int> pool;
    std::vector<double> util;
    for (int w = 0; w < fleet; ++w) {
      const double busy = h.TakeBusyCoreSeconds(w);
      ws[w].util = busy / (std::max(h.Cores(w), 1) * std::max(vm_elapsed_s, 1e-9));
      if (ws[w].in_pool) {
        pool.push_back(w);
        util.push_back(ws[w].util);
      }
    }
    vm_elapsed_s = 0;
    const infaas::VmDecision d =
        infaas::VmStep(vm, util, static_cast<int>(pool.size()), fleet, floor_workers, io);
    for (int k : d.blacklist) {
      ws[pool[k]].blacklisted_until_s =
          std::max(ws[pool[k]].blacklisted_until_s, now_s() + io.vm_blacklist_s);
    }
    if (d.add) {
      for (int w = 0; w < fleet; ++w) {
        if (ws[w].in_pool || ws[w].joining) continue;
        // A new worker joins, empty, after the simulation's provisioning delay.
        ws[w].joining = true;
        h.loop().After(FromMs(options.provision_delay_s * 1000), [&, w] {
          ws[w].joining = false;
          ws[w].in_pool = true;
          pool_sizes.emplace_back(h.loop().Now(), pool_size());
        });
        break;
      }
    }
    if (d.remove >= 0) ws[pool[d.remove]].leaving = true;
  };
  auto tick = [&] {
    const auto now = h.loop().Now();
    for (auto& [key, inst] : h.instances()) {
      InfaasMonitor& mon = monitors[key];
      if (inst.ready_at <= now) {
        infaas::MonitorSample s;
        s.replicas = inst.replicas;
        s.period_s = period_s;
        s.arrived = inst.sent_period;
        s.completed = inst.done_period;
        s.latency_sum_ms = inst.latency_ms_period;
        s.outstanding = inst.in_flight;
        s.profiled_ms = inst.model->cands[inst.cand].batch1_ms;
        const infaas::BlacklistVerdict v =
            infaas::JudgeVariant(s, mon.blacklisted, mon.mean_latency_ms, io);
        mon.blacklisted = v.blacklisted;
        mon.mean_latency_ms = v.mean_latency_ms;
      }
      inst.rate_qps = static_cast<double>(inst.sent_period) / period_s;
      inst.sent_period = 0;
      inst.done_period = 0;
      inst.latency_ms_period = 0;
    }
    scale_workers();
    // A leaving worker's instances go once idle; then the worker.
    for (int w = 0; w < fleet; ++w) {
      if (!ws[w].leaving) continue;
      std::vector<std::pair<const ZooModel*, size_t>> idle;
      bool any = false;
      for (const auto& [key, inst] : h.instances()) {
        if (inst.worker != w) continue;
        any = true;
        if (inst.in_flight == 0) idle.emplace_back(inst.model, inst.cand);
      }
      for (const auto& [m, c] : idle) (void)h.Set(*m, c, w, 0);
      if (!any) {
        ws[w].leaving = false;
        ws[w].in_pool = false;
        pool_sizes.emplace_back(now, pool_size());
      }
    }
    for (auto it = monitors.begin(); it != monitors.end();) {
      it = h.instances().count(it->first) ? std::next(it) : monitors.erase(it);
    }
    vm_elapsed_s += period_s;
    if (vm_elapsed_s + 1e-9 >= io.vm_period_s) vm_step();
  };
  auto result = h.Run(
      "infaas", prepare, arrive, tick,
      std::chrono::duration_cast<EventLoop::Duration>(std::chrono::duration<double>(period_s)),
      FromMs(h.max_load_ms()) + std::chrono::seconds(1));
  if (!result.ok()) return result;
  // Worker-seconds are the pool's over the replay, not the fleet's.
  const TimePoint t_end = h.t0() + FromMs(result->duration_s * 1000);
  result->worker_seconds = 0;
  for (size_t k = 0; k < pool_sizes.size(); ++k) {
    const TimePoint from = std::max(pool_sizes[k].first, h.t0());
    const TimePoint to =
        k + 1 < pool_sizes.size() ? std::min(pool_sizes[k + 1].first, t_end) : t_end;
    if (to > from) result->worker_seconds += pool_sizes[k].second * Seconds(to - from);
  }
  return result;
}

}  // namespace somm::sim
