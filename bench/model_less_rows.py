#!/usr/bin/python3
"""Turns a share of a make_trace.py trace's model rows into model-less rows,
for `somm simulate` (bench/simulate.sh --model-less SHARE).

Usage: /usr/bin/python3 bench/model_less_rows.py --trace IN --repository DIR --out OUT
           [--share 0.5] [--floors 0.95:0.3,0.9:0.3] [--max-cost-share 0.1] [--seed 1]

Each row of a model whose model.yaml (in --repository) names a task becomes,
with probability --share, a row of that task with no model: its SLO stays
the row's; it asks min_accuracy F with probability S for each F:S of
--floors (none otherwise); and with probability --max-cost-share it carries
a max_cost of 1e-12 USD, below any variant's charge on the price list, so
that every policy must refuse it. Rows of models with no task stay model
rows. The output has the columns timestamp_ms, model, task, latency_slo_ms,
min_accuracy and max_cost (src/loadgen/trace.h). Only Python's `random` is
used: the same arguments give the same file. Standard library only.
"""
import argparse
import csv
import os
import random
import re


def task_of(repository, model):
    try:
        with open(os.path.join(repository, model, "model.yaml")) as f:
            m = re.search(r"(?m)^task:\s*(\S+)", f.read())
            return m.group(1) if m else None
    except OSError:
        return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trace", required=True)
    ap.add_argument("--repository", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--share", type=float, default=0.5)
    ap.add_argument("--floors", default="0.95:0.3,0.9:0.3")
    ap.add_argument("--max-cost-share", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    floors = [(float(f), float(s)) for f, s in (x.split(":") for x in args.floors.split(",") if x)]
    rng = random.Random(args.seed)
    tasks = {}
    with open(args.trace) as f, open(args.out, "w", newline="") as out:
        w = csv.writer(out, lineterminator="\n")
        w.writerow(["timestamp_ms", "model", "task", "latency_slo_ms", "min_accuracy", "max_cost"])
        for row in csv.DictReader(f):
            model = row["model"]
            if model not in tasks:
                tasks[model] = task_of(args.repository, model)
            task, floor, max_cost = "", "", ""
            if tasks[model] and rng.random() < args.share:
                task, model = tasks[model], ""
                u = rng.random()
                for f_value, f_share in floors:
                    if u < f_share:
                        floor = "%g" % f_value
                        break
                    u -= f_share
                if rng.random() < args.max_cost_share:
                    max_cost = "1e-12"
            w.writerow([row["timestamp_ms"], model, task, row.get("latency_slo_ms", ""),
                        floor or row.get("min_accuracy", ""), max_cost])


if __name__ == "__main__":
    main()
