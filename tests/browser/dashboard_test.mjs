// The dashboard in a real browser: Debian's chromium, headless, driven by
// puppeteer-core, against a live `somm serve` on models/demo under a small
// load from a client in this process. It opens every page, checks that the
// figures shown match the JSON APIs and /metrics, that the browser logged
// no error, and takes a screenshot of each page.
//
// Usage: node tests/browser/dashboard_test.mjs --somm build/somm --repo models/demo
//          [--out DIR] [--screenshots DIR] [--chromium /usr/bin/chromium]
//          [--url host:port --metrics host:port]
//   --out          where the screenshots and somm's log go (default: a new temp dir)
//   --screenshots  also copy the screenshots there (scripts/dashboard_screenshots)
//   --url, --metrics  test a somm already running (e.g. a cluster's router:
//                  its REST and metrics ports) instead of starting one
// Exit 0: passed; 1: a check failed; 77: skipped (no chromium; CTest's
// SKIP_RETURN_CODE). tests/CMakeLists.txt skips it when node is missing.
import {execFileSync, spawn} from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import readline from "node:readline";

const args = Object.fromEntries(process.argv.slice(2).reduce((acc, a, i, all) => {
  if (a.startsWith("--")) acc.push([a.slice(2), all[i + 1]]);
  return acc;
}, []));
const chromiumPath = args.chromium || "/usr/bin/chromium";
if (!fs.existsSync(chromiumPath)) {
  console.log(`SKIP: no chromium at ${chromiumPath} (scripts/setup installs Debian's chromium)`);
  process.exit(77);
}
let puppeteer;
try {
  puppeteer = (await import("puppeteer-core")).default;
} catch (e) {
  console.error("FAIL: puppeteer-core is not installed: run scripts/setup (npm ci in tests/browser)");
  process.exit(1);
}
const sommBin = path.resolve(args.somm || "build/somm");
const demoRepo = path.resolve(args.repo || "models/demo");
const out = args.out ? path.resolve(args.out) : fs.mkdtempSync(path.join(os.tmpdir(), "somm-dashboard-"));
fs.mkdirSync(out, {recursive: true});

// The test's own repository: each model's model.yaml copied and its version
// folders linked, with no .somm/ state. Other tests run somm on the demo
// repository at the same time, and its variants and profiles must not change
// under this one; every run also starts from the same fresh state.
function privateRepository(from, to) {
  fs.rmSync(to, {recursive: true, force: true});
  fs.mkdirSync(to, {recursive: true});
  for (const model of fs.readdirSync(from)) {
    const src = path.join(from, model);
    if (model.startsWith(".") || !fs.existsSync(path.join(src, "model.yaml"))) continue;
    fs.mkdirSync(path.join(to, model));
    for (const entry of fs.readdirSync(src)) {
      if (entry === "model.yaml") fs.copyFileSync(path.join(src, entry), path.join(to, model, entry));
      else fs.symlinkSync(path.join(src, entry), path.join(to, model, entry));
    }
  }
  return to;
}
const repo = args.url ? demoRepo : privateRepository(demoRepo, path.join(out, "repo"));

let failures = 0;
function check(ok, what) {
  console.log(`${ok ? "ok  " : "FAIL"} ${what}`);
  if (!ok) failures++;
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// ---- somm

function startSomm() {
  const log = fs.openSync(path.join(out, "somm.log"), "w");
  const child = spawn(sommBin, ["serve", "--repo", repo, "--http-port", "0", "--grpc-port", "0",
                                "--metrics-port", "0", "--log-level", "info"],
                      {stdio: ["ignore", "pipe", log]});
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("somm serve did not start in 120 s")), 120000);
    const lines = readline.createInterface({input: child.stdout});
    lines.on("line", (line) => {
      const m = line.match(/^somm: listening http=(\d+) grpc=(\d+) metrics=(\d+)/);
      if (m) {
        clearTimeout(timer);
        resolve({child, http: Number(m[1]), metrics: Number(m[3])});
      }
    });
    child.on("exit", (code) => reject(new Error(`somm serve exited with ${code} (see ${out}/somm.log)`)));
  });
}

// --url host:port --metrics host:port: a somm already running (a cluster's
// router, say) instead of a `somm serve` of the test's own.
const somm = args.url ? {child: null, http: null, metrics: null} : await startSomm();
// Whatever ends this script (a thrown error included), somm goes with it.
process.on("exit", () => { if (somm.child && somm.child.exitCode === null) somm.child.kill("SIGKILL"); });
const base = args.url ? `http://${args.url}` : `http://127.0.0.1:${somm.http}`;
const metricsBase = args.url ? `http://${args.metrics}` : `http://127.0.0.1:${somm.metrics}`;
const getJson = async (p, init) => {
  const r = await fetch(base + p, init);
  if (!r.ok) throw new Error(`${p}: ${r.status} ${await r.text()}`);
  return r.json();
};
async function metrics() {
  const text = await (await fetch(`${metricsBase}/metrics`)).text();
  const samples = [];
  for (const line of text.split("\n")) {
    const m = line.match(/^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$/);
    if (!m) continue;
    const labels = {};
    for (const l of (m[3] || "").matchAll(/([a-zA-Z_]+)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]] = l[2];
    samples.push({name: m[1], labels, value: Number(m[4])});
  }
  return samples;
}
const sum = (samples, name, pred = () => true) =>
  samples.filter((s) => s.name === name && pred(s.labels)).reduce((a, s) => a + s.value, 0);

// ---- the load: digits queries at about 40/s, with SLOs, a task form and a
// share the selector must reject (an accuracy no variant reaches).

const digit = JSON.parse(fs.readFileSync(path.join(demoRepo, ".examples", "digit_3.json"), "utf8"));
const sent = {ok: 0, failed: 0, slo: 0};  // slo: queries with an SLO that reached a model
let loading = true;
// One query, counted as the checks below count it; true when answered.
async function send(url, parameters) {
  const r = await fetch(url, {method: "POST", headers: {"Content-Type": "application/json"},
                              body: JSON.stringify(Object.assign({}, digit, {parameters}))});
  const text = await r.text();
  if (r.ok) sent.ok++; else sent.failed++;
  // A query with an SLO counts once a model has it, answered in time, late
  // or failed; one the selector refuses ("cannot meet", or no profiled
  // variant yet on a fresh repository) never reaches one.
  const refused = text.includes("cannot meet") || text.includes("no profiled variants");
  if (parameters.latency_slo_ms && (r.ok || !refused)) sent.slo++;
  return r.ok;
}
async function client(i) {
  for (let n = 0; loading; n++) {
    const kind = n % 10;
    let url = `${base}/v2/models/digits-mlp/infer`;
    let parameters = {latency_slo_ms: 50};
    if (kind >= 6) {
      url = `${base}/v2/tasks/classification/digits/infer`;
      parameters = {latency_slo_ms: 20};
    }
    if (kind === 9) parameters = {min_accuracy: 0.99999};
    await send(url, parameters);
    await sleep(50);
  }
}
// The fresh repository's variants are profiled as somm starts; on a busy
// machine that takes a while, and until then every query with an SLO is
// refused. The load starts once one is answered (120 s at most).
for (let tries = 0; tries < 240; tries++) {
  if (await send(`${base}/v2/models/digits-mlp/infer`, {latency_slo_ms: 50})) break;
  await sleep(500);
}
const clients = [0, 1].map(client);
// A variant named explicitly and not loaded: a load (a control action, on
// the timeline) and a cold start while the load runs.
await fetch(`${base}/v2/models/digits-mlp:1:ts-int8@cpu1/infer`, {method: "POST",
  headers: {"Content-Type": "application/json"}, body: JSON.stringify(digit)})
  .then(async (r) => { await r.arrayBuffer(); if (r.ok) sent.ok++; else sent.failed++; });

// ---- the browser

const browser = await puppeteer.launch({
  executablePath: chromiumPath,
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
         "--window-size=1400,1000"],
  defaultViewport: {width: 1400, height: 1000},
});
const consoleErrors = [];
const screenshots = [];
try {
  const page = await browser.newPage();
  page.on("console", (m) => { if (m.type() === "error") consoleErrors.push(m.text()); });
  page.on("pageerror", (e) => consoleErrors.push(String(e)));
  page.on("requestfailed", (r) => consoleErrors.push(`request failed: ${r.url()} ${r.failure()?.errorText}`));
  page.on("response", (r) => { if (r.status() >= 400) consoleErrors.push(`HTTP ${r.status()} ${r.url()}`); });

  // The decision log is long: its page is taken as the window shows it.
  const shoot = async (name, fullPage = true) => {
    const file = path.join(out, `${name}.png`);
    await page.screenshot({path: file, fullPage});
    screenshots.push(file);
  };
  const waitRendered = (pageName) => page.waitForFunction(
    (id) => document.getElementById(id).dataset.rendered !== undefined, {timeout: 30000}, `page-${pageName}`);
  const figure = (id) => page.$eval(`#${id}`, (e) => Number(e.dataset.value));

  // Overview, under load: enough samples for a minute's window to fill in part.
  await page.goto(`${base}/dashboard/`, {waitUntil: "load"});
  await waitRendered("overview");
  check(await page.evaluate(() => typeof uPlot === "function"), "the charting library is served with the page");
  await sleep(12000);
  const qps = await figure("qps");
  check(qps > 0, `overview shows live queries/s under load (${qps})`);
  const attainmentShown = await page.$eval("#attainment", (e) => e.textContent);
  check(/%/.test(attainmentShown), `overview shows SLO attainment (${attainmentShown})`);
  const latencyShown = await page.$eval("#latency", (e) => e.textContent);
  check(/ms/.test(latencyShown), `overview shows p50/p99 (${latencyShown})`);
  check(await page.$$eval("#chart-load canvas", (c) => c.length) > 0, "the load chart is drawn");
  await shoot("overview");

  // Stop the load; once the counters are still, what the page shows must be
  // what /metrics and the JSON API say.
  loading = false;
  await Promise.all(clients);
  await sleep(500);
  const m = await metrics();
  const o = await getJson("/v2/somm/overview");
  const rendered = await page.$eval("#page-overview", (e) => Number(e.dataset.rendered));
  await page.waitForFunction((t) => Number(document.getElementById("page-overview").dataset.rendered) > t,
                             {timeout: 10000}, Math.max(rendered, o.unix_ms));
  const expectSuccess = sum(m, "somm_inference_request_success_total");
  check(expectSuccess === sent.ok && expectSuccess > 0,
        `/metrics counts every answered query (${expectSuccess} = ${sent.ok} the client saw)`);
  check(await figure("total-success") === expectSuccess, `answered queries on the page = /metrics (${expectSuccess})`);
  check(await figure("total-failure") === sum(m, "somm_inference_request_failure_total"), "failed queries on the page = /metrics");
  check(sum(m, "somm_slo_queries_total") === sent.slo,
        `/metrics counts every query with an SLO that reached a model (${sent.slo})`);
  check(await figure("total-slo") === sum(m, "somm_slo_queries_total"), "SLO queries on the page = /metrics");
  check(await figure("total-slo-met") === sum(m, "somm_slo_met_queries_total"), "SLO met on the page = /metrics");
  const rejected = sum(m, "somm_selector_decisions_total", (l) => l.outcome === "rejected");
  check(rejected > 0, `the load had queries the selector rejected (${rejected})`);
  const rows = await page.$$eval("#rejections tr[data-reason]", (trs) =>
    Object.fromEntries(trs.map((tr) => [tr.dataset.reason, Number(tr.children[1].dataset.value)])));
  check(rows["rejected by the selector"] === rejected, `selector rejections on the page = /metrics (${rejected})`);
  for (const s of m.filter((x) => x.name === "somm_inference_request_failure_total" && x.value > 0)) {
    check(rows[s.labels.reason] === sum(m, s.name, (l) => l.reason === s.labels.reason), `failures ${s.labels.reason} = /metrics`);
  }
  // Cost per hour, from the replicas the workers API lists at the price list.
  // The autoscaler may still change a replica count between the two reads
  // (the page polls every 2 s): read both again until they agree (30 s at most).
  const usdPerHourOf = (w) => {
    let usd = 0;
    for (const wk of w.workers) {
      for (const g of wk.groups) {
        const threads = Number(g.hardware.replace(/^cpu/, ""));
        usd += g.hardware.startsWith("cuda") ? g.replicas * o.cluster.prices.gpu_usd_per_hour
                                             : g.replicas * threads * o.cluster.prices.cpu_thread_usd_per_hour;
      }
    }
    return usd;
  };
  let cost = NaN, usdPerHour = NaN;
  for (let tries = 0; tries < 12; tries++) {
    usdPerHour = usdPerHourOf(await getJson("/v2/somm/workers"));
    cost = await figure("cost");
    if (Math.abs(cost - usdPerHour) < 1e-9) break;
    await sleep(2500);
  }
  check(Math.abs(cost - usdPerHour) < 1e-9, `cost per hour on the page = replicas x prices (${cost.toFixed(4)} $/h)`);
  const perModel = await page.$$eval("#per-model tr[data-model]", (trs) =>
    Object.fromEntries(trs.map((tr) => [tr.dataset.model, Number(tr.children[3].dataset.value)])));
  check(perModel["digits-mlp"] === sum(m, "somm_inference_request_success_total", (l) => l.model === "digits-mlp"),
        "per-model answered (digits-mlp) = /metrics");

  // `somm status` reads the same views: its totals are the page's.
  let table = "";
  try {
    table = execFileSync(sommBin, ["status", "--url", base.replace("http://", "")], {encoding: "utf8"});
  } catch (e) {
    table = `somm status failed: ${e.message}`;
  }
  check(table.includes(`since start: ${expectSuccess} answered`) && /digits-mlp\s+1\s+\d+/.test(table),
        `somm status shows the same totals (${table.split("\n")[1]})`);

  // Models and tasks.
  await page.goto(`${base}/dashboard/#models`, {waitUntil: "load"});
  await waitRendered("models");
  const index = await getJson("/v2/repository/index", {method: "POST", body: "{}"});
  const names = [...new Set(index.map((r) => r.name))];
  const cards = await page.$$eval(".model[data-model]", (cs) => cs.map((c) => c.dataset.model));
  check(names.every((n) => cards.includes(n)) && cards.length === names.length,
        `every repository model has a card (${cards.length})`);
  // On a fresh repository digits-mlp's variants are still being profiled
  // while the load runs: the page drawn before a profile lands lists fewer
  // rows than the API gives after it. Reload until both agree (or 90 s pass).
  let expectRows = 0, shownRows = -1;
  for (let waited = 0; waited <= 90000; waited += 3000) {
    const variants = await getJson("/v2/repository/models/digits-mlp/variants");
    expectRows = variants.variants.reduce((a, v) => a + v.hardware.length, 0);
    shownRows = await page.$$eval('.model[data-model="digits-mlp"] table.variants tbody tr', (r) => r.length);
    if (expectRows > 0 && shownRows === expectRows) break;
    await sleep(3000);
    await page.goto(`${base}/dashboard/#models`, {waitUntil: "load"});
    await page.reload({waitUntil: "load"});
    await waitRendered("models");
  }
  check(shownRows === expectRows && expectRows > 0, `digits-mlp lists every profiled variant x hardware (${shownRows} rows, the API ${expectRows})`);
  check(await page.$$eval('.model[data-model="digits-mlp"] .profile-chart canvas', (c) => c.length) > 0,
        "digits-mlp's latency-against-batch profile is drawn");
  const tasks = await page.$$eval(".task[data-task]", (ts) => ts.map((t) => t.dataset.task));
  check(tasks.includes("classification/digits"), `models are grouped by task (${tasks.join(", ")})`);
  await shoot("models");

  // Workers.
  await page.goto(`${base}/dashboard/#workers`, {waitUntil: "load"});
  await waitRendered("workers");
  // The page refreshes every 2 s: an idle unload between its fetch and the
  // test's shows as a difference until the next refresh.
  let workers, shownWorkers, groupsShown;
  for (let i = 0; i < 5; i++) {
    workers = await getJson("/v2/somm/workers");
    shownWorkers = await page.$$eval(".worker[data-worker]", (ws) => ws.map((x) => x.dataset.worker));
    groupsShown = await page.$$eval("tr[data-group]", (r) => r.length);
    if (groupsShown === workers.workers.reduce((a, x) => a + x.groups.length, 0)) break;
    await sleep(2500);
  }
  check(shownWorkers.length === workers.workers.length && shownWorkers.length > 0,
        `every worker is shown (${shownWorkers.join(", ")})`);
  check(groupsShown === workers.workers.reduce((a, x) => a + x.groups.length, 0), `every instance group is shown (${groupsShown})`);
  await shoot("workers");

  // Decisions, then filtered by outcome. On a fresh repository the load may
  // have ended before any task query found a profiled variant: a few more,
  // now that digits-mlp's are profiled, so that some decision has run.
  for (let answered = 0, tries = 0; answered < 3 && tries < 60; tries++) {
    const r = await fetch(`${base}/v2/tasks/classification/digits/infer`, {method: "POST",
      headers: {"Content-Type": "application/json"},
      body: JSON.stringify(Object.assign({}, digit, {parameters: {latency_slo_ms: 1000}}))});
    await r.arrayBuffer();
    if (r.ok) answered++; else await sleep(1000);
  }
  // A decision logged between the page's read and the API's (a query still
  // in flight, a background load's own): read both again until they agree.
  let decisions = [], allRows = -1;
  for (let tries = 0; tries < 10; tries++) {
    await page.goto(`${base}/dashboard/#decisions`, {waitUntil: "load"});
    await waitRendered("decisions");
    decisions = (await getJson("/v2/somm/decisions?limit=1000")).decisions;
    allRows = await page.$$eval("#decisions tbody tr", (r) => r.length);
    if (allRows === decisions.length && allRows > 0) break;
    await sleep(1000);
  }
  check(allRows === decisions.length && allRows > 0, `every logged decision is listed (${allRows})`);
  // Predicted against actual: each answered query's measured latency.
  const measured = decisions.filter((d) => d.actual_latency_ms !== undefined);
  const measuredRows = await page.$$eval("#decisions tbody td.actual",
                                         (tds) => tds.filter((t) => t.dataset.value !== "").length);
  check(measured.length > 0 && measuredRows === measured.length &&
          measured.every((d) => d.status === "OK" && d.actual_latency_ms > 0),
        `answered decisions show their actual latency (${measuredRows} rows of ${allRows}, the API ${measured.length})`);
  await page.select("#filter-outcome", "rejected");
  const rejectedRows = await page.$$eval("#decisions tbody tr", (r) => r.map((x) => x.dataset.outcome));
  check(rejectedRows.length === decisions.filter((d) => d.outcome === "rejected").length &&
        rejectedRows.every((x) => x === "rejected") && rejectedRows.length > 0,
        `the outcome filter keeps the rejected decisions only (${rejectedRows.length})`);
  await page.select("#filter-outcome", "");
  await page.select("#filter-model", "digits-mlp");
  const mlpRows = await page.$$eval("#decisions tbody tr", (r) => r.length);
  check(mlpRows > 0 && mlpRows < allRows, `the model filter narrows the list (${mlpRows} of ${allRows})`);
  await page.select("#filter-model", "");
  await shoot("decisions", false);

  // Control actions, on the load's time axis.
  await page.goto(`${base}/dashboard/#actions`, {waitUntil: "load"});
  await waitRendered("actions");
  let actions, kinds;
  for (let i = 0; i < 4; i++) {  // refreshed every 5 s, as above
    actions = (await getJson("/v2/somm/actions?limit=500")).actions;
    kinds = await page.$$eval("#actions tbody tr[data-kind]", (r) => r.map((x) => x.dataset.kind));
    if (kinds.length === actions.length) break;
    await sleep(5500);
  }
  check(kinds.length === actions.length && actions.length > 0, `every control action is listed (${kinds.length})`);
  check(kinds.join() === actions.map((a) => a.kind).join(), "in the API's order, with its kind");
  check(await page.$$eval("#chart-actions canvas", (c) => c.length) > 0, "the action timeline is drawn");
  await shoot("actions");

  check(consoleErrors.length === 0, `no console error (${consoleErrors.join(" | ") || "none"})`);
} finally {
  loading = false;
  await browser.close();
  if (somm.child) somm.child.kill("SIGTERM");
}

if (args.screenshots) {
  fs.mkdirSync(args.screenshots, {recursive: true});
  for (const f of screenshots) fs.copyFileSync(f, path.join(args.screenshots, path.basename(f)));
}
console.log(`screenshots: ${screenshots.join(" ")}`);
console.log(failures ? `${failures} check(s) failed` : "all checks passed");
process.exit(failures ? 1 : 0);
