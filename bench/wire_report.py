#!/usr/bin/env python3
"""The tables of one bench/wire.sh run, from its folder (runs.tsv, header,
json_decode.md), as Markdown on stdout.

digits-mlp: per wire and connections, somm's and the limit's median q/s,
the share (median somm / median limit, each run's share after it), the p99s
and both CPUs per request (medians). resnet18: per run, raw libtorch at
batch 8 and somm on each wire as a share of that run's raw figure, then the
medians; the JSON decode's µs per MB. Then every run, as measured.

Usage: bench/wire_report.py OUT_DIR
"""
import csv
import os
import statistics
import sys

WIRES = [("rest-json", "REST JSON"), ("rest-binary", "REST binary"), ("grpc", "gRPC")]
LIMITS = {"rest-json": "nginx", "rest-binary": "nginx", "grpc": "bench_grpc_wire_limit"}


def num(value):
    return None if value in ("-", "", None) else float(value)


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def fmt(value, digits=0):
    if value is None:
        return "n/a"
    return f"{value:,.{digits}f}"


def pct(value):
    return "n/a" if value is None else f"{100 * value:.1f}%"


def digits_table(rows, model):
    out = [f"### {model}: somm against the wire's limit",
           "",
           "Medians over the runs; share = somm's median q/s / the limit's (each run's share "
           "in brackets); CPU per request: client (the load generator) and server, "
           "somm's run / the limit's run; server CPU share = the limit's server CPU per request / "
           "somm's (the share the servers alone would give, whatever the client costs).",
           "",
           "| wire | connections | somm q/s | limit q/s | share | somm p99 ms | limit p99 ms "
           "| client CPU µs/req | server CPU µs/req | server CPU share | client cheaper than server |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    conns = sorted({int(r["connections"]) for r in rows if r["model"] == model})
    for wire, name in WIRES:
        for c in conns:
            def pick(target):
                return sorted((r for r in rows if r["model"] == model and r["wire"] == wire
                               and int(r["connections"]) == c and r["target"] == target),
                              key=lambda r: int(r["run"]))
            somm, limit = pick("somm"), pick("limit")
            if not somm or not limit:
                continue
            med = lambda rs, key: median([num(r[key]) for r in rs])  # noqa: E731
            sq, lq = med(somm, "qps"), med(limit, "qps")
            per_run = []
            by_run = {r["run"]: num(r["qps"]) for r in limit}
            for r in somm:
                if by_run.get(r["run"]):
                    per_run.append(f"{100 * num(r['qps']) / by_run[r['run']]:.0f}")
            cs, cl = med(somm, "client_cpu_us"), med(limit, "client_cpu_us")
            ss, sl = med(somm, "server_cpu_us"), med(limit, "server_cpu_us")
            cheaper = "yes" if cs is not None and ss is not None and cs < ss else "no"
            cheaper += " / " + ("yes" if cl is not None and sl is not None and cl < sl else "no")
            p99s, p99l = med(somm, "p99_us"), med(limit, "p99_us")
            out.append(
                f"| {name} ({LIMITS[wire]}) | {c} | {fmt(sq)} | {fmt(lq)} | "
                f"{pct(sq / lq if sq and lq else None)} ({', '.join(per_run)}) | "
                f"{fmt(p99s and p99s / 1000, 2)} | {fmt(p99l and p99l / 1000, 2)} | "
                f"{fmt(cs, 1)} / {fmt(cl, 1)} | {fmt(ss, 1)} / {fmt(sl, 1)} | "
                f"{pct(sl / ss if sl and ss else None)} | {cheaper} |")
    return out


def resnet_table(rows, model, decode):
    raws = {r["run"]: r for r in rows if r["model"] == model and r["wire"] == "raw"}
    if not raws:
        return []
    raw_name = next(iter(raws.values()))["target"]
    out = [f"### {model}: somm against raw libtorch ({raw_name})",
           "",
           "samples/s per run (one-image queries; somm batches them); share = somm / that "
           "run's raw libtorch.",
           "",
           "| run | raw libtorch samples/s | " +
           " | ".join(f"{name} samples/s | share" for _, name in WIRES) + " |",
           "|---|---:|" + "---:|---:|" * len(WIRES)]
    shares = {wire: [] for wire, _ in WIRES}
    values = {wire: [] for wire, _ in WIRES}
    for run in sorted(raws, key=int):
        raw = num(raws[run]["qps"])
        cells = [run, fmt(raw, 1)]
        for wire, _ in WIRES:
            r = next((r for r in rows if r["model"] == model and r["wire"] == wire
                      and r["run"] == run and r["target"] == "somm"), None)
            q = num(r["qps"]) if r else None
            share = q / raw if q and raw else None
            shares[wire].append(share)
            values[wire].append(q)
            cells += [fmt(q, 1), pct(share)]
        out.append("| " + " | ".join(cells) + " |")
    cells = ["median", fmt(median([num(r["qps"]) for r in raws.values()]), 1)]
    for wire, _ in WIRES:
        cells += [fmt(median(values[wire]), 1), pct(median(shares[wire]))]
    out.append("| " + " | ".join(cells) + " |")
    ok = all(s is not None and s >= 0.95 for wire, _ in WIRES for s in shares[wire])
    out += ["", f"At least 95% of raw libtorch on every wire in every run: {'yes' if ok else 'no'}."]
    if decode:
        out += ["", decode]
    return out


def decode_line(path):
    """The fast path's µs per MB from bench_json_decode's table."""
    if not os.path.exists(path):
        return ""
    for line in open(path):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[1].isdigit():
            size, fast = int(cells[1]), float(cells[2])
            return (f"JSON request decode (bench_json_decode, fast path): {fast:,.0f} µs per "
                    f"{size:,}-byte body, **{fast / (size / 1e6):,.0f} µs per MB**.")
    return ""


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    d = sys.argv[1]
    rows = list(csv.DictReader(open(os.path.join(d, "runs.tsv")), delimiter="\t"))
    header = open(os.path.join(d, "header")).read().strip() if os.path.exists(
        os.path.join(d, "header")) else ""
    out = ["## bench/wire.sh", "", header, ""]
    models = []
    for r in rows:
        if r["model"] not in models:
            models.append(r["model"])
    for model in models:
        if any(r["model"] == model and r["target"] == "limit" for r in rows):
            out += digits_table(rows, model) + [""]
        if any(r["model"] == model and r["wire"] == "raw" for r in rows):
            out += resnet_table(rows, model, decode_line(os.path.join(d, "json_decode.md"))) + [""]
    out += ["### Every run", "",
            "| model | wire | connections | run | target | q/s | p50 ms | p99 ms | requests "
            "| errors | client CPU µs/req | server CPU µs/req |",
            "|---|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        p50, p99 = num(r["p50_us"]), num(r["p99_us"])
        out.append(
            f"| {r['model']} | {r['wire']} | {r['connections']} | {r['run']} | {r['target']} | "
            f"{fmt(num(r['qps']), 1)} | {fmt(p50 and p50 / 1000, 2)} | "
            f"{fmt(p99 and p99 / 1000, 2)} | {r['requests']} | {r['errors']} | "
            f"{fmt(num(r['client_cpu_us']), 1)} | {fmt(num(r['server_cpu_us']), 1)} |")
    finished = os.path.join(d, "finished")
    if os.path.exists(finished):
        out += ["", open(finished).read().strip()]
    print("\n".join(out))


if __name__ == "__main__":
    main()
