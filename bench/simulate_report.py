#!/usr/bin/python3
"""Writes the simulator's comparison table from `somm simulate --policy all --json`.

Usage: /usr/bin/python3 bench/simulate_report.py --sim sim.json --trace-summary trace.json \
           --meta meta.json --out report.md [--plot cost.svg] [--docs docs/simulation.md]

Per policy: SLO attainment overall and per SLO class (the classes come from
make_trace.py --slo-classes, whose summary maps each model's SLO values to
their class), instance-seconds, dollars at the price list, the lower bound on
cost at that attainment and the dollars over it (cost_bound_usd,
cost_over_bound), dollars over the clairvoyant heuristic's, cold starts on
the critical path, rejections, p50/p99, worker-seconds and control actions.
A JSON of before the rename names the clairvoyant heuristic "oracle".
With --docs, the part of that file between the markers
<!-- simulate.sh: begin --> and <!-- simulate.sh: end --> is replaced by the
report; the rest of the file is left as written. Standard library only.
"""
import argparse
import json
import os
import sys

BEGIN = "<!-- simulate.sh: begin -->"
END = "<!-- simulate.sh: end -->"
ORDER = ["somm", "infaas", "static-peak", "static-avg", "clairvoyant"]


def class_attainment(policy, slo_classes):
    """{class: (met, feasible)} over every model."""
    out = {}
    for model, m in policy.get("models", {}).items():
        labels = slo_classes.get(model, {})
        for slo, c in m.get("slos", {}).items():
            name = labels.get(slo, f"{slo} ms")
            met, feasible = out.get(name, (0, 0))
            out[name] = (met + c["met"], feasible + c["feasible"])
    return out


def fmt_share(met, feasible):
    return f"{met / feasible:.4f}" if feasible else "n/a"


def report(sim, summary, meta):
    policies = dict(sim["policies"])
    if "oracle" in policies and "clairvoyant" not in policies:
        policies["clairvoyant"] = policies.pop("oracle")
    names = [p for p in ORDER if p in policies] + [p for p in policies if p not in ORDER]
    slo_classes = summary.get("slo_classes", {})
    classes = []
    for model_labels in slo_classes.values():
        for c in model_labels.values():
            if c not in classes:
                classes.append(c)
    clairvoyant_usd = policies.get("clairvoyant", {}).get("usd")
    bound = sim.get("cost_bound")
    routers = sorted({p["routers"] for p in policies.values() if p.get("routers")})
    lines = [
        f"Measured {meta['date']} at commit `{meta['git']}` by `{meta['command']}`.",
        "",
        f"Trace: {summary['queries']} queries over {summary['duration_s']:g} s "
        f"(make_trace.py --shape {summary.get('shape', {}).get('name', 'default')}, "
        f"seed {summary['seed']}, mean {summary['total']['mean_qps']:g} q/s, busiest second "
        f"{summary['total']['peak_qps']} q/s), models "
        + ", ".join(f"{m} ({d['weight']:.0%})" for m, d in summary["models"].items()) + ".",
        f"Cluster: {meta['workers']} simulated workers of {meta['worker_cores']} cores and "
        f"{meta['worker_memory_mb']} MiB; zoo: the persisted profiles of `{meta['repository']}`; "
        f"simulation seed {meta['seed']}"
        + (f"; `somm simulate` took {meta['wall_s']} s of wall time for every policy."
           if "wall_s" in meta else "."),
        "",
    ]
    if routers:
        lines[-2] = lines[-2][:-1] + (
            f"; routers in front of the workers (somm, static): {', '.join(map(str, routers))}.")
    if bound:
        lines.append(f"Lower bound on cost (docs/simulation.md, \"The lower bound on cost\"): "
                     f"${bound['usd_at_full_attainment']:.4f} to meet all "
                     f"{bound['feasible']} feasible queries.")
        lines.append("")
    if slo_classes:
        lines.append("SLO classes (ms per model): " + "; ".join(
            f"{m}: " + ", ".join(f"{c} {ms}" for ms, c in labels.items())
            for m, labels in slo_classes.items()) + ".")
        lines.append("")
    head = (["policy", "attainment"] + [f"{c}" for c in classes] +
            ["instance-s", "USD", "bound USD", "cost / bound", "vs clairvoyant", "cold starts",
             "rejections", "p50 ms", "p99 ms", "worker-s", "control actions"])
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|" + "|".join(["---"] + ["---:"] * (len(head) - 1)) + "|")
    for name in names:
        p = policies[name]
        per = class_attainment(p, slo_classes)
        row = [f"**{name}**", f"{p['attainment']:.4f}"]
        row += [fmt_share(*per.get(c, (0, 0))) for c in classes]
        has_bound = p.get("cost_bound_usd", -1) >= 0
        row += [f"{p['instance_seconds']:.0f}", f"{p['usd']:.4f}",
                f"{p['cost_bound_usd']:.4f}" if has_bound else "n/a",
                f"{p['cost_over_bound']:.2f}x" if has_bound and p["cost_bound_usd"] > 0 else "n/a",
                f"{p['usd'] / clairvoyant_usd:.2f}x" if clairvoyant_usd else "n/a",
                str(p["cold_starts"]), str(p["rejections"]), f"{p['p50_ms']:.2f}",
                f"{p['p99_ms']:.1f}", f"{p['worker_seconds']:.0f}", str(p["control_actions"])]
        lines.append("| " + " | ".join(row) + " |")
    lines.append("")
    lines.append("Attainment: share of the feasible queries (SLO at least the best profiled "
                 "batch-1 latency of the model) answered within their SLO. USD: every replica, "
                 "loading ones included, at its hardware's price (PriceList). Cold starts: "
                 "loads a query waited for. Rejections: RESOURCE_EXHAUSTED and "
                 "UNAVAILABLE answers. Worker-seconds: the fixed fleet over the replay. "
                 "Bound USD: the least any policy pays to meet the attainment of that row "
                 "(a linear program's dual, docs/simulation.md); cost / bound: USD over it.")
    lines += cost_agreement_table(policies, names)
    return "\n".join(lines) + "\n"


def cost_agreement_table(policies, names):
    """Reported over predicted cost per answered query, for the policies that
    route through somm's router (the JSON's cost_reported_over_predicted)."""
    rows = [(n, policies[n]["cost_reported_over_predicted"]) for n in names
            if "cost_reported_over_predicted" in policies[n]]
    if not rows:
        return []
    out = ["", "Cost the client can trust: each answered query's reported cost "
           "(`somm_cost_usd`: its share of its batch as the batch ran) over the cost the "
           "selector predicted when it chose (`somm_predicted_cost_usd`), over the queries "
           "whose answer carries both (docs/selection.md, \"What a query pays\").", "",
           "| policy | queries | p10 | median | p90 | p99 | max | capped at max_cost |",
           "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name, c in rows:
        out.append(f"| **{name}** | {c['queries']} | {c['p10']:.3f} | {c['median']:.3f} "
                   f"| {c['p90']:.3f} | {c['p99']:.3f} | {c['max']:.3f} | {c['capped']} |")
    return out


def cost_plot(sim):
    """An SVG scatter of attainment against dollars, one point per policy."""
    pts = [(name, p["usd"], p["attainment"]) for name, p in sim["policies"].items()]
    w, h, pad = 560, 340, 60
    xmax = max(u for _, u, _ in pts) * 1.1 or 1
    ymin = min(0.9, min(a for _, _, a in pts) - 0.02)
    def x(u):
        return pad + (w - 2 * pad) * u / xmax
    def y(a):
        return h - pad - (h - 2 * pad) * (a - ymin) / (1.0 - ymin)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
           'font-family="sans-serif" font-size="12">',
           f'<rect width="{w}" height="{h}" fill="white"/>',
           f'<line x1="{pad}" y1="{h - pad}" x2="{w - pad}" y2="{h - pad}" stroke="black"/>',
           f'<line x1="{pad}" y1="{pad}" x2="{pad}" y2="{h - pad}" stroke="black"/>',
           f'<text x="{w / 2}" y="{h - 20}" text-anchor="middle">cost (USD over the replay)</text>',
           f'<text x="15" y="{h / 2}" transform="rotate(-90 15 {h / 2})" '
           'text-anchor="middle">SLO attainment</text>']
    for frac in (0, 0.25, 0.5, 0.75, 1.0):
        u, a = xmax * frac, ymin + (1 - ymin) * frac
        out.append(f'<text x="{x(u):.1f}" y="{h - pad + 16}" text-anchor="middle">{u:.3g}</text>')
        out.append(f'<text x="{pad - 6}" y="{y(a) + 4:.1f}" text-anchor="end">{a:.3f}</text>')
    for name, u, a in pts:
        out.append(f'<circle cx="{x(u):.1f}" cy="{y(a):.1f}" r="5" fill="steelblue"/>')
        out.append(f'<text x="{x(u) + 8:.1f}" y="{y(a) - 6:.1f}">{name}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def splice(path, text):
    with open(path) as f:
        doc = f.read()
    if BEGIN not in doc or END not in doc:
        sys.exit(f"simulate_report.py: {path} lacks the markers {BEGIN} / {END}")
    head, rest = doc.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    with open(path, "w") as f:
        f.write(head + BEGIN + "\n" + text + END + tail)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sim", required=True)
    ap.add_argument("--trace-summary", required=True)
    ap.add_argument("--meta", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--docs")
    ap.add_argument("--plot", help="write the attainment-against-cost SVG here")
    args = ap.parse_args()
    with open(args.sim) as f:
        sim = json.load(f)
    with open(args.trace_summary) as f:
        summary = json.load(f)
    with open(args.meta) as f:
        meta = json.load(f)
    text = report(sim, summary, meta)
    if args.plot:
        with open(args.plot, "w") as f:
            f.write(cost_plot(sim))
        text += f"\n![attainment against cost]({os.path.basename(args.plot)})\n"
    with open(args.out, "w") as f:
        f.write(text)
    if args.docs:
        splice(args.docs, text)
    sys.stdout.write(text)


if __name__ == "__main__":
    main()
