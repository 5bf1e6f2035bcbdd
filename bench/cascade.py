#!/usr/bin/python3
"""The demo cascade against digits-cnn alone (docs/cascades.md).

Sends every sample of the digits' held-out split (models/demo/digits-cnn/1/
validation, 450 samples), one query each, to a live somm serve: to the
pipeline digits-cascade, to digits-cnn alone and to digits-logistic alone.
Reports each one's top-1 accuracy, the share of cascade queries that reached
digits-cnn (its `stage` output), and the model compute each spent: the sum
of compute_us from the answers' explanations (for the cascade, of both
stages'), with the compute the cascade saved against digits-cnn alone, and
the charge each answer reports (cost_usd: the hardware's price for the
compute time, from the models' profiles and the price list).

The threshold was chosen, when the server loaded the pipeline, on the
validation data, which for the demo is this same held-out split: the
cascade's accuracy here is the one it was calibrated for. For a figure on
samples the threshold did not see, the script also cross-fits the same
rule (the lowest escalation whose accuracy meets the pipeline's
min_accuracy) on one half of the split and applies it to the other, both
ways, from the two models' own answers.

Usage: somm serve --model-repository models/demo &
       /usr/bin/python3 bench/cascade.py [--url 127.0.0.1:8000] [--repo models/demo]
                                         [--json-file out.json]
Standard library only.
"""
import argparse
import http.client
import json
import math
import re
import statistics
import struct
import sys

PIPELINE = "digits-cascade"
CHEAP, BEST = "digits-logistic", "digits-cnn"


def load_split(repo):
    folder = f"{repo}/{BEST}/1/validation"
    with open(f"{folder}/meta.json") as f:
        meta = json.load(f)
    n, width = meta["count"], meta["shape"][0]
    with open(f"{folder}/inputs.bin", "rb") as f:
        flat = struct.unpack(f"<{n * width}f", f.read())
    with open(f"{folder}/labels.bin", "rb") as f:
        labels = list(struct.unpack(f"<{n}q", f.read()))
    return [list(flat[i * width:(i + 1) * width]) for i in range(n)], labels


class Client:
    def __init__(self, url):
        host, _, port = url.replace("http://", "").partition(":")
        self.conn = http.client.HTTPConnection(host, int(port or 8000), timeout=60)

    def get(self, path):
        self.conn.request("GET", path)
        r = self.conn.getresponse()
        body = r.read()
        if r.status != 200:
            sys.exit(f"GET {path}: {r.status} {body[:300]!r}")
        return json.loads(body)

    def infer(self, model, pixels):
        body = json.dumps({"inputs": [{"name": "pixels", "datatype": "FP32", "shape": [1, 64],
                                       "data": pixels}]})
        self.conn.request("POST", f"/v2/models/{model}/infer", body,
                          {"Content-Type": "application/json"})
        r = self.conn.getresponse()
        data = r.read()
        if r.status != 200:
            sys.exit(f"{model}: {r.status} {data[:300]!r}")
        return json.loads(data)


def output(answer, name):
    for out in answer["outputs"]:
        if out["name"] == name:
            return out["data"]
    raise KeyError(name)


def compute_us(text):
    return sum(int(v) for v in re.findall(r"\bcompute_us=(\d+)", text))


def cost_usd(text):
    return sum(float(v) for v in re.findall(r"\bcost_usd=([0-9.eE+-]+)", text))


def argmax(row):
    return max(range(len(row)), key=lambda c: (row[c], -c))


def top_probability(row):
    top = max(row)
    exps = [math.exp(v - top) for v in row]
    return max(exps) / sum(exps)


def choose(conf, cheap_right, best_right, floor):
    """The lowest escalation whose accuracy meets floor: the rule somm applies."""
    n = len(conf)
    order = sorted(range(n), key=lambda s: conf[s])
    right = sum(cheap_right)
    values = sorted(set(conf))
    if right >= floor * n - 1e-9:
        return 0.0
    i = 0
    for j, v in enumerate(values):
        while i < n and conf[order[i]] <= v:
            s = order[i]
            right += best_right[s] - cheap_right[s]
            i += 1
        if right >= floor * n - 1e-9:
            return (v + values[j + 1]) / 2 if j + 1 < len(values) else math.nextafter(v, 2.0)
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--url", default="127.0.0.1:8000")
    ap.add_argument("--repo", default="models/demo")
    ap.add_argument("--json-file")
    args = ap.parse_args()

    pixels, labels = load_split(args.repo)
    n = len(labels)
    c = Client(args.url)
    meta = c.get(f"/v2/models/{PIPELINE}")
    calibration = meta["parameters"].get("cascade_classify", "")
    floor = float(re.search(r"min_accuracy=([0-9.]+)", calibration).group(1))

    rows = []
    for i in range(n):
        a = c.infer(PIPELINE, pixels[i])
        cheap = c.infer(CHEAP, pixels[i])
        best = c.infer(BEST, pixels[i])
        rows.append({
            "cascade_class": output(a, "class")[0],
            "stage": output(a, "stage")[0],
            "cascade_us": compute_us(a["parameters"]["somm_step_classify"]),
            "cascade_usd": cost_usd(a["parameters"]["somm_step_classify"]),
            "cascade_server_us": int(re.search(r"server_us=(\d+)", a["parameters"]["somm"]).group(1)),
            "cheap_logits": output(cheap, "logits"),
            "cheap_us": compute_us(cheap["parameters"]["somm"]),
            "cheap_usd": cost_usd(cheap["parameters"]["somm"]),
            "best_logits": output(best, "logits"),
            "best_us": compute_us(best["parameters"]["somm"]),
            "best_usd": cost_usd(best["parameters"]["somm"]),
        })

    def acc(key):
        return sum(r[key] == labels[i] for i, r in enumerate(rows)) / n

    for r in rows:
        r["cheap_class"] = argmax(r["cheap_logits"])
        r["best_class"] = argmax(r["best_logits"])
    reached = sum(r["stage"] == 1 for r in rows)
    cascade_us = sum(r["cascade_us"] for r in rows)
    best_us = sum(r["best_us"] for r in rows)
    cheap_us = sum(r["cheap_us"] for r in rows)

    # Cross-fitted: the threshold chosen on one half, applied to the other.
    conf = [top_probability(r["cheap_logits"]) for r in rows]
    cheap_right = [int(r["cheap_class"] == labels[i]) for i, r in enumerate(rows)]
    best_right = [int(r["best_class"] == labels[i]) for i, r in enumerate(rows)]
    cross_right = cross_reached = 0
    thresholds = []
    for fit, apply in ((0, 1), (1, 0)):
        on = [i for i in range(n) if i % 2 == fit]
        t = choose([conf[i] for i in on], [cheap_right[i] for i in on],
                   [best_right[i] for i in on], floor)
        thresholds.append(t)
        for i in range(n):
            if i % 2 != apply:
                continue
            up = t is None or conf[i] < t
            cross_reached += up
            cross_right += best_right[i] if up else cheap_right[i]

    result = {
        "samples": n,
        "calibration": calibration,
        "accuracy": {"cascade": acc("cascade_class"), BEST: acc("best_class"), CHEAP: acc("cheap_class")},
        "reached_second_share": reached / n,
        "compute_us_sum": {"cascade": cascade_us, BEST: best_us, CHEAP: cheap_us},
        "compute_saved_vs_cnn": 1 - cascade_us / best_us if best_us else None,
        "cost_usd_sum": {"cascade": sum(r["cascade_usd"] for r in rows),
                         BEST: sum(r["best_usd"] for r in rows),
                         CHEAP: sum(r["cheap_usd"] for r in rows)},
        "median_server_us_cascade": statistics.median(r["cascade_server_us"] for r in rows),
        "median_compute_us": {BEST: statistics.median(r["best_us"] for r in rows),
                              CHEAP: statistics.median(r["cheap_us"] for r in rows)},
        "cross_fit": {"thresholds": thresholds, "accuracy": cross_right / n,
                      "reached_second_share": cross_reached / n},
    }
    print(f"held-out digits: {n} samples, one query each; calibration: {calibration}")
    print(f"accuracy: cascade {result['accuracy']['cascade']:.4f}, {BEST} alone "
          f"{result['accuracy'][BEST]:.4f}, {CHEAP} alone {result['accuracy'][CHEAP]:.4f}")
    print(f"reached {BEST}: {reached}/{n} = {reached / n:.4f}")
    print(f"model compute (sum of compute_us): cascade {cascade_us} us, {BEST} alone {best_us} us, "
          f"{CHEAP} alone {cheap_us} us; saved against {BEST}: "
          f"{result['compute_saved_vs_cnn']:.1%}")
    usd = result["cost_usd_sum"]
    print(f"charged (sum of cost_usd): cascade {usd['cascade']:.3g}, {BEST} alone {usd[BEST]:.3g}, "
          f"{CHEAP} alone {usd[CHEAP]:.3g}; saved against {BEST}: "
          f"{1 - usd['cascade'] / usd[BEST]:.1%}")
    print(f"median compute_us per query: {BEST} {result['median_compute_us'][BEST]}, "
          f"{CHEAP} {result['median_compute_us'][CHEAP]}; cascade server_us median "
          f"{result['median_server_us_cascade']}")
    print(f"cross-fitted (threshold chosen on one half, applied to the other): accuracy "
          f"{result['cross_fit']['accuracy']:.4f}, reached {BEST} "
          f"{result['cross_fit']['reached_second_share']:.4f}, thresholds {thresholds}")
    if args.json_file:
        with open(args.json_file, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
