#!/usr/bin/python3
"""Report of one bench/ab.sh run: a build before against a build after.

Usage: /usr/bin/python3 bench/ab_report.py OUT_DIR

OUT_DIR is what bench/ab.sh wrote:
  compare/<before|after>-r<R>/<model>/<target>[-cN].json    bench/compare.sh's runs
  router-hop/<before|after>-r<R>/router_hop.json            bench/router_hop.sh's summary

Prints markdown: for compare.sh, per model, target and concurrency, the
median over rounds of each build's queries/s and p50 latency, and after over
before; for router_hop.sh, per model and wire, each build's embedded and
cluster p50 and queries/s, the p50 the hop adds and the cluster's share of
embedded throughput. A ratio of queries/s above 1, or of latency below 1,
favours the build after. Standard library only.
"""
import glob
import json
import os
import re
import statistics
import sys

# The targets that measure somm (the rest measure libtorch, the wire or the
# peer, which neither build changes).
SOMM_TARGETS = ("somm-rest", "somm-rest-binary", "somm-grpc")
ROUND = re.compile(r"^(before|after)-r(\d+)$")


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def fmt(v, digits=0):
    return "-" if v is None else f"{v:,.{digits}f}"


def ratio(after, before):
    return None if after is None or not before else after / before


def compare_points(out):
    """{(model, target, concurrency): {build: [(qps, p50_us), ...]}}"""
    points = {}
    for run_dir in sorted(glob.glob(os.path.join(out, "compare", "*"))):
        m = ROUND.match(os.path.basename(run_dir))
        if not m or not os.path.isdir(run_dir):
            continue
        build = m.group(1)
        for path in glob.glob(os.path.join(run_dir, "*", "*.json")):
            if path.endswith(".cpu.json"):
                continue
            doc = json.load(open(path))
            if doc.get("target") not in SOMM_TARGETS:
                continue
            model = doc.get("model") or os.path.basename(os.path.dirname(path))
            for p in doc.get("points", []):
                key = (model, doc["target"], p.get("concurrency") or 0)
                points.setdefault(key, {}).setdefault(build, []).append(
                    (p.get("throughput_qps"), (p.get("latency_us") or {}).get("p50")))
    return points


def hop_rows(out):
    """{(model, wire): {build: [row, ...]}} from each router_hop.json."""
    rows = {}
    for path in sorted(glob.glob(os.path.join(out, "router-hop", "*", "router_hop.json"))):
        m = ROUND.match(os.path.basename(os.path.dirname(path)))
        if not m:
            continue
        for row in json.load(open(path))["rows"]:
            rows.setdefault((row["model"], row["wire"]), {}).setdefault(m.group(1), []).append(row)
    return rows


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    lines = []
    points = compare_points(out)
    if points:
        lines += ["## bench/compare.sh: somm's targets, median over rounds", "",
                  "| model | target | c | before q/s | after q/s | after/before | "
                  "before p50 us | after p50 us | after/before |",
                  "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
        for (model, target, c) in sorted(points):
            by = points[(model, target, c)]
            q = {b: median([x[0] for x in by.get(b, [])]) for b in ("before", "after")}
            l = {b: median([x[1] for x in by.get(b, [])]) for b in ("before", "after")}
            lines.append(f"| {model} | {target} | {c} | {fmt(q['before'])} | {fmt(q['after'])} | "
                         f"{fmt(ratio(q['after'], q['before']), 3)} | {fmt(l['before'])} | "
                         f"{fmt(l['after'])} | {fmt(ratio(l['after'], l['before']), 3)} |")
        lines.append("")
    rows = hop_rows(out)
    if rows:
        lines += ["## bench/router_hop.sh: median over rounds", "",
                  "| model | wire | build | embedded p50 us | cluster p50 us | added p50 us | "
                  "embedded q/s | cluster q/s | cluster/embedded |",
                  "|---|---|---|---:|---:|---:|---:|---:|---:|"]
        for key in sorted(rows, key=lambda k: (k[0] != "digits-mlp", k)):
            for build in ("before", "after"):
                rs = rows[key].get(build, [])
                if not rs:
                    continue
                lines.append(
                    f"| {key[0]} | {key[1]} | {build} | "
                    f"{fmt(median([r['embedded']['p50_us'] for r in rs]))} | "
                    f"{fmt(median([r['cluster']['p50_us'] for r in rs]))} | "
                    f"{fmt(median([r['added_p50_us'] for r in rs]))} | "
                    f"{fmt(median([r['embedded']['qps'] for r in rs]))} | "
                    f"{fmt(median([r['cluster']['qps'] for r in rs]))} | "
                    f"{fmt(median([r['throughput_ratio'] for r in rs]), 3)} |")
        lines.append("")
    if not lines:
        sys.exit(f"ab_report.py: no runs under {out}/compare or {out}/router-hop")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
