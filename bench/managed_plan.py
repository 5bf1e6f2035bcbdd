#!/usr/bin/python3
"""Plan of a bench/managed.sh run: per-model load, capacity, static replicas, feasibility.

Usage:
  managed_plan.py plan --trace T.csv --repo REPO --time-scale X --out plan.json
                       [--measured MODEL=bench.json ...]
  managed_plan.py repo --src REPO --dst DIR --models M ... [--instances M=N ...]

`plan` reads the trace and the repository (model.yaml, variant profiles under
REPO/.somm/variants/<model>/<version>/<variant>/profile.json) and decides,
per model of the trace:
  load         mean and peak queries per second of wall-clock time during the
               replay: the trace's rates times --time-scale, peak = the
               busiest one-second bin of the replay;
  fixed        the variant a static server runs: the one served as
  variant      registered (optimization "as registered", normally ts-fp32), on
               the model's intra_op_threads;
  capacity     queries/s one replica of that variant sustains. With
               --measured (closed-loop `somm bench --json` against one
               replica; bench/managed.sh measures at concurrency =
               max_batch_size) the measured throughput; else from the
               profile: the best batch/latency(batch) over the profiled
               batches up to max_batch_size;
  replicas     static-peak: ceil(peak / capacity), static-avg:
               ceil(mean / capacity), each at least 1 (no headroom);
  feasibility  best_b1_ms: the lowest profiled batch-1 latency of any usable
               variant on any hardware. A query whose latency_slo_ms is
               below it cannot be met by any variant, even on an idle
               server: the report leaves such queries out of SLO attainment.
It writes plan.json and prints a table.

`repo` writes a model repository holding only --models, copied from --src
with their variants (.somm/variants), with instance_count set per
--instances (others keep their model.yaml's). Copies, not links: a server
may write into its repository.
Standard library plus PyYAML (Debian's python3-yaml, used by scripts/setup).
"""
import argparse
import csv
import glob
import json
import math
import os
import re
import shutil
import sys

import yaml


def die(msg):
    sys.exit(f"managed_plan.py: {msg}")


def model_config(repo, model):
    path = os.path.join(repo, model, "model.yaml")
    if not os.path.exists(path):
        die(f"no {path}: is '{model}' in the repository?")
    with open(path) as f:
        return yaml.safe_load(f)


def latest_version(repo, model):
    versions = [int(d) for d in os.listdir(os.path.join(repo, model)) if d.isdigit()]
    if not versions:
        die(f"{repo}/{model} has no version folder")
    return str(max(versions))


def load_profiles(repo, model, version):
    profiles = []
    for path in sorted(glob.glob(os.path.join(repo, ".somm", "variants", model, version, "*",
                                              "profile.json"))):
        with open(path) as f:
            profiles.append(json.load(f))
    return profiles


def batch1_ms(hw):
    """The measured batch-1 latency of one hardware profile (else the fit's prediction)."""
    lat = hw.get("latency", {})
    for p in lat.get("points", []):
        if p.get("batch") == 1:
            return p["latency_ms"]
    return lat.get("intercept_ms", 0) + lat.get("slope_ms", 0)


def hw_name(hw):
    """"cpu2", "cuda0": as somm names hardware configurations."""
    if hw.get("device") == "cuda":
        return f"cuda{hw.get('device_index', 0)}"
    return f"cpu{hw.get('threads', 1)}"


def best_b1(profiles):
    best = None
    for p in profiles:
        if not p.get("usable", True):
            continue
        for hw in p.get("hardware", []):
            ms = batch1_ms(hw)
            if ms > 0 and (best is None or ms < best[0]):
                best = (ms, f"{p['variant']}@{hw_name(hw)}")
    return best


def fixed_variant(profiles):
    """The as-registered variant's profile (ts-fp32), or None."""
    for p in profiles:
        if p.get("optimization", "").replace("-", " ") == "as registered":
            return p
    return next((p for p in profiles if p.get("variant") == "ts-fp32"), None)


def profile_capacity(profile, threads, max_batch):
    """(qps, batch) of the best profiled batch/latency on `threads` CPU threads."""
    if profile is None:
        return None
    for hw in profile.get("hardware", []):
        if hw.get("device", "cpu") == "cpu" and hw.get("threads") == threads:
            best = None
            for p in hw["latency"]["points"]:
                if p["batch"] <= max_batch and p["latency_ms"] > 0:
                    qps = p["batch"] * 1000.0 / p["latency_ms"]
                    if best is None or qps > best[0]:
                        best = (qps, p["batch"])
            return best
    return None


def trace_load(path, time_scale):
    """{model: {"queries", "mean_qps", "peak_qps", "peak_second", "slos": {ms: n}}}, duration_s.

    Rates are per second of replay (wall clock): trace seconds / time_scale."""
    counts, slos, last_ms = {}, {}, 0.0
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            ts = float(row["timestamp_ms"])
            model = row.get("model") or ""
            if not model:
                die(f"{path}: a row without a model (the harness needs the column filled)")
            second = int(ts / 1000.0 / time_scale)
            counts.setdefault(model, {})
            counts[model][second] = counts[model].get(second, 0) + 1
            slo = row.get("latency_slo_ms") or ""
            slos.setdefault(model, {})
            slos[model][slo] = slos[model].get(slo, 0) + 1
            last_ms = max(last_ms, ts)
    duration = max(last_ms / 1000.0 / time_scale, 1e-9)
    out = {}
    for model, bins in counts.items():
        n = sum(bins.values())
        peak_second, peak = max(bins.items(), key=lambda kv: (kv[1], -kv[0]))
        out[model] = {"queries": n, "mean_qps": n / duration, "peak_qps": peak,
                      "peak_second": peak_second, "slos": slos[model]}
    return out, duration


def measured_capacity(path):
    with open(path) as f:
        report = json.load(f)
    points = report.get("points") or []
    return max((p.get("throughput_qps", 0) for p in points), default=0) or None


def cmd_plan(args):
    measured = {}
    for item in args.measured:
        model, sep, path = item.partition("=")
        if not sep:
            die(f"--measured '{item}' must be MODEL=bench.json")
        measured[model] = measured_capacity(path)
    load, duration = trace_load(args.trace, args.time_scale)
    plan = {"trace": args.trace, "time_scale": args.time_scale, "replay_s": round(duration, 3),
            "capacity_source": "measured" if measured else "profile", "models": {},
            "targets": {"static-peak": {}, "static-avg": {}}}
    for model in sorted(load):
        cfg = model_config(args.repo, model)
        version = latest_version(args.repo, model)
        profiles = load_profiles(args.repo, model, version)
        threads = int(cfg.get("intra_op_threads", 1))
        max_batch = max(int(cfg.get("max_batch_size", 1)), 1)
        fixed = fixed_variant(profiles)
        prof_cap = profile_capacity(fixed, threads, max_batch)
        cap = measured.get(model) if measured else (prof_cap[0] if prof_cap else None)
        if not cap:
            die(f"no capacity for {model}: " + ("its --measured run has no throughput" if measured
                else f"no profile of its as-registered variant on cpu{threads}"))
        best = best_b1(profiles)
        l = load[model]
        feasible = sum(n for slo, n in l["slos"].items()
                       if best is None or not slo or float(slo) >= best[0])
        m = {
            "version": version,
            "fixed_variant": fixed["variant"] if fixed else "as registered",
            "threads": threads,
            "max_batch_size": max_batch,
            "capacity_qps": round(cap, 2),
            "capacity_profile_qps": round(prof_cap[0], 2) if prof_cap else None,
            "capacity_profile_batch": prof_cap[1] if prof_cap else None,
            "capacity_measured_qps": round(measured[model], 2) if model in measured else None,
            "queries": l["queries"],
            "mean_qps": round(l["mean_qps"], 3),
            "peak_qps": l["peak_qps"],
            "peak_second": l["peak_second"],
            "replicas_peak": max(1, math.ceil(l["peak_qps"] / cap)),
            "replicas_avg": max(1, math.ceil(l["mean_qps"] / cap)),
            "best_b1_ms": round(best[0], 4) if best else None,
            "best_b1_variant": best[1] if best else None,
            "feasible_queries": feasible,
        }
        plan["models"][model] = m
        plan["targets"]["static-peak"][model] = m["replicas_peak"]
        plan["targets"]["static-avg"][model] = m["replicas_avg"]
    with open(args.out, "w") as f:
        json.dump(plan, f, indent=1)
        f.write("\n")
    print(f"plan: replay {duration:.0f} s (trace time / {args.time_scale:g}); capacity from "
          f"{plan['capacity_source']} (one replica of the as-registered variant)")
    w = max(len(m) for m in plan["models"])
    print(f"  {'model':<{w}}  {'variant':<12}  {'mean/s':>7}  {'peak/s':>7}  {'cap/s':>8}  "
          f"{'(profile)':>9}  {'peak rep':>8}  {'avg rep':>7}  {'best b1 ms':>10}  feasible")
    for name, m in plan["models"].items():
        prof = f"{m['capacity_profile_qps']:.1f}" if m["capacity_profile_qps"] else "n/a"
        print(f"  {name:<{w}}  {m['fixed_variant'] + '@cpu' + str(m['threads']):<12}  "
              f"{m['mean_qps']:>7.1f}  {m['peak_qps']:>7}  {m['capacity_qps']:>8.1f}  {prof:>9}  "
              f"{m['replicas_peak']:>8}  {m['replicas_avg']:>7}  "
              f"{m['best_b1_ms'] if m['best_b1_ms'] is not None else 'n/a':>10}  "
              f"{m['feasible_queries']}/{m['queries']}")


def set_instance_count(text, n):
    """model.yaml text with instance_count set to n, comments and layout kept."""
    pat = re.compile(r"^instance_count:.*$", re.M)
    if pat.search(text):
        return pat.sub(f"instance_count: {n}", text, count=1)
    return text.rstrip("\n") + f"\ninstance_count: {n}\n"


def cmd_repo(args):
    instances = {}
    for item in args.instances:
        model, sep, n = item.partition("=")
        if not sep or not n.isdigit() or int(n) < 1:
            die(f"--instances '{item}' must be MODEL=N with N >= 1")
        instances[model] = int(n)
    if os.path.exists(args.dst):
        shutil.rmtree(args.dst)
    os.makedirs(args.dst)
    for model in args.models:
        src = os.path.join(args.src, model)
        if not os.path.isdir(src):
            die(f"no model '{model}' in {args.src}")
        shutil.copytree(src, os.path.join(args.dst, model))
        variants = os.path.join(args.src, ".somm", "variants", model)
        if os.path.isdir(variants):
            shutil.copytree(variants, os.path.join(args.dst, ".somm", "variants", model))
        if model in instances:
            path = os.path.join(args.dst, model, "model.yaml")
            with open(path) as f:
                text = f.read()
            with open(path, "w") as f:
                f.write(set_instance_count(text, instances[model]))
    unknown = set(instances) - set(args.models)
    if unknown:
        die(f"--instances names models not in --models: {', '.join(sorted(unknown))}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("plan")
    p.add_argument("--trace", required=True)
    p.add_argument("--repo", required=True)
    p.add_argument("--time-scale", type=float, default=1.0)
    p.add_argument("--measured", action="append", default=[], metavar="MODEL=bench.json")
    p.add_argument("--out", required=True)
    r = sub.add_parser("repo")
    r.add_argument("--src", required=True)
    r.add_argument("--dst", required=True)
    r.add_argument("--models", nargs="+", required=True)
    r.add_argument("--instances", action="append", default=[], metavar="MODEL=N")
    args = ap.parse_args()
    if args.cmd == "plan":
        if args.time_scale <= 0:
            die("--time-scale must be positive")
        cmd_plan(args)
    else:
        cmd_repo(args)


if __name__ == "__main__":
    main()
