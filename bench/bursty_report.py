#!/usr/bin/python3
"""The report of bench/bursty.sh: per bursty trace shape, every policy's
attainment and cost over the lower bound on cost at that attainment, and
where in the trace each one provisions and misses.

Usage: /usr/bin/python3 bench/bursty_report.py --dir OUT

OUT holds bench/bursty.sh's meta.json and, per shape, sweep/ (the trace, its
summary and bench/infaas_sweep.sh's sweep.json), all.json (`somm simulate
--policy all`), infaas-tuned.json (the best-tuned INFaaS) and, when there,
somm-tick250.json (somm with --control-tick-ms 250). The seconds of
the trace are split by the load: a rise (a model's arrivals in the second
above 1.5x the median of its 30 before) and the 10 s after it; the busiest tenth of
the remaining seconds; and the rest. Replica-seconds and misses (feasible
queries not met) are summed over each part, from the policies' timelines.
Standard library only.
"""
import argparse
import json
import os
import sys

POLICIES = [("somm", "all", "somm"), ("somm, --control-tick-ms 250", "somm-tick250", "somm"),
            ("INFaaS, released defaults", "all", "infaas"),
            ("INFaaS, best-tuned", "infaas-tuned", "infaas"),
            ("static-peak", "all", "static-peak"), ("static-avg", "all", "static-avg"),
            ("clairvoyant", "all", "clairvoyant")]


def parts(arrivals, per_model):
    """Each second's part: 'rise', 'peak' or 'rest'. A rise is any model's:
    its arrivals in the second above 1.5x the median of its 30 before, by
    more than 5 queries and 4 Poisson deviations (so that a quiet model's
    noise is none)."""
    n = len(arrivals)
    part = ["rest"] * n
    for counts in per_model:
        for t in range(1, n):
            before = sorted(counts[max(0, t - 30):t])
            median = before[len(before) // 2]
            if counts[t] > 1.5 * median and counts[t] - median > max(5, 4 * median ** 0.5):
                for u in range(t, min(n, t + 11)):
                    part[u] = "rise"
    rest = sorted((arrivals[t], t) for t in range(n) if part[t] == "rest")
    for _, t in rest[len(rest) - len(rest) // 10:]:
        part[t] = "peak"
    return part


def split(timeline, part):
    out = {k: [0.0, 0] for k in ("rise", "peak", "rest")}
    for t, p in enumerate(part):
        if t >= len(timeline["replicas"]):
            break
        out[p][0] += timeline["replicas"][t]
        out[p][1] += timeline["feasible"][t] - timeline["met"][t]
    return out


def shape_report(d, shape):
    with open(os.path.join(d, "sweep", "trace.json")) as f:
        summary = json.load(f)
    with open(os.path.join(d, "sweep", "sweep.json")) as f:
        sweep = json.load(f)
    runs = {}
    for name in ("all", "infaas-tuned", "somm-tick250"):
        path = os.path.join(d, f"{name}.json")
        if os.path.exists(path):
            with open(path) as f:
                runs[name] = json.load(f)
    t = summary["total"]
    lines = [f"#### {shape}", "",
             f"{summary['queries']} queries over {summary['duration_s']:g} s (make_trace.py "
             f"--shape {shape}, mean {t['mean_qps']:g} q/s, busiest second {t['peak_qps']} q/s), "
             "half the rows of models with a task model-less. Best-tuned INFaaS: `"
             + (" ".join(f for f in sweep["best"]["flags"] if f != "--infaas") or "the defaults")
             + f"` ({len(sweep['runs'])} settings swept).", "",
             "| policy | attainment | USD | bound USD | cost / bound | instance-s | cold starts "
             "| rejections | missed |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    rows = []
    for label, run, key in POLICIES:
        p = runs.get(run, {}).get("policies", {}).get(key)
        if p is None:
            continue
        rows.append((label, p))
        lines.append(f"| {label} | {p['attainment']:.4f} | {p['usd']:.4f} "
                     f"| {p.get('cost_bound_usd', 0):.4f} | {p.get('cost_over_bound', 0):.2f}x "
                     f"| {p['instance_seconds']:.0f} | {p['cold_starts']} | {p['rejections']} "
                     f"| {p['feasible'] - p['met']} |")
    timelines = [(label, p) for label, p in rows if "timeline" in p]
    if timelines:
        part = parts(summary["shape"]["per_second"],
                     [m["per_second"] for m in summary["models"].values()])
        count = {k: part.count(k) for k in ("rise", "peak", "rest")}
        lines += ["", f"Where they provision and miss: rises ({count['rise']} s: a model's "
                  "arrivals in a second above 1.5x the median of its 30 before, and the 10 s "
                  "after), peaks (the busiest "
                  f"tenth of the other seconds, {count['peak']} s), the rest ({count['rest']} s). "
                  "Replica-seconds / misses:", "",
                  "| policy | rises | peaks | rest |", "|---|---:|---:|---:|"]
        for label, p in timelines:
            s = split(p["timeline"], part)
            lines.append(f"| {label} | " + " | ".join(f"{s[k][0]:.0f} / {s[k][1]}"
                                                    for k in ("rise", "peak", "rest")) + " |")
    return lines + [""]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", required=True)
    a = ap.parse_args()
    with open(os.path.join(a.dir, "meta.json")) as f:
        meta = json.load(f)
    lines = [f"Measured {meta['date']} at commit `{meta['git']}` by `{meta['command']}` "
             f"({meta['workers']} simulated workers of 4 cores and 8 GiB, seed {meta['seed']}).",
             ""]
    for shape in meta["shapes"].split():
        lines += shape_report(os.path.join(a.dir, shape), shape)
    print("\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
