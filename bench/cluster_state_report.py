#!/usr/bin/python3
"""The steady-state cost of the cluster state in Redis, from what Redis saw.

Usage:
  cluster_state_report.py window OUT.json --monitor FILE --clients FILE --seconds S
                          --workers K --routers R --state idle|load [--queries N]
  cluster_state_report.py report OUT_DIR

`window` reads one MONITOR capture (`redis-cli MONITOR` for S seconds) and
the CLIENT LIST taken with it, attributes every command to the process whose
connection sent it (somm names its connections `<role>:<id>.<write|read|
watch>`, CLIENT SETNAME), and writes OUT.json:
  per process: commands/s sent (a pipeline of n commands counts n; EVAL
  counts 1), commands/s its scripts ran inside Redis (the lines MONITOR shows
  as `lua` after an EVAL), refreshes/s of its view (its SMEMBERS of the
  worker set);
  propagation: for each router, the change over the window of its
  somm_cluster_view_lag_seconds histogram (--lag PREFIX: PREFIX.lag-before-I.prom
  and PREFIX.lag-after-I.prom for router I): from each report written in
  Redis (Redis's clock, carried by its change notice) to the router's view
  holding it; p50 and p99 are the upper bounds of the buckets they fall in,
  max the bound of the highest bucket used;
  view age: the gaps between a process's consecutive refreshes.
`report` gathers OUT_DIR/*.window.json into OUT_DIR/cluster_state.json and
OUT_DIR/report.md (one row per cluster size and state) and prints it.
Standard library only.
"""
import argparse
import glob
import json
import os
import re
import statistics
import sys

LINE = re.compile(r'^(\d+\.\d+) \[\d+ ([^\]]+)\] "([^"]*)"(.*)$')
ARG = re.compile(r'"((?:[^"\\]|\\.)*)"')


def read_clients(path):
    """addr -> client name (CLIENT LIST)."""
    names = {}
    for line in open(path):
        fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
        if "addr" in fields:
            names[fields["addr"]] = fields.get("name", "")
    return names


def process_of(name):
    """'router:router-0.read' -> ('router:router-0', 'read'); unnamed -> (None, None)."""
    if not name or ":" not in name:
        return None, None
    base, _, role = name.rpartition(".")
    return (base, role) if base else (name, "")


LAG = re.compile(r'^somm_cluster_view_lag_seconds_bucket\{process="([^"]+)",le="([^"]+)"\} (\d+)')


def read_lag(path):
    """process -> [(upper bound s, cumulative count)] of one scrape."""
    out = {}
    for line in open(path):
        m = LAG.match(line.strip())
        if m:
            bound = float("inf") if m[2] == "+Inf" else float(m[2])
            out.setdefault(m[1], []).append((bound, int(m[3])))
    return out


def lag_quantiles(before, after):
    """p50, p99 and max (seconds; bucket upper bounds) of the window's lags."""
    deltas = [(b, a - c) for (b, a), (_, c) in zip(sorted(after), sorted(before))]
    total = deltas[-1][1] if deltas else 0
    if total <= 0:
        return None, None, None, 0
    def q(frac):
        return next(b for b, n in deltas if n >= frac * total)
    prev, top = 0, None
    for b, n in deltas:
        if n > prev:
            top = b
        prev = n
    return q(0.5), q(0.99), top, total


def window(args):
    names = read_clients(args.clients)
    sent, inside, refreshes = {}, {}, {}
    last_refresh, gaps = {}, {}
    writes = []      # (t, worker id)
    unattributed = 0
    last_client_process = None
    for line in open(args.monitor, errors="replace"):
        m = LINE.match(line.strip())
        if not m:
            continue
        t, addr, cmd, rest = float(m[1]), m[2], m[3].upper(), m[4]
        if addr == "lua":
            if last_client_process:
                inside[last_client_process] = inside.get(last_client_process, 0) + 1
            continue
        proc, role = process_of(names.get(addr, ""))
        last_client_process = proc
        if proc is None:
            unattributed += 1
            continue
        sent[proc] = sent.get(proc, 0) + 1
        fields = ARG.findall(rest)
        if cmd == "SMEMBERS" and fields and fields[0].endswith("workers"):
            refreshes[proc] = refreshes.get(proc, 0) + 1
            if proc in last_refresh:
                gaps.setdefault(proc, []).append(t - last_refresh[proc])
            last_refresh[proc] = t
        elif (cmd in ("EVAL", "EVALSHA") and proc.startswith("worker:") and len(fields) > 2
              and ":worker:" in fields[2]):
            # EVAL script numkeys key...: the report's key comes first.
            writes.append((t, fields[2].rsplit(":worker:", 1)[1]))
    seconds = args.seconds
    # Propagation: each router's own view-lag histogram over the window.
    lags = {}
    for after_path in sorted(glob.glob(args.lag + ".lag-after-*.prom")) if args.lag else []:
        before = read_lag(after_path.replace(".lag-after-", ".lag-before-"))
        for proc, buckets in read_lag(after_path).items():
            lags[proc] = lag_quantiles(before.get(proc, []), buckets)
    procs = sorted(set(sent) | set(inside))
    out = {
        "workers": args.workers, "routers": args.routers, "state": args.state,
        "seconds": seconds, "queries": args.queries, "unattributed_commands": unattributed,
        "processes": {
            p: {
                "commands_per_s": round(sent.get(p, 0) / seconds, 2),
                "script_commands_per_s": round(inside.get(p, 0) / seconds, 2),
                "refreshes_per_s": round(refreshes.get(p, 0) / seconds, 2),
                "propagation_ms": {
                    "n": lags.get(p, (None, None, None, 0))[3],
                    "p50": _ms(lags.get(p, (None,))[0]),
                    "p99": _ms(lags.get(p, (None, None))[1]),
                    "max": _ms(lags.get(p, (None, None, None))[2]),
                },
                "view_age_ms": {
                    "mean_gap": _ms(statistics.mean(gaps[p]) if gaps.get(p) else None),
                    "max_gap": _ms(max(gaps[p]) if gaps.get(p) else None),
                },
            } for p in procs
        },
        "worker_writes": len(writes),
    }
    with open(args.out, "w") as f:
        json.dump(out, f, indent=2)
    print(f"  {args.state}: " + ", ".join(f"{p} {v['commands_per_s']}/s"
                                        for p, v in out["processes"].items()))


def _ms(v):
    return None if v is None else round(v * 1000, 2)


def mean_over(rows, kind, key, sub=None, digits=1):
    vals = []
    for name, p in rows.items():
        if not name.startswith(kind + ":"):
            continue
        v = p[key] if sub is None else p[key][sub]
        if v is not None:
            vals.append(v)
    return round(statistics.mean(vals), digits) if vals else None


def max_over(rows, kind, key, sub):
    vals = [p[key][sub] for n, p in rows.items() if n.startswith(kind + ":") and p[key][sub] is not None]
    return max(vals) if vals else None


def report(args):
    windows = [json.load(open(p)) for p in sorted(glob.glob(os.path.join(args.out_dir, "*.window.json")))]
    if not windows:
        sys.exit(f"cluster_state_report.py: no *.window.json under {args.out_dir}")
    windows.sort(key=lambda w: (w["workers"], w["routers"], w["state"] != "idle"))
    meta_path = os.path.join(args.out_dir, "meta.json")
    meta = json.load(open(meta_path)) if os.path.exists(meta_path) else {}
    rows = []
    for w in windows:
        p = w["processes"]
        total = sum(x["commands_per_s"] for x in p.values())
        inside = sum(x["script_commands_per_s"] for x in p.values())
        rows.append({
            "workers": w["workers"], "routers": w["routers"], "state": w["state"],
            "seconds": w["seconds"], "queries_per_s": round(w["queries"] / w["seconds"], 1) if w.get("queries") else 0,
            "per_worker_commands_per_s": mean_over(p, "worker", "commands_per_s"),
            "per_router_commands_per_s": mean_over(p, "router", "commands_per_s"),
            "controller_commands_per_s": mean_over(p, "controller", "commands_per_s"),
            "per_router_refreshes_per_s": mean_over(p, "router", "refreshes_per_s"),
            "total_commands_per_s": round(total, 1),
            "script_commands_per_s": round(inside, 1),
            "router_propagation_p50_ms": mean_over(p, "router", "propagation_ms", "p50", digits=2),
            "router_propagation_p99_ms": max_over(p, "router", "propagation_ms", "p99"),
            "router_propagation_max_ms": max_over(p, "router", "propagation_ms", "max"),
            "router_view_mean_gap_ms": mean_over(p, "router", "view_age_ms", "mean_gap"),
            "router_view_max_gap_ms": max_over(p, "router", "view_age_ms", "max_gap"),
            "unattributed_commands": w["unattributed_commands"],
        })
    with open(os.path.join(args.out_dir, "cluster_state.json"), "w") as f:
        json.dump({"meta": meta, "rows": rows}, f, indent=2)

    def f(v, d=1):
        return "-" if v is None else f"{v:,.{d}f}"
    lines = [
        "# Steady-state cost of the cluster state",
        "",
        f"{meta.get('date', '?')}, commit `{meta.get('git', '?')}`; `{meta.get('command', '')}`. "
        f"{meta.get('settings', '')}",
        "",
        "| workers | routers | state | commands/s per worker | per router | controller | all processes "
        "| inside scripts | router refreshes/s | write to router view p50 / p99 / max ms | router refresh gap mean / max ms |",
        "|---:|---:|---|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for r in rows:
        state = r["state"] if r["state"] == "idle" else f"{r['state']} ({r['queries_per_s']:.0f} q/s)"
        lines.append(
            f"| {r['workers']} | {r['routers']} | {state} | {f(r['per_worker_commands_per_s'])} | "
            f"{f(r['per_router_commands_per_s'])} | {f(r['controller_commands_per_s'])} | "
            f"{f(r['total_commands_per_s'])} | {f(r['script_commands_per_s'])} | "
            f"{f(r['per_router_refreshes_per_s'])} | {f(r['router_propagation_p50_ms'], 2)} / "
            f"{f(r['router_propagation_p99_ms'], 2)} / {f(r['router_propagation_max_ms'], 2)} | "
            f"{f(r['router_view_mean_gap_ms'])} / {f(r['router_view_max_gap_ms'])} |")
    lines += ["",
              "Commands are what each process sent (a pipeline of n commands counts n, a script 1); "
              "inside scripts: the commands its Lua scripts ran in Redis. Write to router view: from a "
              "worker's report written in Redis (Redis's clock, in its change notice) to a router's view "
              "holding it, from the router's somm_cluster_view_lag_seconds histogram over the window "
              "(upper bounds of its buckets: 0.25, 0.5, 1, 2, 5, 10, 25 ms ...). "
              "Refresh gap: time between a router's consecutive reads of the cluster state.", ""]
    text = "\n".join(lines)
    with open(os.path.join(args.out_dir, "report.md"), "w") as fh:
        fh.write(text)
    print(text)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("window")
    w.add_argument("out")
    w.add_argument("--monitor", required=True)
    w.add_argument("--clients", required=True)
    w.add_argument("--seconds", type=float, required=True)
    w.add_argument("--workers", type=int, required=True)
    w.add_argument("--routers", type=int, required=True)
    w.add_argument("--state", required=True)
    w.add_argument("--queries", type=int, default=0)
    w.add_argument("--lag", help="prefix of the routers' view-lag scrapes")
    r = sub.add_parser("report")
    r.add_argument("out_dir")
    args = ap.parse_args()
    (window if args.cmd == "window" else report)(args)


if __name__ == "__main__":
    main()
