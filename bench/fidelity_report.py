#!/usr/bin/python3
"""The simulator against the live system on the same trace (issue #15's
fidelity): reads a bench/managed.sh run of the somm-managed target and the
`somm simulate --json` replays of its trace, and prints a markdown table with
the differences in attainment (points) and instance-seconds (%).

Usage: /usr/bin/python3 bench/fidelity_report.py --managed OUT SIM.json [SIM.json ...]

Feasible and met are counted the same way on both sides: a query is feasible
when its SLO is at least the best profiled batch-1 latency of its model
(bench/managed_report.py's rule, which `somm simulate` shares); instance-seconds
are the live server's replicas integrated over the replay (its samples every
second) and the simulator's replica-seconds. Standard library only.
"""
import argparse
import json
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import managed_report  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--managed", required=True, help="bench/managed.sh --out folder")
    ap.add_argument("sims", nargs="+", help="somm simulate --json files (one per seed)")
    a = ap.parse_args()
    plan = managed_report.load_json(os.path.join(a.managed, "plan.json"))
    live = managed_report.analyse_target(a.managed, "somm-managed", plan)
    # Rejections of every query, feasible or not, as the simulator counts them.
    rows = [("live", live["feasible"], live["met"], live["attainment"], live["instance_s"],
             live["rejected"] + live["infeasible_rejected"], live["expired"], live["late"],
             int(live["cold_starts"]))]
    for path in a.sims:
        with open(path) as f:
            p = json.load(f)["policies"]["somm"]
        name = os.path.splitext(os.path.basename(path))[0]
        seed = re.search(r"seed(\d+)$", name)
        label = f"simulated, seed {seed.group(1)}" if seed else f"simulated, {name}"
        rows.append((label, p["feasible"], p["met"], p["attainment"], p["instance_seconds"],
                     p["rejections"], p["expired"], p["late"], p["cold_starts"]))
    out = ["| run | feasible | met | attainment | instance-s | rejections | expired | late "
           "| cold starts |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name, feas, met, att, inst, rej, exp, late, cold in rows:
        out.append(f"| {name} | {feas:,} | {met:,} | {100 * att:.2f}% | {inst:,.1f} | {rej:,} "
                   f"| {exp:,} | {late:,} | {cold} |")
    sims = rows[1:]
    d_att = [100 * (s[3] - live["attainment"]) for s in sims]
    d_inst = [100 * (s[4] / live["instance_s"] - 1) for s in sims]
    out += ["",
            f"Simulated minus live: attainment {min(d_att):+.2f} to {max(d_att):+.2f} points "
            f"(median {statistics.median(d_att):+.2f}; target within 0.5), instance-seconds "
            f"{min(d_inst):+.1f}% to {max(d_inst):+.1f}% (median {statistics.median(d_inst):+.1f}%; "
            "target within 15%)."]
    ok = max(abs(x) for x in d_att) <= 0.5 and max(abs(x) for x in d_inst) <= 15
    out.append(f"Verdict: {'met' if ok else 'not met'}.")
    print("\n".join(out))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
