#!/usr/bin/python3
"""Predicted against reported cost of task queries (bench/cost_agreement.sh).

`send`: N task queries per accuracy floor to one `somm serve`, one after
another, each asking for the full explanation (somm_explain=full), over REST
(http.client, one keep-alive connection) or gRPC (`somm infer -i grpc`, one
process per query); one JSON line per answer with the chosen variant, the
predicted and reported cost, the compute time and the batch.

`report`: the lines of every run, per protocol and variant: count, median,
p99 and max of reported / predicted cost, the first answer's and the largest
of the first 16 (the queries right after the variant loaded), and PASS when
p99 <= the band.
"""
import argparse
import http.client
import json
import subprocess
import sys


def params(floor):
    p = {"somm_explain": "full"}
    if floor != "none":
        p["min_accuracy"] = float(floor)
    return p


def send_rest(port, task, floor, n, body, out):
    body = dict(body)
    body["parameters"] = params(floor)
    data = json.dumps(body)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    for i in range(n):
        conn.request("POST", f"/v2/tasks/{task}/infer", data, {"Content-Type": "application/json"})
        r = conn.getresponse()
        text = r.read()
        if r.status != 200:
            out.write(json.dumps({"i": i, "error": f"{r.status} {text[:200]!r}"}) + "\n")
            continue
        write(out, i, json.loads(text)["parameters"])


def send_grpc(somm, port, task, floor, n, body_file, out):
    args = [somm, "infer", "--task", task, body_file, "-i", "grpc", "--url", f"127.0.0.1:{port}",
            "--top-k", "1"]
    for k, v in params(floor).items():
        args += ["--param", f"{k}={v}"]
    for i in range(n):
        r = subprocess.run(args, capture_output=True, text=True)
        if r.returncode != 0:
            out.write(json.dumps({"i": i, "error": r.stderr.strip()[:200]}) + "\n")
            continue
        p = {}
        for line in r.stdout.splitlines():
            key, sep, value = line.strip().partition(" = ")
            if sep and key.startswith("somm_"):
                try:
                    p[key] = float(value)
                except ValueError:
                    p[key] = value
        write(out, i, p)


def write(out, i, p):
    row = {"i": i, "variant": p.get("somm_variant"), "hardware": p.get("somm_hardware"),
           "decision": p.get("somm_decision"), "batch": p.get("somm_batch_size"),
           "compute_us": p.get("somm_compute_us"), "predicted": p.get("somm_predicted_cost_usd"),
           "reported": p.get("somm_cost_usd"), "measured": p.get("somm_measured_cost_usd"),
           "over": p.get("somm_cost_over_reason")}
    out.write(json.dumps(row) + "\n")
    out.flush()


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
    s = sub.add_parser("send")
    s.add_argument("--protocol", choices=["rest", "grpc"], required=True)
    s.add_argument("--port", type=int, required=True)
    s.add_argument("--somm", default="build/somm")
    s.add_argument("--task", required=True)
    s.add_argument("--floor", default="none")
    s.add_argument("--queries", type=int, default=300)
    s.add_argument("--body", required=True)
    s.add_argument("--out", required=True)
    r = sub.add_parser("report")
    r.add_argument("--band", type=float, default=1.5)
    r.add_argument("files", nargs="+")
    a = ap.parse_args()
    if a.cmd == "report":
        return report(a.files, a.band)
    with open(a.out, "a") as out:
        if a.protocol == "rest":
            send_rest(a.port, a.task, a.floor, a.queries, json.load(open(a.body)), out)
        else:
            send_grpc(a.somm, a.port, a.task, a.floor, a.queries, a.body, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
