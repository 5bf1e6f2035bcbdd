#!/usr/bin/python3
"""The search of bench/infaas_sweep.sh: one `somm simulate --policy infaas`
per setting of the INFaaS policy's thresholds, by coordinates from the
released defaults, and the best-tuned setting (highest attainment, then
lowest cost).

Usage: /usr/bin/python3 bench/infaas_sweep.py --somm BIN --out DIR [--rounds 2]
           -- SIMULATE-ARGS...

SIMULATE-ARGS are passed to every `somm simulate` (the trace, the fleet,
--policy infaas); each run adds its --infaas NAME=VALUE items and --json.
Attainment is compared at four decimals, so that a tie goes to the cost.
Writes DIR/runs/*.json, DIR/sweep.json and DIR/report.md. Standard library
only.
"""
import argparse
import json
import os
import subprocess
import sys
import time

# The thresholds swept and their values, the released default among them
# (src/simulator/infaas_policy.h). Order matters: each is tuned with those
# before it at their best.
GRID = [
    ("blacklist_latency_factor", ["1.5", "2.5", "4"]),
    ("blacklisted_share", ["0", "0.1", "0.3"]),
    ("not_loaded_penalty_ms", ["0", "1000", "3000"]),
    ("loose_slo_ms", ["50", "100", "1000"]),
    ("fast_check_variants", ["1", "5", "10"]),
    ("max_replicas", ["1", "2", "4"]),
    ("headroom", ["0", "0.05", "0.2"]),
    ("scale_down_requests", ["3", "10", "30"]),
    ("upgrade_cpu", ["false", "true"]),
    ("vm_blacklist_util", ["0.6", "0.8", "0.95"]),
    ("burst_queries", ["100", "200", "400"]),
]
DEFAULTS = {"blacklist_latency_factor": "2.5", "blacklisted_share": "0.1",
            "not_loaded_penalty_ms": "1000", "loose_slo_ms": "100", "fast_check_variants": "5",
            "max_replicas": "2", "headroom": "0.05", "scale_down_requests": "10",
            "upgrade_cpu": "false", "vm_blacklist_util": "0.8", "burst_queries": "200"}


def label(settings):
    changed = [f"{k}={v}" for k, v in settings.items() if DEFAULTS[k] != v]
    return " ".join(changed) if changed else "(released defaults)"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--somm", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("simulate", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    sim_args = [x for x in a.simulate if x != "--"]
    os.makedirs(os.path.join(a.out, "runs"), exist_ok=True)
    cache = {}
    rows = []

    def run(settings):
        key = tuple(sorted(settings.items()))
        if key in cache:
            return cache[key]
        path = os.path.join(a.out, "runs", f"run{len(cache):02d}.json")
        cmd = [a.somm, "simulate", *sim_args, "--json", path]
        for k, v in settings.items():
            if DEFAULTS[k] != v:
                cmd += ["--infaas", f"{k}={v}"]
        start = time.time()
        with open(os.path.join(a.out, "simulate.log"), "a") as log:
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=log)
        with open(path) as f:
            p = json.load(f)["policies"]["infaas"]
        r = {"setting": label(settings), "flags": cmd[len(sim_args) + 4:],
             "attainment": p["attainment"], "usd": p["usd"],
             "cost_over_bound": p.get("cost_over_bound"), "instance_seconds": p["instance_seconds"],
             "cold_starts": p["cold_starts"], "rejections": p["rejections"],
             "worker_seconds": p["worker_seconds"], "wall_s": round(time.time() - start, 1),
             "json": path}
        cache[key] = r
        rows.append(r)
        print(f"{r['setting']:<40} attainment {r['attainment']:.4f}  USD {r['usd']:.4f}  "
              f"cost/bound {r['cost_over_bound'] or 0:.2f}x  ({r['wall_s']} s)", flush=True)
        return r

    def better(x, y):
        return (round(x["attainment"], 4), -x["usd"]) > (round(y["attainment"], 4), -y["usd"])

    best = dict(DEFAULTS)
    default = run(best)
    best_r = default
    for _ in range(a.rounds):
        for name, values in GRID:
            for v in values:
                trial = dict(best, **{name: v})
                r = run(trial)
                if better(r, best_r):
                    best, best_r = trial, r
    summary = {"default": default, "best": best_r, "best_settings": best, "runs": rows,
               "simulate_args": sim_args}
    with open(os.path.join(a.out, "sweep.json"), "w") as f:
        json.dump(summary, f, indent=2)
    lines = ["| INFaaS | attainment | USD | cost / bound | instance-s | cold starts | rejections |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for name, r in (("released defaults", default), ("best-tuned: " + best_r["setting"], best_r)):
        lines.append(f"| {name} | {r['attainment']:.4f} | {r['usd']:.4f} | "
                     f"{r['cost_over_bound'] or 0:.2f}x | {r['instance_seconds']:.0f} | "
                     f"{r['cold_starts']} | {r['rejections']} |")
    lines += ["", f"{len(rows)} runs; every setting in sweep.json."]
    with open(os.path.join(a.out, "report.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    print(f"bench/infaas_sweep.sh: {a.out}")


if __name__ == "__main__":
    sys.exit(main())
