#!/usr/bin/python3
"""Report of one bench/compare.sh run: markdown tables, ratios, targets, SVG plots.

Usage: /usr/bin/python3 bench/report.py OUT_DIR [--docs-dir docs]

OUT_DIR is what bench/compare.sh wrote:
  meta.json                      date, command, machine, settings, models
  <model>/<target>[-cN].json     `somm bench --json` / `bench_raw_libtorch --json`
  <model>/<target>-cN.metrics.before|after   somm /metrics around that run
Writes OUT_DIR/report.md and OUT_DIR/performance-<model>.svg (copied to
--docs-dir when given), with --update-doc FILE.md replaces the part of FILE.md
between its two "bench/report.py" marks with the same figures, and prints the
summary tables to stdout.

Definitions (they are repeated in report.md):
  best point     the point of a target with the highest samples/s
  overhead p50   somm's server-side time that is neither queueing nor model
                 execution: somm_server_us - somm_queue_us - somm_compute_us,
                 median over the queries of the point (from `somm bench`)
  mean batch     samples per batch somm executed during that run (its
                 /metrics somm_inference_batch_size sum/count difference;
                 the run's warm-up included)
  wire limit     per wire, a server that answers somm's own bytes and does
                 next to nothing per query: over REST the `wire-limit` target
                 (nginx, bench/wire_limit.sh), over gRPC `grpc-wire-limit`
                 (bench/grpc_wire_limit.cc); each somm row of that model is
                 also given as a share of its wire's limit
Standard library only: this runs on /usr/bin/python3 with nothing installed.
"""
import argparse
import glob
import json
import math
import os
import re
import shutil
import sys

PEER = "fastapi-peer"
WIRE_LIMIT = "wire-limit"
GRPC_WIRE_LIMIT = "grpc-wire-limit"
REST = "somm-rest"
REST_BINARY = "somm-rest-binary"
GRPC = "somm-grpc"
# somm's targets, in report order; a run without one (an older run, or one
# that skipped it) simply has no column or row for it.
SOMM_TARGETS = [REST, REST_BINARY, GRPC]
SERVER_TARGETS = SOMM_TARGETS + [PEER, WIRE_LIMIT, GRPC_WIRE_LIMIT]
# Each somm target's wire limit: nginx is asked over REST, the generic gRPC
# server over gRPC.
WIRE_LIMIT_OF = {REST: WIRE_LIMIT, REST_BINARY: WIRE_LIMIT, GRPC: GRPC_WIRE_LIMIT}
LIMIT_TARGETS = (WIRE_LIMIT, GRPC_WIRE_LIMIT)
COLORS = {REST: "#1f77b4", REST_BINARY: "#17becf", GRPC: "#2ca02c", PEER: "#d62728",
          WIRE_LIMIT: "#ff7f0e", GRPC_WIRE_LIMIT: "#9467bd"}
# How each target sends tensors, for the plots and the targets table.
WIRE = {REST: "REST, JSON tensors", REST_BINARY: "REST, binary tensor extension",
        GRPC: "gRPC, raw tensor contents", PEER: "REST, JSON tensors",
        WIRE_LIMIT: "REST, JSON tensors", GRPC_WIRE_LIMIT: "gRPC, raw tensor contents"}
PLOT_NAMES = {REST: "somm REST (JSON)", REST_BINARY: "somm REST (binary)", GRPC: "somm gRPC",
              PEER: "FastAPI peer (JSON)", WIRE_LIMIT: "wire limit (nginx, somm's bytes)",
              GRPC_WIRE_LIMIT: "gRPC wire limit (somm's bytes)"}
# Every wire on digits-mlp against the naive peer (issue: "at least 20x the
# peer on every wire"; it was 10x before the wire-limit work).
PEER_FACTOR_TARGET = 20
# The share of the wire limit that each wire must reach, per the issue (only
# REST JSON has one: the limit is measured over REST JSON).
WIRE_LIMIT_SHARE_TARGET = {REST: 0.60}
RAW_COLORS = ["#7f7f7f", "#000000"]


# ---------------------------------------------------------------- loading

def parse_batch_metric(path, model):
    """(sum, count) of somm_inference_batch_size for `model` in a /metrics text."""
    total = {"sum": 0.0, "count": 0.0}
    if not os.path.exists(path):
        return None
    pat = re.compile(r'^somm_inference_batch_size_(sum|count)\{([^}]*)\}\s+(\S+)')
    with open(path) as f:
        for line in f:
            m = pat.match(line)
            if m and f'model="{model}"' in m.group(2):
                total[m.group(1)] += float(m.group(3))
    return total


def mean_batch(json_path, model):
    stem = json_path[:-len(".json")]
    before = parse_batch_metric(stem + ".metrics.before", model)
    after = parse_batch_metric(stem + ".metrics.after", model)
    if not before or not after:
        return None
    batches = after["count"] - before["count"]
    return (after["sum"] - before["sum"]) / batches if batches > 0 else None


def load_cpu(json_path):
    """The run's CPU use from <stem>.cpu.json (bench/compare.sh), or None."""
    path = json_path[:-len(".json")] + ".cpu.json"
    if not os.path.exists(path):
        return None
    with open(path) as f:
        c = json.load(f)
    if not c.get("wall_s"):
        return None
    server = c.get("server_cpu_s")
    return {"server_cores": None if server is None else server / c["wall_s"],
            "loadgen_cores": c["loadgen_cpu_s"] / c["wall_s"],
            "other_cores": c["other_cpu_s"] / c["wall_s"] if "other_cpu_s" in c else None}


def cpu_per_query_us(p):
    """Server CPU µs per query: cores busy over the run / the measured rate.
    The run includes warm-up, so this assumes its rate held throughout."""
    c = p.get("cpu")
    if not c or c["server_cores"] is None or not p["throughput_qps"]:
        return None
    return c["server_cores"] / p["throughput_qps"] * 1e6


def load_run(out_dir):
    """{model: {target: {"batch_size", "protocol", "points": [...]}}} sorted by concurrency."""
    runs = {}
    for path in sorted(glob.glob(os.path.join(out_dir, "*", "*.json"))):
        if path.endswith(".cpu.json"):
            continue
        model_dir = os.path.basename(os.path.dirname(path))
        with open(path) as f:
            doc = json.load(f)
        model = doc.get("model") or model_dir
        target = doc["target"]
        entry = runs.setdefault(model, {}).setdefault(
            target, {"batch_size": doc["batch_size"], "protocol": doc["protocol"], "points": []})
        mb = mean_batch(path, model)
        cpu = load_cpu(path)
        for p in doc["points"]:
            p = dict(p)
            if target in LIMIT_TARGETS:
                # A limit replays one somm answer, timing parameters included:
                # they are somm's from that one query, not the limit's.
                p["server_us"] = None
            p["mean_batch"] = mb
            p["cpu"] = cpu
            p["source"] = os.path.basename(path)[:-len(".json")]
            entry["points"].append(p)
    for targets in runs.values():
        for t in targets.values():
            t["points"].sort(key=lambda p: p["concurrency"] or 0)
    return runs


def target_order(targets):
    raws = sorted((t for t in targets if t.startswith("raw-libtorch")),
                  key=lambda t: int(re.sub(r"\D", "", t) or 0))
    return raws + [t for t in SERVER_TARGETS if t in targets] + \
        sorted(t for t in targets if t not in raws and t not in SERVER_TARGETS)


# ---------------------------------------------------------------- figures

def best(points):
    return max(points, key=lambda p: p["throughput_sps"]) if points else None


def at_conc(points, c):
    for p in points:
        if p["concurrency"] == c:
            return p
    return None


def fmt(v, nd=1):
    if v is None:
        return "n/a"
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return "n/a"
    if abs(v) >= 100 or nd == 0:
        return f"{v:,.0f}"
    return f"{v:,.{nd}f}"


def ms(us):
    return None if us is None else us / 1000.0


def server(p, key):
    s = p.get("server_us")
    return None if not s else s.get(key)


def errors_text(p):
    e = p.get("errors") or {}
    return ", ".join(f"{k} {v}" for k, v in sorted(e.items())) or "0"


def ratio(a, b):
    return a / b if a is not None and b else None


# ---------------------------------------------------------------- tables

SUMMARY_HEAD = ("| model | target | point | concurrency | batch/query | queries/s | samples/s "
                "| p50 ms | p99 ms | queue p50 µs | compute p50 µs | overhead p50 µs "
                "| mean batch formed | server CPU µs/query | other cores busy | errors | windows |\n"
                "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|")


def summary_row(model, target, label, t, p):
    lat = p["latency_us"]
    mb = p.get("mean_batch")
    return (f"| {model} | {target} | {label} | {p['concurrency']} | {t['batch_size']} "
            f"| {fmt(p['throughput_qps'])} | {fmt(p['throughput_sps'])} "
            f"| {fmt(ms(lat['p50']), 2)} | {fmt(ms(lat['p99']), 2)} "
            f"| {fmt(server(p, 'queue_p50'), 0)} | {fmt(server(p, 'compute_p50'), 0)} "
            f"| {fmt(server(p, 'overhead_p50'), 0)} | {fmt(mb, 1) if mb else 'n/a'} "
            f"| {fmt(cpu_per_query_us(p), 0)} "
            f"| {fmt(p['cpu']['other_cores'] if p.get('cpu') else None, 2)} "
            f"| {errors_text(p)} | {p['windows']}{'' if p['stable'] else ' (not stable)'} |")


def summary_table(runs):
    rows = [SUMMARY_HEAD]
    for model in runs:
        targets = runs[model]
        for target in target_order(targets):
            t = targets[target]
            c1 = at_conc(t["points"], 1)
            b = best(t["points"])
            if target.startswith("raw-libtorch"):  # one point per run, the better counts
                n = len(t["points"])
                rows.append(summary_row(model, target, f"best of {n} runs" if n > 1 else "c=1",
                                        t, b))
                continue
            if c1 is not None:
                rows.append(summary_row(model, target, "c=1, best" if b is c1 else "c=1", t, c1))
            if b is not None and b is not c1:
                rows.append(summary_row(model, target, "best", t, b))
    return "\n".join(rows)


def sweep_table(model, targets):
    rows = [f"#### {model}\n",
            "| target | run | other cores busy | concurrency | queries/s | samples/s | p50 ms | p90 ms | p99 ms | p99.9 ms "
            "| queue p50 µs | compute p50 µs | overhead p50 µs | client overhead p50 µs "
            "| mean batch formed | server cores busy | server CPU µs/query | load-generator cores busy "
            "| errors | windows |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"]
    for target in target_order(targets):
        t = targets[target]
        for p in t["points"]:
            lat = p["latency_us"]
            mb = p.get("mean_batch")
            name = target if t["batch_size"] == 1 else f"{target} (batch {t['batch_size']})"
            la = p["cpu"]["other_cores"] if p.get("cpu") else None
            rows.append(
                f"| {name} | {p['source']} | {fmt(la, 2)} | {p['concurrency']} "
                f"| {fmt(p['throughput_qps'])} "
                f"| {fmt(p['throughput_sps'])} | {fmt(ms(lat['p50']), 2)} | {fmt(ms(lat['p90']), 2)} "
                f"| {fmt(ms(lat['p99']), 2)} | {fmt(ms(lat['p999']), 2)} "
                f"| {fmt(server(p, 'queue_p50'), 0)} | {fmt(server(p, 'compute_p50'), 0)} "
                f"| {fmt(server(p, 'overhead_p50'), 0)} "
                f"| {fmt(server(p, 'client_overhead_p50'), 0)} "
                f"| {fmt(mb, 1) if mb else 'n/a'} "
                f"| {fmt(p['cpu']['server_cores'] if p.get('cpu') else None, 2)} "
                f"| {fmt(cpu_per_query_us(p), 0)} "
                f"| {fmt(p['cpu']['loadgen_cores'], 2) if p.get('cpu') else 'n/a'} "
                f"| {errors_text(p)} "
                f"| {p['windows']}{'' if p['stable'] else ' (not stable)'} |")
    return "\n".join(rows)


def raw_targets(targets):
    """(raw at batch 1, raw at the largest batch) target names, either may be None."""
    raws = [t for t in target_order(targets) if t.startswith("raw-libtorch")]
    b1 = next((t for t in raws if targets[t]["batch_size"] == 1), None)
    bmax = max(raws, key=lambda t: targets[t]["batch_size"], default=None)
    return b1, (bmax if bmax != b1 else None)


def throughput_at_p99_no_worse(somm, peer):
    """somm's best samples/s over the points whose p99 is no worse than the
    peer's p99 at the same concurrency; (point, peer point) or (None, None)."""
    chosen, peer_at = None, None
    for p in somm:
        q = at_conc(peer, p["concurrency"])
        if q is None or p["latency_us"]["p99"] > q["latency_us"]["p99"]:
            continue
        if chosen is None or p["throughput_sps"] > chosen["throughput_sps"]:
            chosen, peer_at = p, q
    return chosen, peer_at


def ratios(model, targets):
    """Lines of the ratio table for one model, plus verdict facts for targets."""
    somm = [t for t in SOMM_TARGETS if t in targets]
    rows = [f"#### {model}\n", "| figure | " + " | ".join(somm) + " |",
            "|---|" + "---:|" * len(somm)]
    facts = {}
    peer = targets.get(PEER, {}).get("points", [])
    peer_best = best(peer)
    b1, bmax = raw_targets(targets)
    raw1 = best(targets[b1]["points"]) if b1 else None
    rawm = best(targets[bmax]["points"]) if bmax else None
    def limit_points(target):
        return targets.get(WIRE_LIMIT_OF[target], {}).get("points", [])

    def cell(target, fn):
        pts = targets.get(target, {}).get("points", [])
        if not pts:
            return "n/a"
        return fn(pts)

    def best_ratio(pts):
        return f"{fmt(ratio(best(pts)['throughput_sps'], peer_best and peer_best['throughput_sps']), 2)}x"

    def p99_at_best(pts):
        b = best(pts)
        q = at_conc(peer, b["concurrency"])
        r = ratio(b["latency_us"]["p99"], q and q["latency_us"]["p99"])
        return f"{fmt(r, 2)}x (c={b['concurrency']})"

    def p99_c1(pts):
        p, q = at_conc(pts, 1), at_conc(peer, 1)
        return f"{fmt(ratio(p and p['latency_us']['p99'], q and q['latency_us']['p99']), 2)}x"

    def no_worse(pts):
        p, q = throughput_at_p99_no_worse(pts, peer)
        if p is None or not peer_best:
            return "none (p99 worse at every concurrency)"
        return f"{fmt(p['throughput_sps'] / peer_best['throughput_sps'], 2)}x (c={p['concurrency']})"

    def no_worse_than_peer_best(pts):
        # Stricter: against the p99 the peer has where it is fastest, not
        # where its queue (and so its p99) has grown with the concurrency.
        if not peer_best:
            return "n/a"
        ok = [p for p in pts if p["latency_us"]["p99"] <= peer_best["latency_us"]["p99"]]
        if not ok:
            return "none"
        p = best(ok)
        return f"{fmt(p['throughput_sps'] / peer_best['throughput_sps'], 2)}x (c={p['concurrency']})"

    def overhead_c1(pts):
        p = at_conc(pts, 1)
        return f"{fmt(server(p, 'overhead_p50'), 0)} µs" if p else "n/a"

    def added_c1(pts):
        p = at_conc(pts, 1)
        if not p or not raw1:
            return "n/a"
        return f"{fmt(p['latency_us']['p50'] - raw1['latency_us']['p50'], 0)} µs"

    def vs_raw(raw):
        def f(pts):
            return f"{fmt(100 * ratio(best(pts)['throughput_sps'], raw and raw['throughput_sps']), 1)}%"
        return f

    def cpu_best(pts):
        b = best(pts)
        mine, theirs = cpu_per_query_us(b), peer_best and cpu_per_query_us(peer_best)
        if mine is None:
            return "n/a"
        if theirs is None:
            return f"{fmt(mine, 0)} µs"
        return f"{fmt(mine, 0)} µs ({fmt(theirs / mine, 1)}x less than the peer's {fmt(theirs, 0)} µs)"

    lines = [
        ("throughput, best / peer best", best_ratio),
        ("throughput at p99 no worse than the peer's at the same concurrency / peer best",
         no_worse),
        ("throughput at p99 no worse than the peer's at its best point / peer best",
         no_worse_than_peer_best),
        ("p99 / peer p99, at somm's best concurrency", p99_at_best),
        ("p99 / peer p99, concurrency 1", p99_c1),
        ("server overhead p50, concurrency 1", overhead_c1),
        ("end-to-end p50 minus raw libtorch p50 (batch 1), concurrency 1", added_c1),
        ("server CPU per query at the best point (peer: at its best point)", cpu_best),
    ]
    if raw1:
        lines.append((f"best samples/s / raw libtorch batch 1 ({fmt(raw1['throughput_sps'])}/s)",
                      vs_raw(raw1)))
    if rawm:
        lines.append((f"best samples/s / raw libtorch batch {targets[bmax]['batch_size']} "
                      f"({fmt(rawm['throughput_sps'])}/s)", vs_raw(rawm)))
    if not peer:
        lines = [l for l in lines if "peer" not in l[0]]
    for label, fn in lines:
        rows.append(f"| {label} | " + " | ".join(cell(t, fn) for t in somm) + " |")

    # Against each target's own wire limit (n/a where the run has none).
    def wire_cell(target, fn):
        pts, wire = targets.get(target, {}).get("points", []), limit_points(target)
        return fn(pts, wire, best(wire)) if pts and wire else "n/a"

    def vs_wire_best(pts, wire, wb):
        b = best(pts)
        return (f"{pct(ratio(b['throughput_sps'], wb['throughput_sps']))} (c={b['concurrency']}; "
                f"limit {fmt(wb['throughput_sps'])}/s at c={wb['concurrency']})")

    def vs_wire_same_c(pts, wire, wb):
        b = best(pts)
        q = at_conc(wire, b["concurrency"])
        return pct(ratio(b["throughput_sps"], q and q["throughput_sps"]))

    def cpu_vs_wire(pts, wire, wb):
        mine, theirs = cpu_per_query_us(best(pts)), cpu_per_query_us(wb)
        if mine is None:
            return "n/a"
        if not theirs:
            return f"{fmt(mine, 0)} µs"
        return f"{fmt(mine, 0)} µs ({fmt(mine / theirs, 1)}x the limit's {fmt(theirs, 0)} µs)"

    def wire_vs_peer(pts, wire, wb):
        return f"{fmt(ratio(wb['throughput_sps'], peer_best and peer_best['throughput_sps']), 2)}x"

    wire_lines = [
        ("best samples/s / its wire's limit best (REST: nginx; gRPC: the generic gRPC server)",
         vs_wire_best),
        ("best samples/s / its wire's limit at the same concurrency", vs_wire_same_c),
        ("server CPU per query at the best point (the limit's at its best point)", cpu_vs_wire),
    ]
    if peer_best:
        wire_lines.append(("its wire's limit best / peer best: the most any server reaches "
                           "over that wire here", wire_vs_peer))
    for label, fn in wire_lines:
        if any(limit_points(t) for t in somm):
            rows.append(f"| {label} | " + " | ".join(wire_cell(t, fn) for t in somm) + " |")

    for target in somm:
        pts = targets.get(target, {}).get("points", [])
        if not pts:
            continue
        p, _ = throughput_at_p99_no_worse(pts, peer)
        limit_best = best(limit_points(target))
        facts[target] = {
            "vs_peer": ratio(p["throughput_sps"], peer_best["throughput_sps"])
            if p and peer_best else None,
            "vs_peer_conc": p["concurrency"] if p else None,
            "overhead_c1": server(at_conc(pts, 1), "overhead_p50") if at_conc(pts, 1) else None,
            "vs_raw_max": ratio(best(pts)["throughput_sps"], rawm and rawm["throughput_sps"]),
            "vs_raw_1": ratio(best(pts)["throughput_sps"], raw1 and raw1["throughput_sps"]),
            "best_conc": best(pts)["concurrency"],
            "best_mean_batch": best(pts).get("mean_batch"),
            "raw_max_batch": targets[bmax]["batch_size"] if bmax else None,
            "vs_wire": ratio(best(pts)["throughput_sps"],
                             limit_best and limit_best["throughput_sps"]),
            "wire_best_conc": limit_best["concurrency"] if limit_best else None,
            "wire_vs_peer": ratio(limit_best and limit_best["throughput_sps"],
                                  peer_best and peer_best["throughput_sps"]),
        }
    return "\n".join(rows), facts


def pct(v):
    return f"{fmt(None if v is None else 100 * v, 1)}%"


def wire_share_table(model, targets):
    """Every somm point of `model` as a share of its wire's limit (the
    limit's best point, and the same concurrency), with p99 and server CPU per
    query side by side; None when the run has no wire limit for it."""
    somm = [t for t in SOMM_TARGETS
            if t in targets and targets.get(WIRE_LIMIT_OF[t], {}).get("points")]
    if not somm:
        return None
    rows = [f"#### {model}\n"]
    for limit in LIMIT_TARGETS:
        pts = targets.get(limit, {}).get("points", [])
        if pts:
            wb = best(pts)
            rows.append(f"- {PLOT_NAMES[limit]}, best: {fmt(wb['throughput_sps'])} samples/s at "
                        f"c={wb['concurrency']}, p99 {fmt(ms(wb['latency_us']['p99']), 2)} ms, "
                        f"server CPU {fmt(cpu_per_query_us(wb), 1)} µs/query.")
    rows += ["",
             "| somm target | concurrency | samples/s | / wire limit best | wire limit samples/s, "
             "same concurrency | / wire limit, same concurrency | p99 ms (somm / wire limit) "
             "| server CPU µs/query (somm / wire limit) |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for target in somm:
        wire = targets[WIRE_LIMIT_OF[target]]["points"]
        wb = best(wire)
        for p in targets[target]["points"]:
            q = at_conc(wire, p["concurrency"])
            rows.append(
                f"| {target} | {p['concurrency']} | {fmt(p['throughput_sps'])} "
                f"| {pct(ratio(p['throughput_sps'], wb['throughput_sps']))} "
                f"| {fmt(q and q['throughput_sps'])} "
                f"| {pct(ratio(p['throughput_sps'], q and q['throughput_sps']))} "
                f"| {fmt(ms(p['latency_us']['p99']), 2)} / "
                f"{fmt(ms(q['latency_us']['p99']) if q else None, 2)} "
                f"| {fmt(cpu_per_query_us(p), 0)} / {fmt(cpu_per_query_us(q) if q else None, 1)} |")
    return "\n".join(rows)


def verdict(ok):
    return "n/a" if ok is None else ("**met**" if ok else "**missed**")


def targets_table(facts, tiny, heavy):
    """One row per (target, somm target); the protocol column says which wire
    each verdict was measured on, and a closing line per target names the
    somm targets that met it."""
    rows = ["| target (from the issue) | somm target (wire) | measured | verdict |",
            "|---|---|---|---|"]
    met = {}

    def add(target, proto, measured, ok):
        rows.append(f"| {target} | {proto} ({WIRE[proto]}) | {measured} | {verdict(ok)} |")
        if ok is not None:
            met.setdefault(target, {"met": [], "missed": []})["met" if ok else "missed"].append(proto)

    for proto in SOMM_TARGETS:
        f = facts.get(tiny, {}).get(proto)
        if f:
            v = f["vs_peer"]
            where = f" at c={f['vs_peer_conc']}" if f["vs_peer_conc"] else ""
            limit = f["wire_vs_peer"]
            # What the wire allows a server that does nothing: above it the
            # target cannot be met on this machine.
            ceiling = f" (its wire's limit: {fmt(limit, 2)}x)" if limit is not None else ""
            add(f"{tiny}: somm ≥ {PEER_FACTOR_TARGET}x the peer's throughput at a p99 no worse",
                proto, f"{fmt(v, 2)}x{where}{ceiling}",
                None if v is None else v >= PEER_FACTOR_TARGET)
    for proto, share in WIRE_LIMIT_SHARE_TARGET.items():
        f = facts.get(tiny, {}).get(proto)
        if f and f["wire_best_conc"] is not None:  # a run without the wire limit has no row
            v = f["vs_wire"]
            add(f"{tiny} over REST JSON: somm ≥ {100 * share:.0f}% of the wire limit (best "
                f"samples/s / the wire limit's best)", proto,
                f"{pct(v)} (somm at c={f['best_conc']}, wire limit at c={f['wire_best_conc']})",
                None if v is None else v >= share)
    for model in (tiny, heavy):
        for proto in SOMM_TARGETS:
            f = facts.get(model, {}).get(proto)
            if f:
                o = f["overhead_c1"]
                add(f"{model}: server overhead p50 ≤ 50 µs at concurrency 1", proto,
                    f"{fmt(o, 0)} µs", None if o is None else o <= 50)
    for proto in SOMM_TARGETS:
        f = facts.get(heavy, {}).get(proto)
        if f:
            v = f["vs_raw_max"]
            mb = f["best_mean_batch"]
            # The batch formed differs per target, so it stays in the measured cell.
            add(f"{heavy}: somm ≥ 95% of raw libtorch throughput (best samples/s vs raw "
                f"libtorch at max batch {f['raw_max_batch']})", proto,
                f"{fmt(None if v is None else 100 * v, 1)}% "
                f"(vs batch 1: {fmt(None if f['vs_raw_1'] is None else 100 * f['vs_raw_1'], 1)}%; "
                f"mean batch {fmt(mb, 1) if mb else 'n/a'} at c={f['best_conc']})",
                None if v is None else v >= 0.95)
    lines = ["\n".join(rows), ""]
    for target, m in met.items():
        lines.append(f"- {target}: met over {', '.join(m['met']) or 'none'}"
                     + (f"; missed over {', '.join(m['missed'])}" if m["missed"] else "") + ".")
    return "\n".join(lines)


# ---------------------------------------------------------------- SVG

def nice_ticks(lo, hi):
    """Log-scale ticks 1-2-5 per decade within [lo, hi]."""
    ticks = []
    e = math.floor(math.log10(lo))
    while 10 ** e <= hi * 1.0001:
        for m in (1, 2, 5):
            v = m * 10 ** e
            if lo * 0.9999 <= v <= hi * 1.0001:
                ticks.append(v)
        e += 1
    return ticks


def nice_below(v):
    """The largest 1-2-5 step value at or below v (an axis bound)."""
    e = math.floor(math.log10(v))
    return max(m * 10 ** e for m in (1, 2, 5) if m * 10 ** e <= v * 1.0001)


def nice_above(v):
    """The smallest 1-2-5 step value at or above v."""
    e = math.floor(math.log10(v))
    return min(m * 10 ** k for k in (e, e + 1) for m in (1, 2, 5) if m * 10 ** k >= v * 0.9999)


def tick_label(v):
    if v >= 1000:
        return f"{v / 1000:g}k"
    return f"{v:g}"


def esc(s):
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def svg_plot(model, targets, meta):
    """p99 latency (ms, log) against throughput (samples/s, log), one line per target."""
    series = []
    raw_i = 0
    for target in target_order(targets):
        t = targets[target]
        pts = [(p["throughput_sps"], p["latency_us"]["p99"] / 1000.0, p["concurrency"])
               for p in t["points"] if p["throughput_sps"] > 0 and p["latency_us"]["p99"] > 0]
        if not pts:
            continue
        if target.startswith("raw-libtorch"):
            color = RAW_COLORS[raw_i % len(RAW_COLORS)]
            raw_i += 1
            name = f"raw libtorch, batch {t['batch_size']}"
        else:
            color = COLORS.get(target, "#9467bd")
            name = PLOT_NAMES.get(target, target)
        series.append((name, color, pts, target.startswith("raw-libtorch")))
    if not series:
        return None
    xs = [x for _, _, pts, _ in series for x, _, _ in pts]
    ys = [y for _, _, pts, _ in series for _, y, _ in pts]
    x_lo, x_hi = nice_below(min(xs)), nice_above(max(xs))
    y_lo, y_hi = nice_below(min(ys)), nice_above(max(ys))
    W, H = 860, 520
    L, R, T, B = 80, 280, 50, 60
    pw, ph = W - L - R, H - T - B

    def sx(x):
        return L + pw * (math.log10(x) - math.log10(x_lo)) / (math.log10(x_hi) - math.log10(x_lo))

    def sy(y):
        return T + ph - ph * (math.log10(y) - math.log10(y_lo)) / (math.log10(y_hi) - math.log10(y_lo))

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
           f'viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">',
           f'<rect width="{W}" height="{H}" fill="white"/>',
           f'<text x="{L + pw / 2}" y="22" text-anchor="middle" font-size="15" font-weight="bold">'
           f'{esc(model)}: p99 latency against throughput (closed loop, log-log)</text>',
           f'<text x="{L + pw / 2}" y="38" text-anchor="middle" font-size="11" fill="#555">'
           f'{esc(meta.get("date", ""))}; {meta.get("cores", "?")} CPU cores shared by the '
           f'load generator and the server; point labels are concurrency</text>']
    for v in nice_ticks(x_lo, x_hi):
        x = sx(v)
        major = abs(math.log10(v) - round(math.log10(v))) < 1e-9
        out.append(f'<line x1="{x:.1f}" y1="{T}" x2="{x:.1f}" y2="{T + ph}" '
                   f'stroke="{"#ccc" if major else "#eee"}"/>')
        out.append(f'<line x1="{x:.1f}" y1="{T + ph}" x2="{x:.1f}" y2="{T + ph + 5}" stroke="black"/>')
        out.append(f'<text x="{x:.1f}" y="{T + ph + 18}" text-anchor="middle">{tick_label(v)}</text>')
    for v in nice_ticks(y_lo, y_hi):
        y = sy(v)
        major = abs(math.log10(v) - round(math.log10(v))) < 1e-9
        out.append(f'<line x1="{L}" y1="{y:.1f}" x2="{L + pw}" y2="{y:.1f}" '
                   f'stroke="{"#ccc" if major else "#eee"}"/>')
        out.append(f'<line x1="{L - 5}" y1="{y:.1f}" x2="{L}" y2="{y:.1f}" stroke="black"/>')
        out.append(f'<text x="{L - 8}" y="{y + 4:.1f}" text-anchor="end">{tick_label(v)}</text>')
    out.append(f'<rect x="{L}" y="{T}" width="{pw}" height="{ph}" fill="none" stroke="black"/>')
    out.append(f'<text x="{L + pw / 2}" y="{H - 18}" text-anchor="middle">'
               f'throughput (samples/s, log scale)</text>')
    out.append(f'<text x="18" y="{T + ph / 2}" text-anchor="middle" '
               f'transform="rotate(-90 18 {T + ph / 2})">p99 latency (ms, log scale)</text>')
    for name, color, pts, is_raw in series:
        coords = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y, _ in pts)
        if len(pts) > 1 and not is_raw:  # raw libtorch: separate runs, not a curve
            out.append(f'<polyline points="{coords}" fill="none" stroke="{color}" stroke-width="2"/>')
        for x, y, c in pts:
            if is_raw:
                out.append(f'<rect x="{sx(x) - 5:.1f}" y="{sy(y) - 5:.1f}" width="10" height="10" '
                           f'fill="{color}"/>')
            else:
                out.append(f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="4" fill="{color}"/>')
                out.append(f'<text x="{sx(x) + 6:.1f}" y="{sy(y) - 6:.1f}" font-size="10" '
                           f'fill="{color}">{c}</text>')
    lx, ly = L + pw + 20, T + 10
    out.append(f'<text x="{lx}" y="{ly}" font-weight="bold">target</text>')
    for i, (name, color, _, is_raw) in enumerate(series):
        y = ly + 22 + 22 * i
        if is_raw:
            out.append(f'<rect x="{lx + 10}" y="{y - 9}" width="10" height="10" fill="{color}"/>')
        else:
            out.append(f'<line x1="{lx}" y1="{y - 4}" x2="{lx + 30}" y2="{y - 4}" stroke="{color}" '
                       f'stroke-width="2"/><circle cx="{lx + 15}" cy="{y - 4}" r="4" fill="{color}"/>')
        out.append(f'<text x="{lx + 38}" y="{y}">{esc(name)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------- main

DEFINITIONS = """\
- **target**: `raw-libtorch-bN` is `bench_raw_libtorch` (libtorch called in process on the same
  TorchScript file, same intra-op threads, N samples per forward call, concurrency 1, no server);
  `somm-rest` / `somm-rest-binary` / `somm-grpc` are `somm bench` against `somm serve` over REST
  with JSON tensors, over REST with the binary tensor data extension (tensors as raw bytes after
  a JSON header, as Triton's perf_analyzer sends by default) and over gRPC;
  `fastapi-peer` is `somm bench` over REST (JSON) against `bench/fastapi_peer.py` (FastAPI +
  uvicorn + the same TorchScript file: the naive-Python baseline), or against the server that
  `SOMM_PEER` names when the command sets it.
  Every server query carries one sample; somm batches them server-side.
- **wire-limit**: `somm bench` over REST (JSON) against nginx (one worker process, access log
  off, keep-alive; `bench/wire_limit.sh`) answering every question with the bytes somm sent to
  the same question in the same run, checked byte for byte before and after the sweep: what the
  wire, the kernel and the same load generator allow when the server does next to nothing. Its
  queue/compute/overhead columns are n/a (the replayed timing parameters are somm's), and its
  server CPU is nginx's worker's. The "Against the wire limit" tables give each somm point as a
  share of the limit's best point and of the limit at the same concurrency.
- **point**: `c=1` is the concurrency-1 point, `best` the point with the highest samples/s
  (`c=1, best` when they are the same). Raw libtorch runs before and after the servers (the
  machine is shared; other work comes and goes) and its better run is the limit everywhere.
- **run, other cores busy**: the file a row comes from, and how many cores' worth of CPU the
  rest of the machine (neither the server nor the load generator; other users' builds, the idle
  peer or somm) used during that run, from `/proc/stat`. Anything well above 0 means the point
  was measured on a loaded machine.
- **concurrency**: closed loop, that many queries in flight (one client thread each).
- **queries/s, samples/s**: successful queries (forward calls for raw libtorch) per second over
  the last 3 measurement windows; samples/s = queries/s × samples per query.
- **p50/p99 ms**: client-side latency percentiles (nearest rank), send to answer.
- **queue / compute / overhead p50 µs**: the server's own timing from the response parameters
  (`somm_queue_us`, `somm_compute_us`, and `somm_server_us − queue − compute`), medians over the
  point's queries; n/a where the target reports none.
- **client overhead p50**: client-side call time minus `somm_server_us` (wire, encode/decode,
  client).
- **mean batch formed**: samples per batch that somm executed during that run (difference of its
  `somm_inference_batch_size` histogram's sum and count; warm-up included).
- **server cores busy / server CPU µs per query / load-generator cores busy**: CPU time (user +
  system, all threads, from `/proc`) that the server process and the `somm bench` process used
  during that run, divided by its wall time; per query = cores busy / queries/s. The run includes
  its warm-up, so this assumes the rate held throughout. On this machine the load generator and
  the server compete for the same cores, so CPU per query is the figure least bent by that.
- **windows**: measurement windows run; "(not stable)" when the last 3 did not agree within the
  stability percentage before the window limit."""


def report_body(meta, summary, ratio_blocks, verdicts, sweeps, svgs, h, details=False,
                wire_blocks=()):
    """The report's lines under headings of level `h` ("##" or "###")."""
    md = []
    if meta:
        md += [f"- date: {meta.get('date', '?')}",
               f"- command: `{meta.get('command', '?')}`",
               f"- commit: `{meta.get('git', '?')}`",
               f"- machine: {meta.get('machine', '?')}; load average before/after: "
               f"{meta.get('loadavg_start', '?')} / {meta.get('loadavg_end', '?')}",
               f"- measurement: {meta.get('settings', '?')}",
               f"- threading environment: "
               f"{', '.join(f'{k}={v}' for k, v in meta.get('env', {}).items()) or 'none set'}",
               ""]
    md += [f"{h} Summary", "", summary, "", f"{h} Ratios", ""]
    for block in ratio_blocks:
        md += [block.replace("#### ", h + "# "), ""]
    if wire_blocks:
        md += [f"{h} Against the wire limit", ""]
        for block in wire_blocks:
            md += [block.replace("#### ", h + "# "), ""]
    md += [f"{h} Targets", "", verdicts, "", f"{h} What the columns mean", "", DEFINITIONS, ""]
    md += [f"{h} Plots", ""] + [f"![{s}]({s})" for s in svgs] + [""]
    md += [f"{h} Full sweeps", ""]
    if details:
        md += ["<details><summary>every point of every target</summary>", ""]
    md += [t.replace("#### ", h + "# ") + "\n" for t in sweeps]
    if details:
        md += ["</details>", ""]
    return md


BEGIN_MARK = "<!-- bench/report.py: generated from here -->"
END_MARK = "<!-- bench/report.py: generated up to here -->"


def update_doc(path, lines):
    """Replaces what lies between the two marks in `path` with `lines`."""
    with open(path) as f:
        text = f.read()
    if BEGIN_MARK not in text or END_MARK not in text:
        sys.exit(f"report.py: {path} lacks the marks {BEGIN_MARK} ... {END_MARK}")
    head, rest = text.split(BEGIN_MARK, 1)
    _, tail = rest.split(END_MARK, 1)
    with open(path, "w") as f:
        f.write(head + BEGIN_MARK + "\n" + "\n".join(lines) + "\n" + END_MARK + tail)


def brief(path):
    with open(path) as f:
        doc = json.load(f)
    for p in doc["points"]:
        lat = p["latency_us"]
        extra = ""
        if p.get("server_us") and doc["target"] not in LIMIT_TARGETS:  # see load_run
            s = p["server_us"]
            extra = (f", server queue/compute/overhead p50 {s['queue_p50']:.0f}/"
                     f"{s['compute_p50']:.0f}/{s['overhead_p50']:.0f} µs")
        errs = sum((p.get("errors") or {}).values())
        print(f"  {doc['model']} {doc['target']:<18} batch {doc['batch_size']:<3} c={p['concurrency']:<3} "
              f"{p['throughput_sps']:>10,.1f} samples/s  p50 {lat['p50'] / 1000:8.2f} ms  "
              f"p99 {lat['p99'] / 1000:8.2f} ms{extra}{f', {errs} errors' if errs else ''}"
              f"{'' if p['stable'] else ' (not stable)'}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out_dir", nargs="?")
    ap.add_argument("--docs-dir", help="also copy performance-<model>.svg here")
    ap.add_argument("--update-doc", metavar="FILE.md",
                    help="replace the generated part of FILE.md (between its marks) with this run")
    ap.add_argument("--tiny", default="digits-mlp")
    ap.add_argument("--heavy", default="resnet18")
    ap.add_argument("--brief", metavar="FILE.json", help="print one line per point of FILE and exit")
    a = ap.parse_args()
    if a.brief:
        brief(a.brief)
        return
    if not a.out_dir:
        ap.error("OUT_DIR is required")

    meta_path = os.path.join(a.out_dir, "meta.json")
    meta = json.load(open(meta_path)) if os.path.exists(meta_path) else {}
    runs = load_run(a.out_dir)
    if not runs:
        sys.exit(f"report.py: no bench JSON under {a.out_dir}/<model>/")

    summary = summary_table(runs)
    ratio_blocks, facts = [], {}
    for model in runs:
        text, facts[model] = ratios(model, runs[model])
        ratio_blocks.append(text)
    verdicts = targets_table(facts, a.tiny, a.heavy)
    wire_blocks = [b for b in (wire_share_table(m, runs[m]) for m in runs) if b]

    svgs = []
    for model in runs:
        svg = svg_plot(model, runs[model], meta)
        if svg is None:
            continue
        name = f"performance-{model}.svg"
        with open(os.path.join(a.out_dir, name), "w") as f:
            f.write(svg)
        svgs.append(name)
        if a.docs_dir:
            shutil.copy(os.path.join(a.out_dir, name), os.path.join(a.docs_dir, name))

    sweeps = [sweep_table(model, runs[model]) for model in runs]
    md = [f"# somm performance comparison ({meta.get('date', 'undated')})", ""]
    md += report_body(meta, summary, ratio_blocks, verdicts, sweeps, svgs, "##",
                      wire_blocks=wire_blocks)
    with open(os.path.join(a.out_dir, "report.md"), "w") as f:
        f.write("\n".join(md))
    if a.update_doc:
        update_doc(a.update_doc, report_body(meta, summary, ratio_blocks, verdicts, sweeps,
                                             svgs, "###", details=True, wire_blocks=wire_blocks))

    print(summary)
    print()
    for block in ratio_blocks + wire_blocks:
        print(block)
        print()
    print(verdicts)


if __name__ == "__main__":
    main()
