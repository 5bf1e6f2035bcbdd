#!/usr/bin/python3
"""Report of one bench/router_hop.sh run: the cost of the router hop.

Usage: /usr/bin/python3 bench/router_hop_report.py OUT_DIR

OUT_DIR is what bench/router_hop.sh wrote:
  meta.json                                  date, commit, command, settings
  runs/<model>-<wire>-<target>-c<C>-r<R>.json      `somm bench --json`
  runs/<model>-<wire>-<target>-c<C>-r<R>.cpu.json  CPU seconds per process, load
                                             generator CPU, queries answered
Writes OUT_DIR/router_hop.json and OUT_DIR/report.md, and prints report.md.

Definitions (repeated in report.md):
  added p50/p99   cluster minus embedded latency at concurrency 1, per repeat
                  (the two were measured one after the other), median over
                  repeats
  throughput      queries/s at the saturating concurrency; ratio = cluster
                  over embedded per repeat, median over repeats
  overhead p50    the front process's server time minus the worker's queue and
                  compute time (`somm bench`'s server-side split), at c=1
  CPU per query   a process's CPU time (user + system) over a run divided by
                  the queries the front process answered in it, median over
                  repeats, microseconds
Standard library only.
"""
import glob
import json
import os
import re
import statistics
import sys

TARGET_P50_ADDED_US = 100    # digits-mlp, each wire
TARGET_THROUGHPUT_RATIO = 0.95  # resnet18, each wire
RUN = re.compile(r"^(?P<model>.+)-(?P<wire>rest|grpc)-(?P<target>embedded|cluster)-c(?P<c>\d+)-r(?P<r>\d+)\.json$")


def load_runs(out):
    """{(model, wire, target, c): {repeat: run}} with run = {p50, p99, qps, cpu, queries}."""
    runs = {}
    for path in glob.glob(os.path.join(out, "runs", "*.json")):
        m = RUN.match(os.path.basename(path))
        if not m:
            continue
        point = json.load(open(path))["points"][0]
        cpu = json.load(open(path[:-5] + ".cpu.json"))
        key = (m["model"], m["wire"], m["target"], int(m["c"]))
        runs.setdefault(key, {})[int(m["r"])] = {
            "p50_us": point["latency_us"]["p50"], "p99_us": point["latency_us"]["p99"],
            "overhead_p50_us": (point.get("server_us") or {}).get("overhead_p50"),
            "qps": point["throughput_qps"], "errors": sum(point.get("errors", {}).values()),
            "queries": cpu["queries"], "cpu_s": cpu["cpu_s"], "loadgen_cpu_s": cpu["loadgen_cpu_s"],
        }
    return runs


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def cpu_per_query_us(runs):
    """{process: median us per query} over a point's repeats, load generator included."""
    per = {}
    for run in runs.values():
        if run["queries"] <= 0:
            continue
        for name, s in list(run["cpu_s"].items()) + [("loadgen", run["loadgen_cpu_s"])]:
            per.setdefault(name, []).append(s / run["queries"] * 1e6)
    return {name: round(median(v), 1) for name, v in per.items()}


def summarize(runs, meta):
    rows = []
    for model, wire in sorted({(k[0], k[1]) for k in runs}, key=lambda x: (x[0] != "digits-mlp", x)):
        sat = max(k[3] for k in runs if k[0] == model and k[1] == wire)
        lat = {t: runs.get((model, wire, t, 1), {}) for t in ("embedded", "cluster")}
        thr = {t: runs.get((model, wire, t, sat), {}) for t in ("embedded", "cluster")}
        paired = sorted(set(lat["embedded"]) & set(lat["cluster"]))
        paired_thr = sorted(set(thr["embedded"]) & set(thr["cluster"]))
        row = {
            "model": model, "wire": wire, "saturation_concurrency": sat,
            "repeats": len(paired),
            "errors": sum(r["errors"] for t in ("embedded", "cluster")
                          for pts in (lat[t], thr[t]) for r in pts.values()),
        }
        for t in ("embedded", "cluster"):
            row[t] = {
                "p50_us": median([r["p50_us"] for r in lat[t].values()]),
                "p99_us": median([r["p99_us"] for r in lat[t].values()]),
                "server_overhead_p50_us": median([r["overhead_p50_us"] for r in lat[t].values()]),
                "qps": median([r["qps"] for r in thr[t].values()]),
                "cpu_per_query_us_c1": cpu_per_query_us(lat[t]),
                "cpu_per_query_us_saturated": cpu_per_query_us(thr[t]),
            }
        row["added_p50_us"] = median([lat["cluster"][r]["p50_us"] - lat["embedded"][r]["p50_us"] for r in paired])
        row["added_p99_us"] = median([lat["cluster"][r]["p99_us"] - lat["embedded"][r]["p99_us"] for r in paired])
        row["throughput_ratio"] = median([thr["cluster"][r]["qps"] / thr["embedded"][r]["qps"]
                                          for r in paired_thr if thr["embedded"][r]["qps"] > 0])
        if row["throughput_ratio"] is not None:
            row["throughput_ratio"] = round(row["throughput_ratio"], 3)
        if model == "digits-mlp" and row["added_p50_us"] is not None:
            row["target"] = {"what": f"added p50 <= {TARGET_P50_ADDED_US} us",
                             "met": row["added_p50_us"] <= TARGET_P50_ADDED_US}
        if model == "resnet18" and row["throughput_ratio"] is not None:
            row["target"] = {"what": f"throughput >= {TARGET_THROUGHPUT_RATIO:.0%} of embedded",
                             "met": row["throughput_ratio"] >= TARGET_THROUGHPUT_RATIO}
        rows.append(row)
    return {"meta": meta, "rows": rows}


def fmt(v, digits=0):
    return "-" if v is None else f"{v:,.{digits}f}"


def cpu_cell(per):
    return ", ".join(f"{k} {v:,.0f}" for k, v in per.items()) or "-"


def markdown(summary):
    meta = summary["meta"]
    out = [
        "# Router hop: `somm serve` against router + worker",
        "",
        f"{meta.get('date', '?')}, commit `{meta.get('git', '?')}`, {meta.get('cores', '?')} cores "
        f"shared by the load generator and every server process; load average "
        f"{meta.get('loadavg_start', '?')} before, {meta.get('loadavg_end', '?')} after; "
        f"{meta.get('repeats', '?')} repeat(s), medians. `{meta.get('command', '')}`",
        "",
        f"Settings: {meta.get('settings', '')}.",
        "",
        "Latency at concurrency 1 (microseconds) and throughput at saturation (queries/s):",
        "",
        "| model | wire | embedded p50 | cluster p50 | added p50 | embedded p99 | cluster p99 | added p99 "
        "| embedded q/s | cluster q/s | ratio | target |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in summary["rows"]:
        e, c = r["embedded"], r["cluster"]
        target = r.get("target")
        verdict = "-" if not target else f"{target['what']}: {'met' if target['met'] else '**missed**'}"
        out.append(
            f"| {r['model']} | {r['wire']} | {fmt(e['p50_us'])} | {fmt(c['p50_us'])} | "
            f"{fmt(r['added_p50_us'])} | {fmt(e['p99_us'])} | {fmt(c['p99_us'])} | "
            f"{fmt(r['added_p99_us'])} | {fmt(e['qps'], 1)} | {fmt(c['qps'], 1)} (c={r['saturation_concurrency']}) | "
            f"{fmt(r['throughput_ratio'], 3)} | {verdict} |")
    out += [
        "",
        "CPU per query, microseconds per process (user + system over the run / queries answered, "
        "warm-up included):",
        "",
        "| model | wire | load | embedded | cluster |",
        "|---|---|---|---|---|",
    ]
    for r in summary["rows"]:
        for load, key in (("c=1", "cpu_per_query_us_c1"), (f"c={r['saturation_concurrency']}", "cpu_per_query_us_saturated")):
            out.append(f"| {r['model']} | {r['wire']} | {load} | {cpu_cell(r['embedded'][key])} | "
                       f"{cpu_cell(r['cluster'][key])} |")
    out += [
        "",
        "Where the added time goes, at c=1: the front process's server time that is neither the "
        "worker's queueing nor its compute (`somm bench`'s overhead p50; in the cluster it holds "
        "the router -> worker gRPC round trip):",
        "",
        "| model | wire | embedded overhead p50 us | cluster overhead p50 us |",
        "|---|---|---:|---:|",
    ]
    for r in summary["rows"]:
        out.append(f"| {r['model']} | {r['wire']} | {fmt(r['embedded']['server_overhead_p50_us'])} | "
                   f"{fmt(r['cluster']['server_overhead_p50_us'])} |")
    errors = sum(r["errors"] for r in summary["rows"])
    out += ["", f"Errors over all runs: {errors}.", "",
            "added p50/p99: cluster minus embedded in the same repeat, median over repeats. "
            "ratio: cluster over embedded queries/s in the same repeat, median over repeats.", ""]
    return "\n".join(out)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    meta_path = os.path.join(out, "meta.json")
    meta = json.load(open(meta_path)) if os.path.exists(meta_path) else {}
    runs = load_runs(out)
    if not runs:
        sys.exit(f"router_hop_report.py: no runs under {out}/runs")
    summary = summarize(runs, meta)
    with open(os.path.join(out, "router_hop.json"), "w") as f:
        json.dump(summary, f, indent=2)
    text = markdown(summary)
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
