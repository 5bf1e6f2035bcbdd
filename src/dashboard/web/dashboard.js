// somm's dashboard: static pages over the JSON endpoints of the REST port
// (docs/dashboard.md). No build step: this file is served as written.
//
// The overview polls GET /v2/somm/overview, whose counters are monotonic
// (the same ones /metrics serves), and differences successive samples in
// the browser: queries/s, SLO attainment and p50/p99 over a window. The
// history lives in this page only (the last HISTORY_S seconds), so somm keeps
// no time series for it and an idle server pays nothing.
//
// Authentication: the key typed in the header goes, as
// "Authorization: Bearer <key>", on every request; the pages show what the
// server answers with that key.
"use strict";

const POLL_MS = 2000;
const ACTIONS_POLL_MS = 5000;
const HISTORY_S = 600;
const QPS_WINDOW_S = 10;
const WINDOW_S = 60;

const state = {
  // The key lives as long as the tab (sessionStorage), never on disk for
  // every later visitor of this browser profile to find (localStorage).
  key: sessionStorage.getItem("somm-api-key") || "",
  history: [],  // {t: seconds, o: overview}
  actions: [],
  decisions: [],
  charts: {},
  page: "overview",
  timers: [],
};

// ---- fetching

async function api(path, init = {}) {
  const headers = Object.assign({}, init.headers || {});
  if (state.key) headers["Authorization"] = "Bearer " + state.key;
  const res = await fetch(path, Object.assign({}, init, {headers}));
  if (res.status === 401 || res.status === 403) {
    throw new Error(`${path}: ${res.status} (the API key is missing or may not see this)`);
  }
  const text = await res.text();
  let body = null;
  try { body = text ? JSON.parse(text) : null; } catch (e) { body = null; }
  if (!res.ok) {
    const message = body && body.error ? body.error : text;
    const err = new Error(`${path}: ${res.status} ${message}`);
    err.status = res.status;
    throw err;
  }
  return body;
}

function showError(err) {
  const banner = document.getElementById("banner");
  if (!err) {
    banner.hidden = true;
    banner.textContent = "";
    return;
  }
  banner.hidden = false;
  banner.textContent = String(err.message || err);
}

// ---- formatting

function fmt(n, digits = 0) {
  if (n === null || n === undefined || Number.isNaN(n)) return "–";
  return Number(n).toLocaleString("en-US", {minimumFractionDigits: digits, maximumFractionDigits: digits});
}
function fmtMs(ms) {
  if (ms === null || ms === undefined || Number.isNaN(ms)) return "–";
  return ms < 1 ? fmt(ms, 3) : ms < 100 ? fmt(ms, 2) : fmt(ms, 0);
}
function fmtBytes(b) {
  if (!b) return "0 B";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (b >= 1024 && i < units.length - 1) { b /= 1024; i++; }
  return `${b.toFixed(i ? 1 : 0)} ${units[i]}`;
}
function fmtTime(ms) { return new Date(ms).toLocaleTimeString("en-GB"); }
function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") e.className = v;
    else if (k.startsWith("data-")) e.setAttribute(k, v);
    else e[k] = v;
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}
function setFigure(id, text, value) {
  const e = document.getElementById(id);
  e.textContent = text;
  if (value !== undefined) e.dataset.value = String(value);
}
function fillTable(id, rows) {
  const body = document.querySelector(`#${id} tbody`);
  body.replaceChildren(...rows);
}

// ---- the overview's arithmetic (pure functions of two samples)

function total(o, key) { return o.totals ? o.totals[key] : 0; }

// Summed over models: the request-duration histogram's cumulative counts.
function latencyBuckets(o) {
  const out = new Map();  // le_ms (null = +Inf) -> cumulative count
  for (const m of o.models || []) {
    m.latency.le_ms.forEach((le, i) => {
      const key = le === null ? Infinity : le;
      out.set(key, (out.get(key) || 0) + m.latency.cumulative[i]);
    });
  }
  return out;
}

// The q-quantile of the queries between two samples, interpolated within
// its bucket (as Prometheus's histogram_quantile does).
function quantileBetween(older, newer, q) {
  const a = latencyBuckets(older), b = latencyBuckets(newer);
  const bounds = [...b.keys()].sort((x, y) => x - y);
  const counts = bounds.map((le) => b.get(le) - (a.get(le) || 0));
  const n = counts.length ? counts[counts.length - 1] : 0;
  if (!(n > 0)) return null;
  const rank = q * n;
  let prevBound = 0, prevCount = 0;
  for (let i = 0; i < bounds.length; i++) {
    if (counts[i] >= rank) {
      if (!Number.isFinite(bounds[i])) return prevBound;  // in the +Inf bucket
      const inBucket = counts[i] - prevCount;
      return prevBound + (bounds[i] - prevBound) * (inBucket > 0 ? (rank - prevCount) / inBucket : 1);
    }
    prevBound = bounds[i];
    prevCount = counts[i];
  }
  return prevBound;
}

function between(older, newer) {
  const dt = (newer.unix_ms - older.unix_ms) / 1000;
  const d = (k) => total(newer, k) - total(older, k);
  const slo = d("slo_queries");
  return {
    dt,
    qps: dt > 0 ? d("success") / dt : null,
    failed_qps: dt > 0 ? d("failure") / dt : null,
    attainment: slo > 0 ? d("slo_met_queries") / slo : null,
    p50: quantileBetween(older, newer, 0.5),
    p99: quantileBetween(older, newer, 0.99),
  };
}

// The oldest sample no older than `seconds` before the newest.
function sampleAgo(seconds) {
  const h = state.history;
  if (h.length < 2) return null;
  const newest = h[h.length - 1];
  for (const s of h) {
    if (newest.t - s.t <= seconds + 0.5) return s === newest ? null : s;
  }
  return null;
}

// ---- charts

function chartWidth(id) {
  const box = document.getElementById(id);
  return Math.max(360, (box.parentElement.clientWidth || 640) - 20);
}

// Vertical marks at the control actions' times, with their kind.
function actionMarks() {
  return {
    hooks: {
      draw: [(u) => {
        const ctx = u.ctx;
        const [xmin, xmax] = [u.scales.x.min, u.scales.x.max];
        ctx.save();
        ctx.font = `${11 * devicePixelRatio}px system-ui`;
        for (const a of state.actions) {
          const t = a.unix_ms / 1000;
          if (t < xmin || t > xmax) continue;
          const x = Math.round(u.valToPos(t, "x", true));
          ctx.strokeStyle = a.kind.includes("evict") || a.kind.includes("unload") || a.kind.includes("scale_in")
            ? "#c0392b" : "#8e44ad";
          ctx.setLineDash([4, 3]);
          ctx.beginPath();
          ctx.moveTo(x, u.bbox.top);
          ctx.lineTo(x, u.bbox.top + u.bbox.height);
          ctx.stroke();
          ctx.fillStyle = ctx.strokeStyle;
          ctx.fillText(a.kind, x + 3, u.bbox.top + 12 * devicePixelRatio);
        }
        ctx.restore();
      }],
    },
  };
}

function makeChart(id, series, axes, withActions) {
  if (typeof uPlot === "undefined") return null;
  const opts = {
    width: chartWidth(id),
    height: 220,
    series: [{}].concat(series),
    axes: [{}].concat(axes),
    scales: {x: {time: true}, pct: {range: [0, 100]}},
    plugins: withActions ? [actionMarks()] : [],
    legend: {live: false},
  };
  const empty = [[], ...series.map(() => [])];
  return new uPlot(opts, empty, document.getElementById(id));
}

function loadSeries() {
  return [
    {label: "answered q/s", stroke: "#2d6cdf", width: 2},
    {label: "failed q/s", stroke: "#c0392b", width: 1},
  ];
}

function ensureCharts() {
  if (typeof uPlot === "undefined") {
    showError(new Error("The charting library (uPlot) is not in this build: run scripts/setup, " +
                        "which installs it with npm, and rebuild. Figures and tables still work."));
    return;
  }
  if (!state.charts.load) {
    state.charts.load = makeChart("chart-load", loadSeries(), [{label: "queries/s"}], true);
    state.charts.latency = makeChart("chart-latency", [
      {label: "p50 ms", stroke: "#16a085", width: 2},
      {label: "p99 ms", stroke: "#e67e22", width: 2},
      {label: "SLO attainment %", stroke: "#7f8c8d", width: 1, scale: "pct"},
    ], [{label: "ms"}, {side: 1, scale: "pct", label: "%", grid: {show: false}}], false);
    state.charts.actions = makeChart("chart-actions", loadSeries(), [{label: "queries/s"}], true);
  }
}

function chartData() {
  const h = state.history;
  const x = [], qps = [], failed = [], p50 = [], p99 = [], att = [];
  for (let i = 1; i < h.length; i++) {
    const w = between(h[i - 1].o, h[i].o);
    x.push(h[i].t);
    qps.push(w.qps);
    failed.push(w.failed_qps);
    p50.push(w.p50);
    p99.push(w.p99);
    att.push(w.attainment === null ? null : 100 * w.attainment);
  }
  return {x, qps, failed, p50, p99, att};
}

function drawCharts() {
  if (!state.charts.load) return;
  const d = chartData();
  // One time axis for load and actions: the last HISTORY_S seconds.
  const now = Date.now() / 1000;
  const range = {min: now - Math.min(HISTORY_S, Math.max(60, now - (state.history[0] || {t: now}).t)), max: now};
  for (const name of ["load", "actions"]) {
    const c = state.charts[name];
    c.setData([d.x, d.qps, d.failed], false);
    c.setScale("x", range);
  }
  state.charts.latency.setData([d.x, d.p50, d.p99, d.att], false);
  state.charts.latency.setScale("x", range);
}

// ---- overview

function renderOverview() {
  const h = state.history;
  if (!h.length) return;
  const o = h[h.length - 1].o;
  const recent = sampleAgo(QPS_WINDOW_S);
  const minute = sampleAgo(WINDOW_S) || h[0];
  const q = recent ? between(recent.o, o) : null;
  const w = minute && minute.o !== o ? between(minute.o, o) : null;
  setFigure("qps", q ? fmt(q.qps, 1) : "–", q ? q.qps : "");
  setFigure("attainment", w && w.attainment !== null ? fmt(100 * w.attainment, 1) + " %" : "no SLO queries",
            w && w.attainment !== null ? w.attainment : "");
  setFigure("latency", w && w.p50 !== null ? `${fmtMs(w.p50)} / ${fmtMs(w.p99)} ms` : "–");
  setFigure("cost", "$" + fmt(o.cluster.cost_usd_per_hour, 4), o.cluster.cost_usd_per_hour);
  setFigure("inflight", fmt(o.inflight_queries), o.inflight_queries);
  setFigure("total-success", fmt(total(o, "success")), total(o, "success"));
  setFigure("total-failure", fmt(total(o, "failure")), total(o, "failure"));
  setFigure("total-slo", fmt(total(o, "slo_queries")), total(o, "slo_queries"));
  setFigure("total-slo-met", fmt(total(o, "slo_met_queries")), total(o, "slo_met_queries"));
  setFigure("total-replicas", `${fmt(o.cluster.replicas)} on ${fmt(o.cluster.workers)} worker(s)`,
            o.cluster.replicas);
  setFigure("total-memory",
            `${fmtBytes(o.cluster.memory_used_bytes)} / ${fmtBytes(o.cluster.memory_budget_bytes)}`,
            o.cluster.memory_used_bytes);

  // Failures by status code, after a model was chosen, and the selector's
  // rejections (no variant meets the requirements), before one was.
  const older = minute ? minute.o : o;
  const rejections = (x) => Object.assign({}, x.failures_by_reason || {},
    (x.decisions_total || {}).rejected ? {"rejected by the selector": x.decisions_total.rejected} : {});
  const now = rejections(o), before = rejections(older);
  const reasons = Object.keys(now).sort();
  fillTable("rejections", reasons.length ? reasons.map((r) => el("tr", {"data-reason": r},
      el("td", {}, r),
      el("td", {"data-value": now[r]}, fmt(now[r])),
      el("td", {}, fmt(now[r] - (before[r] || 0)))))
    : [el("tr", {}, el("td", {colSpan: 3, class: "note"}, "none"))]);

  const oldModels = new Map((older.models || []).map((m) => [m.model + ":" + m.version, m]));
  fillTable("per-model", (o.models || []).filter((m) => m.model).map((m) => {
    const prev = oldModels.get(m.model + ":" + m.version);
    const failed = Object.values(m.failure_total).reduce((a, b) => a + b, 0);
    const one = (x) => ({totals: {success: x.success_total, failure: 0, slo_queries: x.slo_queries_total,
                                  slo_met_queries: x.slo_met_queries_total},
                         models: [x], unix_ms: 0});
    let rate = null, att = null, p99 = null;
    if (prev && minute && minute.o !== o) {
      const a = one(prev), b = one(m);
      a.unix_ms = older.unix_ms;
      b.unix_ms = o.unix_ms;
      const win = between(a, b);
      rate = win.qps; att = win.attainment; p99 = win.p99;
    }
    return el("tr", {"data-model": m.model},
      el("td", {}, m.model), el("td", {}, m.version), el("td", {}, fmt(rate, 1)),
      el("td", {"data-value": m.success_total}, fmt(m.success_total)),
      el("td", {"data-value": failed}, fmt(failed)),
      el("td", {}, att === null ? "–" : fmt(100 * att, 1) + " %"),
      el("td", {}, fmtMs(p99)));
  }));
  drawCharts();
  document.getElementById("page-overview").dataset.rendered = String(o.unix_ms);
}

async function pollOverview() {
  try {
    const o = await api("/v2/somm/overview");
    state.history.push({t: o.unix_ms / 1000, o});
    while (state.history.length && state.history[state.history.length - 1].t - state.history[0].t > HISTORY_S) {
      state.history.shift();
    }
    if (state.page === "overview" || state.page === "actions") {
      renderOverview();
      showError(null);
    }
  } catch (err) {
    showError(err);
  }
}

// ---- control actions

async function pollActions() {
  try {
    const a = await api("/v2/somm/actions?limit=500");
    state.actions = a.actions;
    if (state.page === "actions") renderActions();
    if (state.page === "overview" && state.charts.load) state.charts.load.redraw(false, false);
  } catch (err) {
    showError(err);
  }
}

function renderActions() {
  fillTable("actions", state.actions.length ? state.actions.map((a) => el("tr", {"data-kind": a.kind},
      el("td", {}, fmtTime(a.unix_ms)), el("td", {}, a.kind), el("td", {}, a.target),
      el("td", {}, a.group), el("td", {}, a.hardware), el("td", {class: "reason"}, a.reason)))
    : [el("tr", {}, el("td", {colSpan: 6, class: "note"}, "no control action yet"))]);
  drawCharts();
  document.getElementById("page-actions").dataset.rendered = String(state.actions.length);
}

// ---- models and tasks

function hardwareName(h) { return h.device === "cuda" ? `cuda${h.device_index}` : `cpu${h.threads}`; }

function profileChart(box, variants) {
  if (typeof uPlot === "undefined") return;
  const curves = [];
  const batches = new Set();
  for (const v of variants) {
    for (const h of v.hardware) {
      const pts = h.latency.points || [];
      if (!pts.length) continue;
      pts.forEach((p) => batches.add(p.batch));
      curves.push({label: `${v.variant}@${hardwareName(h)}`, pts});
    }
  }
  if (!curves.length) return;
  const xs = [...batches].sort((a, b) => a - b);
  const data = [xs, ...curves.map((c) => xs.map((b) => {
    const p = c.pts.find((q) => q.batch === b);
    return p ? p.latency_ms : null;
  }))];
  const palette = ["#2d6cdf", "#e67e22", "#16a085", "#8e44ad", "#c0392b", "#7f8c8d", "#d35400", "#27ae60"];
  new uPlot({
    width: 440, height: 220,
    scales: {x: {time: false}},
    series: [{label: "batch"}].concat(curves.map((c, i) => ({label: c.label, stroke: palette[i % palette.length],
                                                            width: 2, spanGaps: true, points: {show: true}}))),
    axes: [{label: "batch size"}, {label: "latency ms"}],
    legend: {live: false},
  }, data, box);
}

async function renderModels() {
  const box = document.getElementById("models");
  const [index, workers] = await Promise.all([
    api("/v2/repository/index", {method: "POST", headers: {"Content-Type": "application/json"}, body: "{}"}),
    api("/v2/somm/workers"),
  ]);
  const placed = new Map();  // model -> [{worker, group}]
  for (const w of workers.workers) {
    for (const g of w.groups) {
      if (!placed.has(g.model)) placed.set(g.model, []);
      placed.get(g.model).push({worker: w.worker, g});
    }
  }
  const names = [...new Set(index.map((r) => r.name))].sort();
  const models = await Promise.all(names.map(async (name) => {
    const rows = index.filter((r) => r.name === name);
    let meta = null, variants = null;
    try { meta = await api(`/v2/models/${encodeURIComponent(name)}`); } catch (e) { meta = null; }
    try { variants = await api(`/v2/repository/models/${encodeURIComponent(name)}/variants`); } catch (e) { variants = null; }
    const task = meta && meta.parameters && meta.parameters.task ? meta.parameters.task : "(no task)";
    return {name, rows, meta, variants, task};
  }));
  const byTask = new Map();
  for (const m of models) {
    if (!byTask.has(m.task)) byTask.set(m.task, []);
    byTask.get(m.task).push(m);
  }
  const sections = [];
  for (const task of [...byTask.keys()].sort()) {
    const section = el("div", {class: "task", "data-task": task}, el("h2", {class: "task-name"}, "task " + task));
    for (const m of byTask.get(task)) {
      const list = (m.variants && m.variants.variants) || [];
      const where = placed.get(m.name) || [];
      const versions = m.rows.map((r) => `v${r.version || "?"} ${r.state}${r.reason ? " (" + r.reason + ")" : ""}`).join(", ");
      const table = el("table", {class: "variants"},
        el("thead", {}, el("tr", {}, ...["Variant", "Hardware", "Accuracy", "Memory", "Load ms", "Usable"].map((h) => el("th", {}, h)))),
        el("tbody", {}, ...list.flatMap((v) => v.hardware.map((h) => el("tr", {"data-variant": v.variant},
          el("td", {}, `v${v.version} ${v.variant}`), el("td", {}, hardwareName(h)),
          el("td", {}, v.accuracy === null ? "–" : fmt(v.accuracy, 4)),
          el("td", {}, fmt(h.peak_memory_mb, 1) + " MB"), el("td", {}, fmt(h.load_time_ms, 0)),
          el("td", {}, v.usable ? "yes" : "no: " + v.unusable_reason))))));
      const loaded = el("table", {class: "placement"},
        el("thead", {}, el("tr", {}, ...["Loaded", "Worker", "Replicas", "Queued", "Rate q/s"].map((h) => el("th", {}, h)))),
        el("tbody", {}, ...(where.length ? where.map(({worker, g}) => el("tr", {"data-replicas": g.replicas},
          el("td", {}, `v${g.version} ${g.variant}@${g.hardware}${g.loading ? " (loading)" : ""}`),
          el("td", {}, worker), el("td", {}, g.replicas), el("td", {}, g.queued), el("td", {}, fmt(g.recent_rate_qps, 1))))
          : [el("tr", {}, el("td", {colSpan: 5, class: "note"}, "not loaded"))])));
      const chart = el("div", {class: "profile-chart"});
      const card = el("div", {class: "model", "data-model": m.name},
        el("h2", {}, m.name), el("p", {class: "note"}, versions + (m.variants ? ` · variants: ${m.variants.state}` : "")),
        el("div", {class: "body"}, chart, el("div", {}, loaded, table)));
      section.append(card);
      profileChart(chart, list);
    }
    sections.push(section);
  }
  box.replaceChildren(...sections);
  document.getElementById("page-models").dataset.rendered = String(models.length);
}

// ---- workers

async function renderWorkers() {
  const w = await api("/v2/somm/workers");
  const cards = w.workers.map((wk) => {
    const devices = wk.devices.map((d) => {
      const share = d.budget_bytes > 0 ? d.used_bytes / d.budget_bytes : 0;
      return el("tr", {"data-device": d.name},
        el("td", {}, d.name), el("td", {}, String(d.cores)),
        el("td", {}, el("span", {class: "bar" + (share > 0.9 ? " high" : "")}, el("span", {style: ""})),
           ` ${fmtBytes(d.used_bytes)} / ${fmtBytes(d.budget_bytes)}`));
    });
    const groups = wk.groups.map((g) => el("tr", {"data-group": `${g.model}:${g.version}:${g.variant}@${g.hardware}`},
      el("td", {}, `${g.model} v${g.version}`), el("td", {}, g.variant), el("td", {}, g.hardware),
      el("td", {"data-value": g.replicas}, String(g.replicas)), el("td", {}, fmtBytes(g.memory_bytes * g.replicas)),
      el("td", {}, String(g.queued)), el("td", {}, String(g.executing)),
      el("td", {}, g.instances.map((i) => `#${i.instance_id} (${i.queued_samples} queued)`).join(", ") ||
                   (g.loading ? "loading" : "–"))));
    const card = el("div", {class: "worker", "data-worker": wk.worker},
      el("h3", {}, `${wk.worker}`, wk.zone ? ` · zone ${wk.zone}` : "", " · ",
         el("span", {class: "ok"}, "reporting"), ` · ${wk.replicas} replica(s), ${wk.queued} queued, ${wk.executing} executing`),
      el("table", {}, el("thead", {}, el("tr", {}, ...["Device", "Cores", "Memory used / budget"].map((h) => el("th", {}, h)))),
         el("tbody", {}, ...devices)),
      el("table", {}, el("thead", {}, el("tr", {}, ...["Model", "Variant", "Hardware", "Replicas", "Memory", "Queued", "Executing", "Instances"].map((h) => el("th", {}, h)))),
         el("tbody", {}, ...(groups.length ? groups : [el("tr", {}, el("td", {colSpan: 8, class: "note"}, "no instance loaded"))]))));
    // Bars are sized after creation: the style property is not an attribute.
    card.querySelectorAll("tr[data-device]").forEach((row, i) => {
      const d = wk.devices[i];
      row.querySelector(".bar > span").style.width = `${Math.min(100, 100 * d.used_bytes / Math.max(1, d.budget_bytes))}%`;
    });
    return card;
  });
  document.getElementById("workers").replaceChildren(...(cards.length ? cards : [el("p", {class: "note"}, "no worker is reporting")]));
  fillTable("demand", w.demand.map((d) => el("tr", {},
    el("td", {}, d.model), el("td", {}, d.version), el("td", {}, fmt(d.rate_qps, 1)),
    el("td", {}, fmt(d.arrivals_total)), el("td", {}, d.latency_slo_ms ? fmt(d.latency_slo_ms, 1) : "–"))));
  document.getElementById("page-workers").dataset.rendered = String(w.workers.length);
}

// ---- decisions

function decisionTask(d) { return d.target.startsWith("task:") ? d.target.slice(5) : ""; }
function decisionModel(d) {
  if (!d.target.startsWith("task:")) return d.target;
  return d.variant ? d.variant.split(":")[0] : "";
}

function fillSelect(id, values) {
  const sel = document.getElementById(id);
  const current = sel.value;
  sel.replaceChildren(el("option", {value: ""}, "any"), ...[...values].sort().map((v) => el("option", {value: v}, v)));
  sel.value = [...values].includes(current) ? current : "";
}

function renderDecisionRows() {
  const model = document.getElementById("filter-model").value;
  const task = document.getElementById("filter-task").value;
  const outcome = document.getElementById("filter-outcome").value;
  const rows = state.decisions.filter((d) => (!model || decisionModel(d) === model) &&
    (!task || decisionTask(d) === task) && (!outcome || d.outcome === outcome));
  fillTable("decisions", rows.map((d) => el("tr", {"data-outcome": d.outcome},
    el("td", {}, fmtTime(d.unix_ms)), el("td", {}, d.target), el("td", {}, d.requirements),
    el("td", {}, d.outcome), el("td", {}, d.variant), el("td", {}, d.hardware),
    el("td", {}, d.predicted_latency_ms ? fmtMs(d.predicted_latency_ms) : "–"),
    // Measured once the query was answered; a failed one shows its status.
    el("td", {class: "actual", "data-value": d.actual_latency_ms ?? ""},
       d.actual_latency_ms !== undefined ? fmtMs(d.actual_latency_ms)
                                         : d.status ? d.status : "–"),
    el("td", {}, d.cost_usd ? d.cost_usd.toExponential(2) : "–"), el("td", {class: "reason"}, d.reason))));
  document.getElementById("decision-count").textContent = `${rows.length} of ${state.decisions.length}`;
  document.getElementById("page-decisions").dataset.rendered = String(rows.length);
}

async function renderDecisions() {
  const d = await api("/v2/somm/decisions?limit=1000");
  state.decisions = d.decisions;
  fillSelect("filter-model", new Set(state.decisions.map(decisionModel).filter(Boolean)));
  fillSelect("filter-task", new Set(state.decisions.map(decisionTask).filter(Boolean)));
  fillSelect("filter-outcome", new Set(state.decisions.map((x) => x.outcome)));
  renderDecisionRows();
}

// ---- pages

const PAGES = {
  overview: {render: async () => renderOverview(), every: 0},
  models: {render: renderModels, every: 10000},
  workers: {render: renderWorkers, every: POLL_MS},
  decisions: {render: renderDecisions, every: 5000},
  actions: {render: async () => { await pollActions(); renderActions(); }, every: 0},
};

async function show(page) {
  if (!PAGES[page]) page = "overview";
  state.page = page;
  for (const t of state.timers) clearInterval(t);
  state.timers = [];
  document.querySelectorAll(".page").forEach((s) => { s.hidden = s.id !== "page-" + page; });
  document.querySelectorAll("nav a").forEach((a) => a.classList.toggle("active", a.dataset.page === page));
  const run = async () => {
    try {
      await PAGES[page].render();
      showError(null);
    } catch (err) {
      showError(err);
    }
  };
  await run();
  if (PAGES[page].every) state.timers.push(setInterval(run, PAGES[page].every));
}

function start() {
  document.getElementById("api-key").value = state.key;
  document.getElementById("key-form").addEventListener("submit", (e) => {
    e.preventDefault();
    state.key = document.getElementById("api-key").value.trim();
    sessionStorage.setItem("somm-api-key", state.key);
    state.history = [];
    show(state.page);
  });
  for (const id of ["filter-model", "filter-task", "filter-outcome"]) {
    document.getElementById(id).addEventListener("change", renderDecisionRows);
  }
  ensureCharts();
  window.addEventListener("hashchange", () => show(location.hash.slice(1)));
  window.addEventListener("resize", () => {
    for (const [name, c] of Object.entries(state.charts)) {
      if (c) c.setSize({width: chartWidth(`chart-${name}`), height: 220});
    }
  });
  // The overview and the actions are polled whatever the page, so that
  // the history covers the time spent on other pages.
  pollOverview();
  pollActions();
  setInterval(pollOverview, POLL_MS);
  setInterval(pollActions, ACTIONS_POLL_MS);
  show(location.hash.slice(1) || "overview");
}

start();
