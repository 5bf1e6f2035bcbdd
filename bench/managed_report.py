#!/usr/bin/python3
"""Report of one bench/managed.sh run: a table per target, the targets, an SVG timeline.

Usage: /usr/bin/python3 bench/managed_report.py OUT_DIR [--docs-dir docs]
                                                [--update-doc docs/managed-results.md]

OUT_DIR is what bench/managed.sh wrote:
  meta.json, trace.csv, trace.json (make_trace.py's summary), plan.json
  (managed_plan.py: time scale, per-model feasibility threshold, replicas)
  <target>/target.json   how the server was started (flags, instances)
  <target>/queries.csv   `somm bench --query-log`: one row per query
  <target>/bench.log     `somm bench` progress, with the replay's origin
                         ("trace: origin unix_s=...")
  <target>/samples.jsonl managed_sample.py: replicas, memory, counters, 1/s
Writes OUT_DIR/report.md and OUT_DIR/managed-timeline.svg (copied to
--docs-dir), with --update-doc replaces the part of FILE.md between its two
"bench/managed_report.py" marks, and prints the table.

Definitions (repeated in report.md):
  feasible     a query whose latency_slo_ms is at least the best profiled
               batch-1 latency of any usable variant of its model (plan.json
               best_b1_ms): no server could meet a lower one even when idle
  attainment   of the feasible queries, the share answered successfully
               within their SLO; rejected, failed and late queries are misses
  instance-s   loaded replicas integrated over the replay (wall clock, from
               the 1-second samples, each value held until the next):
               somm_instances (summed over model, version, variant,
               hardware) when the server exports it, else
               somm_instances_loaded, else READY models of the repository
               index times their configured instance_count
Standard library only.
"""
import argparse
import csv
import json
import math
import os
import re
import shutil
import sys

TARGETS = ["somm-managed", "static-peak", "static-avg"]
COLORS = {"somm-managed": "#1f77b4", "static-peak": "#d62728", "static-avg": "#2ca02c"}
# Models and targets never share a colour: the panels sit one above the other.
MODEL_COLORS = ["#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"]
DASHES = {"somm-managed": None, "static-peak": "7,3", "static-avg": "2,2"}
ATTAINMENT_TARGET = 0.99
INSTANCE_S_TARGET = 0.60
SERIES = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?$')
LABEL = re.compile(r'(\w+)="([^"]*)"')


def die(msg):
    sys.exit(f"managed_report.py: {msg}")


def load_json(path, default=None):
    if not os.path.exists(path):
        return default
    with open(path) as f:
        return json.load(f)


def series(key):
    """('somm_instances', {'model': 'm', ...}) of a Prometheus series key."""
    m = SERIES.match(key)
    if not m:
        return key, {}
    return m.group(1), dict(LABEL.findall(m.group(2) or ""))


def family_sum(metrics, family, **labels):
    total, seen = 0.0, False
    for key, v in (metrics or {}).items():
        name, lab = series(key)
        if name == family and all(lab.get(k) == want for k, want in labels.items()):
            total += v
            seen = True
    return total if seen else None


def replicas(sample, instances_config):
    """(total, {model: n}, source) of one sample."""
    m = sample.get("metrics") or {}
    for family in ("somm_instances", "somm_instances_loaded"):
        per_model, seen = {}, False
        for key, v in m.items():
            name, lab = series(key)
            if name == family:
                seen = True
                per_model[lab.get("model", "?")] = per_model.get(lab.get("model", "?"), 0) + v
        if seen:
            return sum(per_model.values()), per_model, family
    if "index" in sample:
        per_model = {e["name"]: instances_config.get(e["name"], 1)
                     for e in sample["index"] if e.get("state") == "READY"}
        return sum(per_model.values()), per_model, "repository index"
    return None, {}, None


def threads(sample, model_threads, instances_config):
    """CPU threads the loaded replicas of one sample hold: a replica on hardware "cpuN" holds N;
    one without a hardware label its model's configured intra_op_threads; a GPU replica 1."""
    m = sample.get("metrics") or {}
    for family in ("somm_instances", "somm_instances_loaded"):
        total, seen = 0.0, False
        for key, v in m.items():
            name, lab = series(key)
            if name != family:
                continue
            seen = True
            hw = re.fullmatch(r"cpu(\d+)", lab.get("hardware", ""))
            if hw:
                total += v * int(hw.group(1))
            elif "hardware" in lab:
                total += v
            else:
                total += v * model_threads.get(lab.get("model"), 1)
        if seen:
            return total
    if "index" in sample:
        return sum(instances_config.get(e["name"], 1) * model_threads.get(e["name"], 1)
                   for e in sample["index"] if e.get("state") == "READY")
    return None


def read_origin(log_path):
    with open(log_path) as f:
        for line in f:
            m = re.search(r"trace: origin unix_s=([0-9.]+)", line)
            if m:
                return float(m.group(1))
    die(f"{log_path} has no 'trace: origin unix_s=' line (a somm bench without it?)")


def percentile(sorted_values, p):
    """Nearest rank, as somm bench reports."""
    if not sorted_values:
        return None
    rank = max(1, math.ceil(p / 100.0 * len(sorted_values)))
    return sorted_values[rank - 1]


# ---------------------------------------------------------------- one target

def analyse_target(out_dir, target, plan):
    d = os.path.join(out_dir, target)
    info = load_json(os.path.join(d, "target.json"), {})
    best_b1 = {m: v.get("best_b1_ms") for m, v in plan["models"].items()}
    origin = read_origin(os.path.join(d, "bench.log"))
    queries = []
    with open(os.path.join(d, "queries.csv"), newline="") as f:
        for row in csv.DictReader(f):
            queries.append(row)
    r = {"target": target, "info": info, "queries": len(queries)}
    codes, messages = {}, {}
    lat_ok, met, feasible, infeasible, infeasible_rejected = [], 0, 0, 0, 0
    late = rejected = expired = failed = 0
    per_second = {}  # due second -> [feasible, met]
    per_model = {}  # model -> [feasible, met]
    end_ms = 0.0
    for q in queries:
        code = q["code"]
        latency = float(q["latency_ms"])
        end_ms = max(end_ms, float(q["done_ms"]))
        slo = float(q["slo_ms"]) if q["slo_ms"] else None
        ok = code == "OK"
        if ok:
            lat_ok.append(latency)
        else:
            codes[code] = codes.get(code, 0) + 1
            # The message's words without numbers, to group "why" across queries.
            key = re.sub(r"(?<![\w])[0-9][0-9.e+-]*", "N", q.get("error", ""))[:90]
            messages[(code, key)] = messages.get((code, key), 0) + 1
        b1 = best_b1.get(q["model"])
        if slo is None:
            continue
        if b1 is not None and slo < b1:
            infeasible += 1
            infeasible_rejected += 0 if ok else 1
            continue
        feasible += 1
        by_model = per_model.setdefault(q["model"], [0, 0])
        by_model[0] += 1
        sec = int(float(q["scheduled_ms"]) // 1000)
        cell = per_second.setdefault(sec, [0, 0])
        cell[0] += 1
        if ok and latency <= slo:
            met += 1
            cell[1] += 1
            by_model[1] += 1
        elif ok:
            late += 1
        elif code in ("RESOURCE_EXHAUSTED", "UNAVAILABLE"):
            rejected += 1
        elif code == "DEADLINE_EXCEEDED":
            expired += 1
        else:
            failed += 1
    lat_ok.sort()
    r.update(feasible=feasible, met=met, late=late, rejected=rejected, expired=expired,
             failed=failed,
             infeasible=infeasible, infeasible_rejected=infeasible_rejected,
             attainment=met / feasible if feasible else None, codes=codes,
             messages=sorted(messages.items(), key=lambda kv: -kv[1])[:6],
             p50=percentile(lat_ok, 50), p99=percentile(lat_ok, 99), ok=len(lat_ok),
             origin=origin, replay_s=end_ms / 1000.0,
             attainment_per_second={s: c[1] / c[0] for s, c in per_second.items() if c[0]},
             attainment_by_model={m: c[1] / c[0] for m, c in per_model.items() if c[0]})

    # A static server must load nothing after its start; a line of the log
    # saying otherwise shows that a target was not what it claims to be.
    # "on demand": builds before the managed runtime; "critical path": the
    # managed runtime's "control load ... (on a query's critical path)".
    r["on_demand_loads"] = 0
    for log in ("server.stderr", "server.stdout"):
        if os.path.exists(os.path.join(d, log)):
            with open(os.path.join(d, log), errors="replace") as f:
                r["on_demand_loads"] += sum(1 for line in f if re.search(
                    r"on demand|critical path", line, re.I))
    samples = []
    path = os.path.join(d, "samples.jsonl")
    if os.path.exists(path):
        with open(path) as f:
            samples = [json.loads(line) for line in f if line.strip()]
    model_threads = {m: v.get("threads", 1) for m, v in plan["models"].items()}
    analyse_samples(r, samples, info.get("instances", {}), model_threads, origin,
                    origin + r["replay_s"])
    return r


def integrate(points, t0, t1):
    """Integral over [t0, t1] of a step function given as sorted (t, v), each v held until the
    next t; before the first point the first value holds."""
    if not points:
        return None
    total = 0.0
    for i, (t, v) in enumerate(points):
        start = t0 if i == 0 else max(t, t0)
        end = points[i + 1][0] if i + 1 < len(points) else t1
        end = min(end, t1)
        if end > start:
            total += v * (end - start)
    return total


def analyse_samples(r, samples, instances_config, model_threads, t0, t1):
    rep_points, per_model_points, rss, mem_used, sources = [], {}, [], [], set()
    thread_points = []
    window = [s for s in samples if t0 - 1.5 <= s["t"] <= t1 + 1.5]
    for s in samples:
        total, per_model, source = replicas(s, instances_config)
        if total is not None:
            rep_points.append((s["t"], total))
            thread_points.append((s["t"], threads(s, model_threads, instances_config)))
            sources.add(source)
            for model, n in per_model.items():
                per_model_points.setdefault(model, []).append((s["t"], n))
        if t0 <= s["t"] <= t1:
            if s.get("rss_kb"):
                rss.append(s["rss_kb"])
            used = family_sum(s.get("metrics"), "somm_memory_used_bytes")
            if used is not None:
                mem_used.append(used)
    duration = t1 - t0
    r["instance_s"] = integrate(rep_points, t0, t1)
    r["thread_s"] = integrate(thread_points, t0, t1)
    r["mean_replicas"] = r["instance_s"] / duration if r["instance_s"] is not None and duration else None
    r["replicas_by_model"] = {m: integrate(p, t0, t1) / duration for m, p in per_model_points.items()
                              if duration}
    r["replica_source"] = ", ".join(sorted(sources)) or "none"
    r["replica_timeline"] = [(t - t0, v) for t, v in rep_points]
    r["max_replicas"] = max((v for t, v in rep_points if t0 - 1.5 <= t <= t1 + 1.5), default=None)
    r["rss_peak_mb"] = max(rss) / 1024 if rss else None
    r["rss_mean_mb"] = sum(rss) / len(rss) / 1024 if rss else None
    hwm = [s.get("hwm_kb") for s in samples if s.get("hwm_kb")]
    r["hwm_mb"] = max(hwm) / 1024 if hwm else None
    r["mem_used_peak_mb"] = max(mem_used) / 2**20 if mem_used else None
    r["mem_used_mean_mb"] = sum(mem_used) / len(mem_used) / 2**20 if mem_used else None

    def counter_delta(family):
        vals = [(s["t"], family_sum(s.get("metrics"), family)) for s in window]
        vals = [(t, v) for t, v in vals if v is not None]
        if not vals:
            return None
        before = [v for t, v in vals if t <= t0]
        start = before[-1] if before else 0.0  # no sample before the replay: count from 0
        return vals[-1][1] - start

    r["cold_starts"] = counter_delta("somm_cold_starts_total")
    r["instance_s_counter"] = counter_delta("somm_instance_seconds_total")
    cpu = [(s["t"], s.get("cpu_s")) for s in window if s.get("cpu_s") is not None]
    r["server_cpu_s"] = cpu[-1][1] - cpu[0][1] if len(cpu) > 1 else None
    actions = {}
    if window:
        first, last = window[0].get("metrics") or {}, window[-1].get("metrics") or {}
        for key, v in last.items():
            name, lab = series(key)
            if name == "somm_control_actions_total":
                actions[lab.get("kind", "?")] = v - first.get(key, 0.0)
    r["control_actions"] = actions


# ---------------------------------------------------------------- tables

def fmt(v, nd=1, unit=""):
    if v is None:
        return "n/a"
    return f"{v:,.{nd}f}{unit}"


def pct(v, nd=2):
    return "n/a" if v is None else f"{100 * v:.{nd}f}%"


def summary_table(results):
    peak = next((r for r in results if r["target"] == "static-peak"), None)
    rows = ["| target | server | SLO attainment (feasible) | rejected | expired | failed | late "
            "| cold starts "
            "| instance-s | vs static peak | mean / max replicas | RSS peak / mean MiB "
            "| p50 / p99 ms | other cores busy |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        ratio = (r["instance_s"] / peak["instance_s"]
                 if peak and r["instance_s"] and peak.get("instance_s") else None)
        codes = ", ".join(f"{c} {n}" for c, n in sorted(r["codes"].items())) or "0"
        rows.append(
            f"| {r['target']} | {r['info'].get('flags', '?')} "
            f"| {pct(r['attainment'])} ({r['met']:,}/{r['feasible']:,}) "
            f"| {r['rejected']:,} | {r['expired']:,} | {r['failed']:,} | {r['late']:,} "
            f"| {fmt(r['cold_starts'], 0)} | {fmt(r['instance_s'], 0)} | {pct(ratio, 1)} "
            f"| {fmt(r['mean_replicas'], 2)} / {fmt(r['max_replicas'], 0)} "
            f"| {fmt(r['rss_peak_mb'], 0)} / {fmt(r['rss_mean_mb'], 0)} "
            f"| {fmt(r['p50'], 2)} / {fmt(r['p99'], 1)} | {fmt(r['info'].get('other_cores'), 2)} |")
    return "\n".join(rows)


def ratio_to(r, base, key):
    if base is None or not base.get(key) or r.get(key) is None:
        return None
    return r[key] / base[key]


def detail_table(results, models):
    peak = next((r for r in results if r["target"] == "static-peak"), None)
    rows = ["| target | attainment per model | error codes (all queries) "
            "| infeasible queries (rejected) | mean replicas per model | replicas from "
            "| somm_memory_used peak / mean MiB | instance-s (counter) | thread-s (vs static peak) "
            "| cores busy: server / load generator | control actions | loads on demand (log) |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        codes = ", ".join(f"{c} {n:,}" for c, n in sorted(r["codes"].items())) or "none"
        per_model = ", ".join(f"{m} {r['replicas_by_model'].get(m, 0):.2f}" for m in models)
        actions = ", ".join(f"{k} {v:.0f}" for k, v in sorted(r["control_actions"].items())) or "n/a"
        attainment = ", ".join(f"{m} {pct(r['attainment_by_model'].get(m))}" for m in models)
        info = r["info"]
        rows.append(
            f"| {r['target']} | {attainment} | {codes} "
            f"| {r['infeasible']:,} ({r['infeasible_rejected']:,}) "
            f"| {per_model} | {r['replica_source']} "
            f"| {fmt(r['mem_used_peak_mb'], 0)} / {fmt(r['mem_used_mean_mb'], 0)} "
            f"| {fmt(r['instance_s_counter'], 0)} "
            f"| {fmt(r['thread_s'], 0)} ({pct(ratio_to(r, peak, 'thread_s'), 1)}) "
            f"| {fmt(info.get('server_cores'), 2)} / {fmt(info.get('loadgen_cores'), 2)} "
            f"| {actions} | {r['on_demand_loads']} |")
    return "\n".join(rows)


def messages_list(results):
    lines = []
    for r in results:
        for (code, msg), n in r["messages"]:
            lines.append(f"- {r['target']}: {n:,} x {code}: `{msg.strip() or '(no message)'}`")
    return "\n".join(lines) or "- none"


def plan_table(plan):
    rows = ["| model | fixed variant | mean / peak q/s (replay) | capacity q/s (source) "
            "| replicas: static peak / avg | best batch-1 ms (variant) | feasible queries |",
            "|---|---|---|---|---|---|---|"]
    for name, m in plan["models"].items():
        prof = (f"; profile {m['capacity_profile_qps']:.1f} at batch {m['capacity_profile_batch']}"
                if m.get("capacity_profile_qps") else "")
        rows.append(
            f"| {name} | {m['fixed_variant']} on cpu{m['threads']} | {m['mean_qps']:.1f} / "
            f"{m['peak_qps']} (s {m['peak_second']}) | {m['capacity_qps']:.1f} "
            f"({plan['capacity_source']}{prof}) | {m['replicas_peak']} / {m['replicas_avg']} "
            f"| {m['best_b1_ms']} ({m['best_b1_variant']}) "
            f"| {m['feasible_queries']:,} / {m['queries']:,} |")
    return "\n".join(rows)


def verdicts(results):
    managed = next((r for r in results if r["target"] == "somm-managed"), None)
    peak = next((r for r in results if r["target"] == "static-peak"), None)
    rows = ["| target | value | verdict |", "|---|---|---|"]
    if managed is None:
        return ("The managed target did not run (this somm has no `--managed` flag), so neither "
                "target can be judged.\n\n" + "\n".join(rows + [
                    f"| somm attainment >= {ATTAINMENT_TARGET:.0%} of feasible queries | n/a | not run |",
                    f"| somm instance-s <= {INSTANCE_S_TARGET:.0%} of static peak's | n/a | not run |"]))
    att = managed["attainment"]
    rows.append(f"| somm attainment >= {ATTAINMENT_TARGET:.0%} of feasible queries | {pct(att)} | "
                f"{'met' if att is not None and att >= ATTAINMENT_TARGET else 'missed'} |")
    if peak and peak.get("instance_s") and managed.get("instance_s") is not None:
        ratio = managed["instance_s"] / peak["instance_s"]
        rows.append(f"| somm instance-s <= {INSTANCE_S_TARGET:.0%} of static peak's | "
                    f"{pct(ratio, 1)} | {'met' if ratio <= INSTANCE_S_TARGET else 'missed'} |")
    else:
        rows.append(f"| somm instance-s <= {INSTANCE_S_TARGET:.0%} of static peak's | n/a | "
                    "not measured |")
    return "\n".join(rows)


# ---------------------------------------------------------------- plot

def esc(s):
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def nice_step(span, ticks=5):
    raw = span / ticks
    e = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1
    return next(m * e for m in (1, 2, 5, 10) if m * e >= raw)


def offered_load(trace_path, time_scale, seconds):
    load = {}
    with open(trace_path, newline="") as f:
        for row in csv.DictReader(f):
            s = int(float(row["timestamp_ms"]) / 1000.0 / time_scale)
            if s < seconds:
                load.setdefault(row["model"], [0] * seconds)[s] += 1
    return load


def svg_timeline(results, load, meta, plan):
    seconds = max(len(v) for v in load.values())
    W, L, R = 960, 70, 190
    panel_h, gap, T = 170, 50, 72
    H = T + 3 * panel_h + 2 * gap + 50
    pw = W - L - R
    x_max = seconds

    def sx(x):
        return L + pw * x / x_max

    def replay_speed(scale):
        return "trace replayed in real time" if scale == 1 else f"trace time compressed {scale:g}x"

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
           f'viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">',
           f'<rect width="{W}" height="{H}" fill="white"/>',
           f'<text x="{L + pw / 2}" y="20" text-anchor="middle" font-size="15" font-weight="bold">'
           f'Managed vs static provisioning: one bursty trace, replayed against each target</text>',
           f'<text x="{L + pw / 2}" y="38" text-anchor="middle" font-size="11" fill="#555">'
           f'{esc(meta.get("date", ""))}; {replay_speed(plan["time_scale"])}; '
           f'{meta.get("cores", "?")} CPU cores shared by the load generator and the server</text>']

    def panel(i, title, y_label, lines, y_max, y_fmt=lambda v: f"{v:g}", legend=(), y_min=0.0):
        top = T + i * (panel_h + gap)
        y_max = y_max or 1

        def sy(v):
            v = max(min(v, y_max), y_min)
            return top + panel_h - panel_h * (v - y_min) / (y_max - y_min)
        out.append(f'<text x="{L}" y="{top - 8}" font-weight="bold">{esc(title)}</text>')
        step = nice_step(y_max - y_min, 4)
        v = y_min
        while v <= y_max * 1.0001:
            y = sy(v)
            out.append(f'<line x1="{L}" y1="{y:.1f}" x2="{L + pw}" y2="{y:.1f}" stroke="#e5e5e5"/>')
            out.append(f'<text x="{L - 6}" y="{y + 4:.1f}" text-anchor="end">{y_fmt(v)}</text>')
            v += step
        xstep = nice_step(x_max, 10)
        x = 0.0
        while x <= x_max * 1.0001:
            out.append(f'<line x1="{sx(x):.1f}" y1="{top}" x2="{sx(x):.1f}" y2="{top + panel_h}" '
                       f'stroke="#f0f0f0"/>')
            out.append(f'<text x="{sx(x):.1f}" y="{top + panel_h + 14}" text-anchor="middle" '
                       f'font-size="10">{x:g}</text>')
            x += xstep
        out.append(f'<rect x="{L}" y="{top}" width="{pw}" height="{panel_h}" fill="none" '
                   f'stroke="black"/>')
        out.append(f'<text x="16" y="{top + panel_h / 2}" text-anchor="middle" font-size="11" '
                   f'transform="rotate(-90 16 {top + panel_h / 2})">{esc(y_label)}</text>')
        for pts, color, width, dash in lines:
            if not pts:
                continue
            coords = " ".join(f"{sx(px):.1f},{sy(py):.1f}" for px, py in pts)
            dash_attr = f' stroke-dasharray="{dash}"' if dash else ""
            out.append(f'<polyline points="{coords}" fill="none" stroke="{color}" '
                       f'stroke-width="{width}"{dash_attr}/>')
        for j, (name, color, dash) in enumerate(legend):
            y = top + 14 + 18 * j
            dash_attr = f' stroke-dasharray="{dash}"' if dash else ""
            out.append(f'<line x1="{L + pw + 12}" y1="{y - 4}" x2="{L + pw + 36}" y2="{y - 4}" '
                       f'stroke="{color}" stroke-width="2"{dash_attr}/>')
            out.append(f'<text x="{L + pw + 42}" y="{y}" font-size="11">{esc(name)}</text>')

    # 1. offered load per model (and total)
    model_names = sorted(load)
    mc = {m: MODEL_COLORS[i % len(MODEL_COLORS)] for i, m in enumerate(model_names)}
    total = [sum(load[m][s] for m in model_names) for s in range(seconds)]
    lines = [([(s + 0.5, total[s]) for s in range(seconds)], "#000", 1, "3,2")]
    lines += [([(s + 0.5, load[m][s]) for s in range(seconds)], mc[m], 1.2, None)
              for m in model_names]
    panel(0, "offered load (queries per second, per model; dashed: total)", "queries/s", lines,
          max(total) * 1.05,
          legend=[(m, mc[m], None) for m in model_names] + [("total", "#000", "3,2")])

    # 2. loaded replicas per target (step lines)
    lines, y_max = [], 1
    for r in results:
        pts = []
        for t, v in r["replica_timeline"]:
            if -1 <= t <= x_max + 1:
                if pts:
                    pts.append((max(0, min(t, x_max)), pts[-1][1]))
                pts.append((max(0, min(t, x_max)), v))
                y_max = max(y_max, v)
        lines.append((pts, COLORS.get(r["target"], "#999"), 2, DASHES.get(r["target"])))
    legend = [(r["target"], COLORS.get(r["target"], "#999"), DASHES.get(r["target"]))
              for r in results]
    panel(1, "loaded replicas (all models)", "replicas", lines, y_max * 1.15 + 0.5, legend=legend)

    # 3. SLO attainment per second (feasible queries due in that second)
    lines, low = [], 100.0
    for r in results:
        pts = [(s + 0.5, 100 * a) for s, a in sorted(r["attainment_per_second"].items())
               if 0 <= s < x_max]
        low = min([low] + [y for _, y in pts])
        lines.append((pts, COLORS.get(r["target"], "#999"), 1.3, DASHES.get(r["target"])))
    # The axis starts at the worst second, rounded down to 10%: dips stay visible.
    panel(2, "SLO attainment per second (feasible queries due in that second)", "% met", lines,
          100, y_fmt=lambda v: f"{v:g}%", legend=legend, y_min=min(90.0, math.floor(low / 10) * 10))
    out.append(f'<text x="{L + pw / 2}" y="{H - 12}" text-anchor="middle">seconds into the replay '
               f'(wall clock; trace time = {plan["time_scale"]:g} x this)</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------- main

DEFINITIONS = """\
- **targets**: `somm-managed` is `somm serve --managed true` (autoscaling, on-demand loading,
  eviction); `static-peak` and `static-avg` are `somm serve --managed false` on copies of the
  repository whose `instance_count` per model is the replicas of the as-registered variant (on
  its configured threads) that the trace's peak second, respectively its mean rate, needs at the
  capacity in the plan table (no headroom, at least 1). All three replay the same trace file.
- **feasible**: a query whose `latency_slo_ms` is at least the best profiled batch-1 latency of
  any usable variant of its model (`best batch-1 ms` in the plan table). No server can meet a
  lower SLO even when idle, so such queries are left out of attainment (the trace generator puts
  about 1% of them in on purpose; the detail table shows how many each target rejected).
- **SLO attainment**: of the feasible queries, the share that succeeded within their SLO,
  latency measured from the query's scheduled arrival (no coordinated omission). **rejected**
  (RESOURCE_EXHAUSTED: queue full or SLO admission; UNAVAILABLE), **expired**
  (DEADLINE_EXCEEDED: admitted, then dropped when its deadline passed in the queue), **failed**
  (any other error) and **late** (succeeded over the SLO) feasible queries are the misses.
- **cold starts**: the difference of `somm_cold_starts_total` (queries that waited for a model
  load) over the replay; n/a when the server does not export it.
- **instance-s**: loaded replicas integrated over the replay (wall clock), from 1-second samples
  of `/metrics` (`somm_instances`, else `somm_instances_loaded`, else the repository index times
  the configured instance counts; `replicas from` names the source). **vs static peak**: the
  ratio to static-peak's. `instance-s (counter)` is the server's own
  `somm_instance_seconds_total` over the same interval, where exported. **thread-s** weighs
  each replica by the CPU threads it holds (`cpuN` in its hardware label, else its model's
  `intra_op_threads`): a 2-thread replica reserves twice the cores of a 1-thread one, which
  instance-s does not show.
- **RSS**: VmRSS of the server process, sampled every second during the replay (peak, mean).
- **loads on demand (log)**: lines of the server's log that mention a load on demand ("on
  demand", or the managed runtime's "on a query's critical path"). A static
  target should have none; a build without `--managed` (the stand-in) loads the variants its
  selector picks for SLO queries, so its "static" targets are not static and its replica counts
  (which count the configured instances only) are too low.
- **cores busy**: CPU seconds (user + system, all threads, from `/proc`) over the replay's wall
  time: of the server, of `somm bench`, and of everything else on the machine ("other cores
  busy": other users' builds and tests; well above 0 means that target ran on a loaded machine
  and its figures are not comparable with the others').
- **p50 / p99**: latency of all successful queries (nearest rank), scheduled arrival to answer."""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--docs-dir", help="also copy managed-timeline.svg here")
    ap.add_argument("--update-doc", metavar="FILE.md",
                    help="replace the generated part of FILE.md (between its marks) with this run")
    a = ap.parse_args()
    meta = load_json(os.path.join(a.out_dir, "meta.json"), {})
    plan = load_json(os.path.join(a.out_dir, "plan.json"))
    if plan is None:
        die(f"no {a.out_dir}/plan.json")
    results = [analyse_target(a.out_dir, t, plan) for t in TARGETS
               if os.path.exists(os.path.join(a.out_dir, t, "queries.csv"))]
    if not results:
        die(f"no <target>/queries.csv under {a.out_dir}")
    models = sorted(plan["models"])
    load = offered_load(os.path.join(a.out_dir, "trace.csv"), plan["time_scale"],
                        int(math.ceil(plan["replay_s"])) or 1)
    svg = svg_timeline(results, load, meta, plan)
    with open(os.path.join(a.out_dir, "managed-timeline.svg"), "w") as f:
        f.write(svg)
    if a.docs_dir:
        shutil.copy(os.path.join(a.out_dir, "managed-timeline.svg"),
                    os.path.join(a.docs_dir, "managed-timeline.svg"))

    summary = summary_table(results)
    body = []
    if meta:
        body += [f"- date: {meta.get('date', '?')}",
                 f"- command: `{meta.get('command', '?')}`",
                 f"- commit: `{meta.get('git', '?')}`",
                 f"- somm binary: `{meta.get('somm', '?')}`"
                 f"{' (no --managed flag: the managed target was skipped)' if not meta.get('has_managed') else ''}",
                 f"- machine: {meta.get('machine', '?')}; load average before/after: "
                 f"{meta.get('loadavg_start', '?')} / {meta.get('loadavg_end', '?')}",
                 f"- trace: {meta.get('trace', '?')}",
                 ""]
    body += ["### Targets", "", verdicts(results), "",
             "### Per target", "", summary, "",
             "### Details", "", detail_table(results, models), "",
             "Most frequent error messages (numbers replaced by N):", "", messages_list(results), "",
             "### Load and static provisioning (plan)", "", plan_table(plan), "",
             "### Timeline", "", "![managed-timeline.svg](managed-timeline.svg)", "",
             "### What the columns mean", "", DEFINITIONS, ""]
    with open(os.path.join(a.out_dir, "report.md"), "w") as f:
        f.write("\n".join([f"# somm managed vs static ({meta.get('date', 'undated')})", ""] +
                          [line.replace("### ", "## ", 1) if line.startswith("### ") else line
                           for line in body]))
    if a.update_doc:
        update_doc(a.update_doc, body)
    print(summary)
    print()
    print(verdicts(results))


BEGIN_MARK = "<!-- bench/managed_report.py: generated from here -->"
END_MARK = "<!-- bench/managed_report.py: generated up to here -->"


def update_doc(path, lines):
    """Replaces what lies between the two marks in `path` with `lines`."""
    with open(path) as f:
        text = f.read()
    if BEGIN_MARK not in text or END_MARK not in text:
        die(f"{path} lacks the marks {BEGIN_MARK} ... {END_MARK}")
    head, rest = text.split(BEGIN_MARK, 1)
    _, tail = rest.split(END_MARK, 1)
    with open(path, "w") as f:
        f.write(head + BEGIN_MARK + "\n" + "\n".join(lines) + "\n" + END_MARK + tail)


if __name__ == "__main__":
    main()
