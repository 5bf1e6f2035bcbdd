#!/usr/bin/python3
"""Predicted against reported cost of task queries (bench/cost_agreement.sh).

`report`: the JSON lines build/bench/bench_cost_queries wrote (one per
answer; the file's name starts with its protocol), per protocol and
variant: count, median, p99 and max of reported / predicted cost, the first
answer's and the largest of the first 16 (the queries right after the
variant loaded), and PASS when p99 <= the band.
"""
import argparse
import json
import sys


def quantile(sorted_values, q):
    # The nearest rank: the value below which a share q of them lie.
    idx = min(len(sorted_values) - 1, max(0, int(-(-q * len(sorted_values) // 1)) - 1))
    return sorted_values[idx]


def report(files, band):
    groups = {}
    errors = 0
    for f in files:
        proto = f.rsplit("/", 1)[-1].split("-", 1)[0]
        for line in open(f):
            row = json.loads(line)
            if "error" in row:
                errors += 1
                continue
            if not row.get("predicted") or row.get("reported") is None:
                continue
            # The measured figure when the reported one was capped at max_cost.
            reported = row["measured"] if row.get("measured") else row["reported"]
            key = (proto, row["variant"] + "@" + str(row["hardware"]))
            groups.setdefault(key, []).append((row["i"], reported / row["predicted"]))
    print(f"{'protocol':<8} {'variant':<34} {'count':>5} {'median':>7} {'p99':>7} {'max':>7} "
          f"{'first':>7} {'max1-16':>7}  p99<={band:g}")
    failed = 0
    for (proto, variant), rows in sorted(groups.items()):
        ratios = sorted(r for _, r in rows)
        p99 = quantile(ratios, 0.99)
        ok = p99 <= band
        failed += not ok
        print(f"{proto:<8} {variant:<34} {len(ratios):>5} {quantile(ratios, 0.5):>7.2f} "
              f"{p99:>7.2f} {ratios[-1]:>7.2f} {rows[0][1]:>7.2f} {max(r for _, r in rows[:16]):>7.2f}  "
              f"{'PASS' if ok else 'FAIL'}")
    for proto in sorted({p for p, _ in groups}):
        ratios = sorted(r for (p, _), rows in groups.items() if p == proto for _, r in rows)
        print(f"{proto:<8} {'(all)':<34} {len(ratios):>5} {quantile(ratios, 0.5):>7.2f} "
              f"{quantile(ratios, 0.99):>7.2f} {ratios[-1]:>7.2f}")
    if errors:
        print(f"errors: {errors} queries failed")
    print("result:", "PASS" if failed == 0 and errors == 0 and groups else "FAIL")
    return 0 if failed == 0 and errors == 0 and groups else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("report")
    r.add_argument("--band", type=float, default=1.5)
    r.add_argument("files", nargs="+")
    a = ap.parse_args()
    return report(a.files, a.band)


if __name__ == "__main__":
    sys.exit(main())
