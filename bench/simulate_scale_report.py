#!/usr/bin/python3
"""The simulator at scale: the 1,000-worker replay, the failure experiment
and the control plane extrapolated, from bench/simulate.sh --scale.

Usage: /usr/bin/python3 bench/simulate_scale_report.py --dir OUT [--docs docs/simulation.md]

OUT holds what simulate.sh --scale wrote: scale.json (`somm simulate --json`
of the somm policy, with its per-second timeline), scale.time (`/usr/bin/time
-v` of that run), scale-trace.json (make_trace.py's summary), meta.json, and
failures/*.json (one run per lease and provisioning delay, plus base.json
without a failure). It writes OUT/scale.md, OUT/simulation-timeline.svg (load,
workers, replicas and attainment over time) and OUT/simulation-failure.svg
(attainment around the failure), and with --docs replaces the part of that
file between <!-- simulate.sh scale: begin --> and <!-- simulate.sh scale:
end -->. Standard library only.
"""
import argparse
import glob
import json
import os
import re
import sys

BEGIN = "<!-- simulate.sh scale: begin -->"
END = "<!-- simulate.sh scale: end -->"

# docs/cluster-state.md, "Steady-state cost of the cluster state": a worker sends
# one command a second (its heartbeat, whose notice carries the report, so a
# watcher reads nothing back for it); a router writes its demand once a
# second (its notice carries the demand: nothing is read back for it
# either); a watcher (each router and the controller) sends 2 commands per
# re-poll (every 0.5 s) and reads the whole state (5 + 2K + R commands)
# every 10 s. Redis also delivers each heartbeat's and each demand's notice
# to every watcher: (K + R) x (R + 1) messages a second.
WORKER_CMDS_PER_S = 1.0
REDIS_OPS_PER_CORE = 100_000


def read_time_v(path):
    out = {}
    with open(path) as f:
        for line in f:
            m = re.match(r"\s*Elapsed \(wall clock\) time.*: (.*)$", line)
            if m:
                parts = [float(p) for p in m.group(1).split(":")]
                secs = 0.0
                for p in parts:
                    secs = secs * 60 + p
                out["wall_s"] = secs
            m = re.match(r"\s*(User|System) time \(seconds\): ([\d.]+)", line)
            if m:
                out["cpu_s"] = out.get("cpu_s", 0.0) + float(m.group(2))
            m = re.match(r"\s*Maximum resident set size \(kbytes\): (\d+)", line)
            if m:
                out["rss_mib"] = int(m.group(1)) / 1024
    return out


def rolling(t, key_met, key_feasible, width):
    met, feas = t[key_met], t[key_feasible]
    out = []
    for i in range(len(met)):
        lo = max(0, i - width + 1)
        f = sum(feas[lo:i + 1])
        out.append(sum(met[lo:i + 1]) / f if f else 1.0)
    return out


def failure_row(run, base, fail_at, width=10, slack=0.005):
    """Dip: the largest shortfall of the 10-s attainment after the failure
    below the run without one, at the same second (the lowest attainment
    alone would also count what the load does to both); recovery: seconds
    from the failure until the 10-s attainment stays within `slack` of the
    run without a failure."""
    t, b = run["timeline"], base["timeline"]
    a, ab = rolling(t, "met", "feasible", width), rolling(b, "met", "feasible", width)
    start = int(fail_at)
    after = range(start, min(len(a), len(ab)))
    dip = max((ab[i] - a[i] for i in after), default=0.0)
    last_bad = None
    for i in after:
        if a[i] < ab[i] - slack:
            last_bad = i
    recover = 0 if last_bad is None else last_bad + 1 - start
    return dip, recover


def polyline(xs, ys, x, y, color):
    pts = " ".join(f"{x(u):.1f},{y(v):.1f}" for u, v in zip(xs, ys))
    return f'<polyline fill="none" stroke="{color}" stroke-width="1.2" points="{pts}"/>'


def panel(out, top, height, w, pad, xs, series, label, ymin=None, ymax=None, fmt="{:.0f}"):
    """One panel: `series` is [(values, color, name)] over the shared xs."""
    vals = [v for s, _, _ in series for v in s]
    lo = min(vals) if ymin is None else ymin
    hi = max(vals) if ymax is None else ymax
    hi = hi if hi > lo else lo + 1
    xmax = max(xs) or 1
    def x(u):
        return pad + (w - 2 * pad) * u / xmax
    def y(v):
        return top + height - height * (v - lo) / (hi - lo)
    out.append(f'<line x1="{pad}" y1="{top + height}" x2="{w - pad}" y2="{top + height}" '
               'stroke="black"/>')
    out.append(f'<line x1="{pad}" y1="{top}" x2="{pad}" y2="{top + height}" stroke="black"/>')
    out.append(f'<text x="{pad - 6}" y="{top + 4}" text-anchor="end">{fmt.format(hi)}</text>')
    out.append(f'<text x="{pad - 6}" y="{top + height}" text-anchor="end">{fmt.format(lo)}</text>')
    out.append(f'<text x="{pad + 6}" y="{top - 4}">{label}</text>')
    for k, (s, color, name) in enumerate(series):
        out.append(polyline(xs, s, x, y, color))
        if name:
            out.append(f'<text x="{w - pad - 4}" y="{top + 14 + 14 * k}" text-anchor="end" '
                       f'fill="{color}">{name}</text>')
    return x


def timeline_plot(run, fail_at=None):
    t = run["timeline"]
    n = len(t["arrivals"])
    xs = list(range(n))
    w, pad, h = 760, 70, 120
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{3 * (h + 40) + 50}" '
           'font-family="sans-serif" font-size="12">',
           f'<rect width="{w}" height="{3 * (h + 40) + 50}" fill="white"/>']
    panel(out, 30, h, w, pad, xs, [(t["arrivals"], "black", "")], "load (queries/s)")
    panel(out, 30 + h + 40, h, w, pad, xs,
          [(t["replicas"], "steelblue", "replicas"), (t["workers"], "darkorange", "workers")],
          "replicas and live workers")
    att = rolling(t, "met", "feasible", 10)
    x = panel(out, 30 + 2 * (h + 40), h, w, pad, xs, [(att, "seagreen", "")],
              "SLO attainment (10-s window)", ymin=min(0.9, min(att)), ymax=1.0, fmt="{:.3f}")
    top = 3 * (h + 40) + 20
    for frac in (0, 0.25, 0.5, 0.75, 1.0):
        s = (n - 1) * frac
        out.append(f'<text x="{x(s):.1f}" y="{top}" text-anchor="middle">{s:.0f} s</text>')
    if fail_at is not None:
        out.append(f'<line x1="{x(fail_at):.1f}" y1="20" x2="{x(fail_at):.1f}" y2="{top - 14}" '
                   'stroke="red" stroke-dasharray="4,3"/>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def failure_plot(runs, base, fail_at):
    """Attainment (10-s window) around the failure, one line per run."""
    w, pad, h = 760, 70, 260
    lo_s, hi_s = max(0, int(fail_at) - 30), int(fail_at) + 180
    colors = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
              "#7f7f7f", "#bcbd22", "#17becf"]
    series = []
    allv = []
    for k, (name, run) in enumerate([("no failure", base)] + runs):
        a = rolling(run["timeline"], "met", "feasible", 10)[lo_s:hi_s]
        allv += a
        series.append((a, "black" if k == 0 else colors[(k - 1) % len(colors)], name))
    xs = list(range(len(series[0][0])))
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h + 80}" '
           'font-family="sans-serif" font-size="11">',
           f'<rect width="{w}" height="{h + 80}" fill="white"/>']
    x = panel(out, 30, h, w, pad, xs, series,
              f"SLO attainment (10-s window), {lo_s}-{hi_s} s; failure at {fail_at:g} s",
              ymin=min(allv), ymax=1.0, fmt="{:.3f}")
    out.append(f'<line x1="{x(fail_at - lo_s):.1f}" y1="30" x2="{x(fail_at - lo_s):.1f}" '
               f'y2="{30 + h}" stroke="red" stroke-dasharray="4,3"/>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def control_plane(workers, routers):
    """Commands a second per watcher and in all, and notices delivered a second."""
    k, r = workers, routers
    watcher = 1 + 2 / 0.5 + (5 + 2 * k + r) / 10
    total = k * WORKER_CMDS_PER_S + (r + 1) * watcher
    return watcher, total, (k + r) * (r + 1)


def quality_rows(somm, others, variants=()):
    """(name, result) of every policy run of the hour, somm's first."""
    return [("somm", somm)] + [(f"somm, {label}", p) for label, p in variants] + sorted(others.items())


def quality_plot(rows):
    """An SVG scatter of attainment against dollars, one point per run of the
    hour; the attainment axis spans only what the runs reach."""
    pts = [(name, p["usd"], p["attainment"]) for name, p in rows]
    w, h, pad = 640, 360, 70
    xmin = min(u for _, u, _ in pts) * 0.9
    xmax = max(u for _, u, _ in pts) * 1.05
    ylo = min(a for _, _, a in pts)
    ymin = max(0.0, ylo - max(0.25 * (1.0 - ylo), 0.0005))
    def x(u):
        return pad + (w - 2 * pad) * (u - xmin) / max(xmax - xmin, 1e-12)
    def y(a):
        return h - pad - (h - 2 * pad) * (a - ymin) / max(1.0 - ymin, 1e-12)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
           'font-family="sans-serif" font-size="12">',
           f'<rect width="{w}" height="{h}" fill="white"/>',
           f'<line x1="{pad}" y1="{h - pad}" x2="{w - pad}" y2="{h - pad}" stroke="black"/>',
           f'<line x1="{pad}" y1="{pad}" x2="{pad}" y2="{h - pad}" stroke="black"/>',
           f'<text x="{w / 2}" y="{h - 20}" text-anchor="middle">cost of the hour (USD)</text>',
           f'<text x="15" y="{h / 2}" transform="rotate(-90 15 {h / 2})" '
           'text-anchor="middle">SLO attainment</text>']
    for frac in (0, 0.25, 0.5, 0.75, 1.0):
        u, a = xmin + (xmax - xmin) * frac, ymin + (1 - ymin) * frac
        out.append(f'<text x="{x(u):.1f}" y="{h - pad + 16}" text-anchor="middle">{u:.0f}</text>')
        out.append(f'<text x="{pad - 6}" y="{y(a) + 4:.1f}" text-anchor="end">{a:.4f}</text>')
    for i, (name, u, a) in enumerate(pts):
        color = "steelblue" if name.startswith("somm") else "gray"
        out.append(f'<circle cx="{x(u):.1f}" cy="{y(a):.1f}" r="5" fill="{color}"/>')
        out.append(f'<text x="{x(u) + 8:.1f}" y="{y(a) + (14 if i % 2 else -6):.1f}">{name}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def over_bound(p):
    """USD over the lower bound on cost at the run's attainment ("-" for a JSON
    without it)."""
    if p.get("cost_bound_usd", 0) > 0:
        return f"{p['cost_over_bound']:.2f}x"
    return "-"


def quality_table(somm, others, variants=(), walls=None, infaas_tuned=None):
    """Decision quality on the hour: each policy's attainment, cost against the
    lower bound at its attainment and against the clairvoyant heuristic's, and
    SLOs missed against INFaaS's. `variants`: (label, result) of
    further somm runs with other settings (scale-somm-<label>.json); `walls`:
    each policy's wall time (s) of its run, when timed."""
    rows = quality_rows(somm, others, variants)
    clairvoyant_usd = others["clairvoyant"]["usd"]
    infaas = others.get("infaas")
    walls = walls or {}

    out = [
        "### Decision quality at 1,000 workers",
        "",
        "The same hour, zoo and cluster under every policy"
        + ("" if infaas else " (no INFaaS run: scale-infaas.json is missing)")
        + (f"; INFaaS with the best-tuned thresholds (`{infaas_tuned}`)" if infaas_tuned else "")
        + ". Cost / bound: USD over the lower bound on cost at the row's attainment. Missed: "
        "feasible queries not answered within their SLO. Wall s: the policy's own `somm "
        "simulate` run of the hour.",
        "",
        "| policy | attainment | USD | bound USD | cost / bound | vs clairvoyant | missed "
        "| vs INFaaS | rejections | cold starts | control actions | wall s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, p in rows:
        missed = p["feasible"] - p["met"]
        vs_infaas = (f"{missed / max(infaas['feasible'] - infaas['met'], 1):.2f}x"
                     if infaas else "-")
        wall = walls.get(name)
        bound_usd = f"{p['cost_bound_usd']:.2f}" if p.get("cost_bound_usd", 0) > 0 else "-"
        out.append(
            f"| **{name}** | {p['attainment']:.4f} | {p['usd']:.2f} | {bound_usd} "
            f"| {over_bound(p)} | {p['usd'] / max(clairvoyant_usd, 1e-12):.2f}x | {missed} "
            f"| {vs_infaas} | {p['rejections']} | {p['cold_starts']} | {p['control_actions']} "
            f"| {f'{wall:.0f}' if wall else '-'} |")
    cost = [(name, p["cost_reported_over_predicted"]) for name, p in rows
            if "cost_reported_over_predicted" in p]
    if cost:
        out += ["", "Reported over predicted cost per answered query (`somm_cost_usd` over "
                "`somm_predicted_cost_usd`, docs/selection.md):", "",
                "| policy | queries | p10 | median | p90 | p99 | max | capped at max_cost |",
                "|---|---:|---:|---:|---:|---:|---:|---:|"]
        for name, c in cost:
            out.append(f"| **{name}** | {c['queries']} | {c['p10']:.3f} | {c['median']:.3f} "
                       f"| {c['p90']:.3f} | {c['p99']:.3f} | {c['max']:.3f} | {c['capped']} |")
    return out + ["", "![attainment against cost of each run of the hour](simulation-scale-cost.svg)", ""]


def report(d):
    with open(os.path.join(d, "meta.json")) as f:
        meta = json.load(f)
    lines = [f"Measured {meta['date']} at commit `{meta['git']}` by `{meta['command']}`.", ""]
    scale_path = os.path.join(d, "scale.json")
    if os.path.exists(scale_path):
        with open(scale_path) as f:
            somm = json.load(f)["policies"]["somm"]
        with open(os.path.join(d, "scale-trace.json")) as f:
            summary = json.load(f)
        tv = read_time_v(os.path.join(d, "scale.time"))
        lines += [
            "### One simulated hour at 1,000 workers",
            "",
            f"Zoo: {meta['zoo_models']} synthetic models, {meta['zoo_variants']} variants "
            "(`bench/make_zoo.py`: the demo zoo's measured profiles, latencies and sizes "
            "scaled by seeded log-uniform factors of 0.5-2). Trace: "
            f"{summary['queries']} queries over {summary['duration_s']:g} s (make_trace.py "
            f"--shape mixed, Zipf 1.0 over the models, mean {summary['total']['mean_qps']:g} q/s, "
            f"busiest second {summary['total']['peak_qps']} q/s"
            + (f"; {meta['model_less']:g} of the rows model-less, bench/model_less_rows.py, each "
               "round of the zoo's five source models with its two tasks"
               if meta.get("model_less") else "")
            + f"). Cluster: {meta['scale_workers']} "
            f"workers of {meta['worker_cores']} cores and {meta['worker_memory_mb']} MiB; the "
            "somm policy (the live router and controller).",
            "",
            "| wall s | CPU s | peak RSS MiB | simulated s | queries/s of wall time | events | attainment "
            "| instance-s | USD | cold starts | rejections | p50 ms | p99 ms | control actions |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
            f"| {tv.get('wall_s', 0):.0f} | {tv.get('cpu_s', 0):.0f} | {tv.get('rss_mib', 0):.0f} | {somm['duration_s']:.0f} "
            f"| {somm['queries'] / max(tv.get('wall_s', 1), 1e-9):.0f} | {somm['events']} "
            f"| {somm['attainment']:.4f} | {somm['instance_seconds']:.0f} | {somm['usd']:.2f} "
            f"| {somm['cold_starts']} | {somm['rejections']} | {somm['p50_ms']:.2f} "
            f"| {somm['p99_ms']:.1f} | {somm['control_actions']} |",
            "",
            "Wall time, CPU time (user + system) and peak RSS are `/usr/bin/time -v`'s for the "
            "whole `somm simulate` process (reading the zoo and the trace included; one thread), "
            "on this 2-core machine with nothing else running unless the header above says "
            "otherwise; on a shared machine the CPU time is the steadier figure.",
            "",
            "![load, workers and attainment over the hour](simulation-timeline.svg)",
            "",
        ]
    others = {}
    walls = {}
    for name in ("infaas", "static-peak", "static-avg", "clairvoyant"):
        if os.path.exists(os.path.join(d, f"scale-{name}.time")):
            walls[name] = read_time_v(os.path.join(d, f"scale-{name}.time")).get("wall_s")
    for name in ("clairvoyant", "infaas", "static-peak", "static-avg"):
        path = os.path.join(d, f"scale-{name}.json")
        key = name
        if name == "clairvoyant" and not os.path.exists(path):
            # A run of before the rename.
            path, key = os.path.join(d, "scale-oracle.json"), "oracle"
        if os.path.exists(path):
            with open(path) as f:
                others[name] = json.load(f)["policies"][key]
    # Further somm runs of the same hour with other settings, named by file:
    # scale-somm-idle-unload-s-15.json -> "somm, --idle-unload-s 15".
    variants = []
    for path in sorted(glob.glob(os.path.join(d, "scale-somm-*.json"))):
        label = os.path.basename(path)[len("scale-somm-"):-len(".json")]
        m = re.match(r"([a-z-]+?)-([\d.]+)$", label)
        label = f"--{m.group(1)} {m.group(2)}" if m else label
        with open(path) as f:
            variants.append((label, json.load(f)["policies"]["somm"]))
    if os.path.exists(scale_path) and "clairvoyant" in others:
        walls["somm"] = tv.get("wall_s")
        lines += quality_table(somm, others, variants, walls, meta.get("infaas_tuned"))
        with open(os.path.join(d, "simulation-scale-cost.svg"), "w") as f:
            f.write(quality_plot(quality_rows(somm, others, variants)))
    fdir = os.path.join(d, "failures")
    if os.path.exists(os.path.join(fdir, "base.json")):
        with open(os.path.join(fdir, "base.json")) as f:
            base = json.load(f)["policies"]["somm"]
        with open(os.path.join(fdir, "meta.json")) as f:
            fmeta = json.load(f)
        runs = []
        for path in sorted(glob.glob(os.path.join(fdir, "lease*-delay*.json"))):
            m = re.search(r"lease([\d.]+)-delay([\d.]+)\.json$", path)
            with open(path) as f:
                runs.append((float(m.group(1)), float(m.group(2)),
                             json.load(f)["policies"]["somm"]))
        runs.sort()
        fail_at = fmeta["fail_at_s"]
        lines += [
            "### Failures",
            "",
            f"{fmeta['fail_fraction']:.0%} of {fmeta['workers']} workers killed at once at "
            f"{fail_at:g} s, the trace's busiest second ({fmeta['trace']}). The store keeps a "
            "dead worker's report until its lease lapses; until then the router sends it "
            "queries, which fail and are retried elsewhere; then a replacement is asked for and "
            "joins after the provisioning delay. Dip: the largest shortfall of the 10-s "
            "attainment after the failure below the run without one, in points; recovery: seconds from the failure until the 10-s attainment stays within "
            "0.5 points of the same run without a failure "
            f"(attainment {base['attainment']:.4f}).",
            "",
            "| lease s | provisioning delay s | attainment | dip (points) | recovery s | killed "
            "| replaced | rejections | instance-s |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for lease, delay, run in runs:
            dip, rec = failure_row(run, base, fail_at)
            lines.append(f"| {lease:g} | {delay:g} | {run['attainment']:.4f} | {100 * dip:.2f} | {rec} "
                         f"| {run['workers_killed']} | {run['workers_replaced']} "
                         f"| {run['rejections']} | {run['instance_seconds']:.0f} |")
        lines += ["", "![attainment around the failure](simulation-failure.svg)", ""]
    lines += ["### Control plane at 1,000 workers and 20 routers", ""]
    watcher, total, delivered = control_plane(1000, 20)
    lines += [
        "Extrapolated from the live per-process figures of docs/cluster-state.md (\"Steady-state cost "
        "of the cluster state\"): a worker sends 1 command/s (its heartbeat, whose change "
        "notice carries the report, so no watcher reads it back); a router writes its demand "
        "once a second (its notice carries the demand, so none is read back either); each "
        "watcher (a router, and the controller) checks two keys every 0.5 s and reads the whole "
        "state every 10 s: about 5 + (2K + R + 5)/10 commands a second. Redis also delivers "
        "every heartbeat's and every demand's notice to every watcher: (K + R) x (R + 1) "
        "messages a second.",
        "",
        "| workers K | routers R | per watcher cmds/s | all cmds/s | notices delivered/s "
        "| Redis cores at 100k ops/s (commands and deliveries) |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for k, r in [(4, 2), (100, 5), (1000, 20), (4000, 20)]:
        w_, t_, d_ = control_plane(k, r)
        lines.append(f"| {k} | {r} | {w_:,.0f} | {t_:,.0f} | {d_:,} "
                     f"| {(t_ + d_) / REDIS_OPS_PER_CORE:,.2f} |")
    # Where commands and deliveries together fill one core, at 20 routers.
    full_at = next(k for k in range(100, 100_000, 100)
                   if sum(control_plane(k, 20)[1:]) >= REDIS_OPS_PER_CORE)
    lines += [
        "",
        f"At 1,000 workers and 20 routers that is {total / 1e3:,.1f} k commands/s and "
        f"{delivered / 1e3:,.1f} k notices delivered a second, "
        f"{(total + delivered) / REDIS_OPS_PER_CORE:.2f} of what one "
        "Redis core serves if a delivery costs it what a command does. Reading every router's "
        "demand back cost each watcher R commands a second more (5.8 k in all), reading every "
        "heartbeat's report back too 48 k (0.69 of a core), and re-reading the whole "
        "state per notice about 22 M. The cost still grows with workers x watchers "
        f"(the notices, and the full re-read every 10 s): one core is full at about "
        f"{full_at:,} workers with 20 routers (about 1,450 when the reports were read back); "
        "past that, the routers "
        "would have to be fed by a fan-out tier. Staleness: a write reaches a view in about a millisecond (the "
        "simulator's `--view-lag-ms 1`), and what a view knows of queues is as old as the last "
        "heartbeat (1 s) at any scale, as long as Redis keeps up; past its capacity the "
        "notices queue and the views fall behind without bound.",
        "",
    ]
    return "\n".join(lines)


def splice(path, text):
    with open(path) as f:
        doc = f.read()
    if BEGIN not in doc or END not in doc:
        sys.exit(f"simulate_scale_report.py: {path} lacks the markers {BEGIN} / {END}")
    head, rest = doc.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    with open(path, "w") as f:
        f.write(head + BEGIN + "\n" + text + END + tail)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", required=True)
    ap.add_argument("--docs")
    args = ap.parse_args()
    text = report(args.dir)
    scale_path = os.path.join(args.dir, "scale.json")
    if os.path.exists(scale_path):
        with open(scale_path) as f:
            somm = json.load(f)["policies"]["somm"]
        with open(os.path.join(args.dir, "simulation-timeline.svg"), "w") as f:
            f.write(timeline_plot(somm))
    fdir = os.path.join(args.dir, "failures")
    if os.path.exists(os.path.join(fdir, "base.json")):
        with open(os.path.join(fdir, "base.json")) as f:
            base = json.load(f)["policies"]["somm"]
        with open(os.path.join(fdir, "meta.json")) as f:
            fmeta = json.load(f)
        runs = []
        for path in sorted(glob.glob(os.path.join(fdir, "lease*-delay*.json"))):
            m = re.search(r"lease([\d.]+)-delay([\d.]+)\.json$", path)
            with open(path) as f:
                runs.append((f"lease {m.group(1)} s, delay {m.group(2)} s",
                             json.load(f)["policies"]["somm"]))
        with open(os.path.join(args.dir, "simulation-failure.svg"), "w") as f:
            f.write(failure_plot(runs, base, fmeta["fail_at_s"]))
    with open(os.path.join(args.dir, "scale.md"), "w") as f:
        f.write(text)
    if args.docs:
        splice(args.docs, text)
    sys.stdout.write(text)


if __name__ == "__main__":
    main()
