#!/usr/bin/env python3
"""Every metric the Grafana dashboard and the Prometheus alert rules name
exists in a live somm's /metrics, and docs/metrics.md lists every metric a
live somm serves.

Offline first: deploy/grafana/*.json loads as JSON and has panels with
PromQL targets; deploy/prometheus/*.yaml loads as YAML and has rules with an
alert, an expression and a severity. Then `somm serve` on the demo
repository, a few queries, one scrape (tools/somm_metrics.py). A metric
that `somm serve` does not export must be in tools/somm_metrics.NOT_IN_SERVE
with its reason (the controller's worker scaler; contracts of features not
built yet), and must then really be absent: the list cannot go stale.

Usage: metrics_contract_test.py --somm build/somm --repo models/demo
                                --deploy deploy --docs docs/metrics.md
       metrics_contract_test.py --offline --deploy deploy --docs docs/metrics.md
"""
import argparse
import glob
import json
import os
import sys

import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
import somm_metrics  # noqa: E402

failures = 0


def check(ok, what):
    global failures
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures += 1


def grafana_exprs(path):
    with open(path) as f:
        dash = json.load(f)
    exprs = []
    check(isinstance(dash.get("panels"), list) and dash["panels"], f"{path}: has panels")
    for p in dash.get("panels", []):
        targets = p.get("targets", [])
        check(bool(targets) and all(t.get("expr") for t in targets),
              f"{path}: panel '{p.get('title')}' has PromQL targets")
        exprs += [(f"panel '{p.get('title')}'", t.get("expr", "")) for t in targets]
    return exprs


def alert_exprs(path):
    with open(path) as f:
        rules = yaml.safe_load(f)
    exprs = []
    groups = rules.get("groups", []) if isinstance(rules, dict) else []
    check(bool(groups), f"{path}: has rule groups")
    for g in groups:
        for r in g.get("rules", []):
            check(bool(r.get("alert")) and bool(r.get("expr")) and r.get("labels", {}).get("severity"),
                  f"{path}: rule '{r.get('alert')}' has an alert, an expr and a severity")
            exprs.append((f"alert '{r.get('alert')}'", r.get("expr", "")))
    return exprs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--somm")
    ap.add_argument("--repo")
    ap.add_argument("--offline", action="store_true",
                    help="only load the JSON and YAML and check their shape (no somm)")
    ap.add_argument("--deploy", required=True)
    ap.add_argument("--docs", required=True)
    args = ap.parse_args()

    dashboards = sorted(glob.glob(os.path.join(args.deploy, "grafana", "*.json")))
    # *_test.yaml: promtool unit tests of the rules (deploy_alert_rules), not rules.
    alerts = sorted(f for f in glob.glob(os.path.join(args.deploy, "prometheus", "*.yaml"))
                    if not f.endswith("_test.yaml"))
    check(bool(dashboards) and bool(alerts), "deploy/ has a Grafana dashboard and alert rules")
    exprs = []
    for d in dashboards:
        exprs += grafana_exprs(d)
    for a in alerts:
        exprs += alert_exprs(a)
    named = {}
    for where, expr in exprs:
        for name in somm_metrics.names_in_expr(expr):
            named.setdefault(name, []).append(where)
    check(len(named) > 0, f"the dashboard and the rules name {len(named)} somm metrics")

    if args.offline:
        print(f"{failures} check(s) failed" if failures else "all checks passed")
        return 1 if failures else 0
    live = somm_metrics.live_metrics(os.path.abspath(args.somm), os.path.abspath(args.repo))
    check(len(live) > 0, f"a live somm serves {len(live)} metric families")
    for name in sorted(named):
        if name in somm_metrics.NOT_IN_SERVE:
            check(name not in live, f"{name} is not in `somm serve`'s /metrics, as listed: "
                                    f"{somm_metrics.NOT_IN_SERVE[name]}")
        else:
            check(name in live, f"{name} ({', '.join(sorted(set(named[name])))}) exists in /metrics")

    with open(args.docs) as f:
        docs = f.read()
    for name in sorted(set(live) | set(somm_metrics.NOT_IN_SERVE)):
        check(f"`{name}`" in docs, f"docs/metrics.md lists {name}")
    if failures:
        print("regenerate docs/metrics.md with scripts/metrics_doc after adding a metric")
    print(f"{failures} check(s) failed" if failures else "all checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
