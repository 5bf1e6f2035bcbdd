// What the dashboard costs somm: the CPU time per second of a `somm serve`
// process (utime + stime from /proc) with no browser, then with one headless
// chromium on the overview (it polls /v2/somm/overview every 2 s and
// /v2/somm/actions every 5 s), each over the same window, alternating so
// that a drift of the machine hits both alike.
//
// Usage: node bench/dashboard_cost.mjs [--somm build/somm] [--repo models/demo]
//          [--seconds 30] [--rounds 3] [--chromium /usr/bin/chromium]
// Needs tests/browser's npm packages (scripts/setup). Prints one line per
// window and a summary of medians; a JSON line last.
import {spawn} from "node:child_process";
import fs from "node:fs";
import {createRequire} from "node:module";
import readline from "node:readline";

const require = createRequire(new URL("../tests/browser/package.json", import.meta.url));
const puppeteer = require("puppeteer-core");

const args = Object.fromEntries(process.argv.slice(2).reduce((acc, a, i, all) => {
  if (a.startsWith("--")) acc.push([a.slice(2), all[i + 1]]);
  return acc;
}, []));
const seconds = Number(args.seconds || 30);
const rounds = Number(args.rounds || 3);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const ticks = 100;  // USER_HZ on Linux

function cpuSeconds(pid) {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) / ticks;  // utime, stime
}

const somm = spawn(args.somm || "build/somm", ["serve", "--repo", args.repo || "models/demo",
  "--http-port", "0", "--grpc-port", "0", "--metrics-port", "0", "--log-level", "warn"],
  {stdio: ["ignore", "pipe", "inherit"]});
const port = await new Promise((resolve, reject) => {
  readline.createInterface({input: somm.stdout}).on("line", (line) => {
    const m = line.match(/^somm: listening http=(\d+)/);
    if (m) resolve(Number(m[1]));
  });
  somm.on("exit", (code) => reject(new Error(`somm exited with ${code}`)));
});
// Past start-up work: a fresh repository's variants are generated and
// profiled in the background, at hundreds of ms of CPU per second, for a
// minute or more. The windows start once somm has idled (under 20 ms/s
// over 5 s), 5 minutes at most.
{
  const t0 = Date.now();
  let rate = Infinity;
  while (Date.now() - t0 < 300000) {
    const before = cpuSeconds(somm.pid);
    await sleep(5000);
    rate = (cpuSeconds(somm.pid) - before) / 5;
    if (rate < 0.02) break;
  }
  console.log(`somm idle (${(1000 * rate).toFixed(2)} ms/s) after ${((Date.now() - t0) / 1000).toFixed(0)} s`);
}

async function window(withBrowser) {
  let browser = null;
  if (withBrowser) {
    browser = await puppeteer.launch({executablePath: args.chromium || "/usr/bin/chromium", headless: true,
                                      args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"]});
    const page = await browser.newPage();
    await page.goto(`http://127.0.0.1:${port}/dashboard/`, {waitUntil: "load"});
    await sleep(3000);
  }
  const before = cpuSeconds(somm.pid);
  const t0 = process.hrtime.bigint();
  await sleep(seconds * 1000);
  const cpu = cpuSeconds(somm.pid) - before;
  const wall = Number(process.hrtime.bigint() - t0) / 1e9;
  if (browser) await browser.close();
  return cpu / wall;
}

const without = [], withB = [];
for (let r = 0; r < rounds; r++) {
  without.push(await window(false));
  withB.push(await window(true));
  console.log(`round ${r + 1}: somm CPU ${(1000 * without[r]).toFixed(2)} ms/s without a browser, ` +
              `${(1000 * withB[r]).toFixed(2)} ms/s with one on the overview`);
}
somm.kill("SIGTERM");
const median = (xs) => {
  const v = [...xs].sort((a, b) => a - b);
  return v.length % 2 ? v[(v.length - 1) / 2] : (v[v.length / 2 - 1] + v[v.length / 2]) / 2;
};
console.log(`median over ${rounds} x ${seconds} s: ${(1000 * median(without)).toFixed(2)} ms/s without, ` +
            `${(1000 * median(withB)).toFixed(2)} ms/s with: the dashboard adds ` +
            `${(1000 * (median(withB) - median(without))).toFixed(2)} ms of somm CPU per second`);
console.log(JSON.stringify({seconds, rounds, without_ms_per_s: without.map((x) => 1000 * x),
                            with_ms_per_s: withB.map((x) => 1000 * x)}));
