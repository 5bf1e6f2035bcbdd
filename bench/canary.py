#!/usr/bin/python3
"""Canary runs (docs/rollouts.md): somm serve with digits-mlp at version 1,
a steady client load of unversioned queries, and a version 2 rolled out
while it runs. Scenarios:

  wrong         v2 answers one class off (its output rows rolled): split 10%
  wrong-shadow  the same v2 as a shadow: clients only ever get v1's answers
  slow          v2 answers right but does ~20x the work per query: split 10%
  good          v2 is v1's file: promoted step by step to 100%

For each it reports the client's queries (sent, failed, answered per
version), the canary's answers before the rollout ended, and the rollout's
timeline (seconds since it started, event, share, reason) as the server
logged it. The load is N client threads on keep-alive connections, each
sending one query at a time with a pause, from held-out digits.

Usage: bench/canary.py [--somm build/somm] [--scenarios wrong,slow,good,wrong-shadow]
                       [--qps 100] [--timeout-s 240]
Run by bench/canary.sh. torch (Debian's /usr/bin/python3) builds the models.
"""
import argparse
import http.client
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEMO = os.path.join(ROOT, "models", "demo")
BOUNDS = {"min_queries_per_step": 50, "min_queries_to_judge": 20, "min_step_s": 5}


def make_versions(repo):
    """digits-mlp/1 (the demo's), and the v2 of each scenario beside it."""
    v1 = os.path.join(DEMO, "digits-mlp", "1")
    made = os.path.join(repo, "_versions")
    os.makedirs(made)
    wrong = torch.jit.load(os.path.join(v1, "model.pt"))
    with torch.no_grad():
        for _, p in wrong.named_parameters():
            if p.dim() >= 1 and p.shape[0] == 10:
                p.copy_(torch.roll(p.clone(), 1, 0))
    os.makedirs(os.path.join(made, "wrong"))
    wrong.save(os.path.join(made, "wrong", "model.pt"))

    class Slow(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner
            self.register_buffer("m", torch.randn(384, 384, generator=torch.Generator().manual_seed(7)) / 20)

        def forward(self, pixels: torch.Tensor) -> torch.Tensor:
            acc = self.m
            for _ in range(6):
                acc = torch.tanh(acc @ self.m)
            return self.inner(pixels) + 0.0 * acc.sum()

    slow = torch.jit.script(Slow(torch.jit.load(os.path.join(v1, "model.pt"))))
    os.makedirs(os.path.join(made, "slow"))
    slow.save(os.path.join(made, "slow", "model.pt"))
    for name in ("wrong", "slow"):
        os.symlink(os.path.join(v1, "validation"), os.path.join(made, name, "validation"))
    return {"wrong": os.path.join(made, "wrong"), "wrong-shadow": os.path.join(made, "wrong"),
            "slow": os.path.join(made, "slow"), "good": v1}


def held_out_digits():
    meta = json.load(open(os.path.join(DEMO, "digits-mlp", "1", "validation", "meta.json")))
    name = meta.get("files", {}).get("inputs", "inputs.bin")
    raw = open(os.path.join(DEMO, "digits-mlp", "1", "validation", name), "rb").read()
    n = len(raw) // (64 * 4)
    return [list(struct.unpack_from("<64f", raw, i * 256)) for i in range(n)]


class Load:
    """Client threads sending unversioned digits-mlp queries until stopped."""

    def __init__(self, port, digits, qps, threads=4):
        self.port, self.digits, self.pause = port, digits, threads / qps
        self.answers = []  # (t, version or None, latency_ms)
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self.run, args=(i,)) for i in range(threads)]

    def run(self, k):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        i = k
        while not self.stop.is_set():
            body = json.dumps({"inputs": [{"name": "pixels", "datatype": "FP32", "shape": [1, 64],
                                           "data": self.digits[i % len(self.digits)]}]})
            t0 = time.time()
            version = None
            try:
                conn.request("POST", "/v2/models/digits-mlp/infer", body,
                             {"Content-Type": "application/json"})
                r = conn.getresponse()
                data = r.read()
                if r.status == 200:
                    version = json.loads(data)["model_version"]
            except (OSError, http.client.HTTPException):
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
            with self.lock:
                self.answers.append((t0, version, (time.time() - t0) * 1000))
            i += len(self.threads)
            time.sleep(self.pause)

    def __enter__(self):
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for t in self.threads:
            t.join()


def call(port, method, path, body=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    conn.request(method, path, json.dumps(body) if body is not None else None,
                 {"Content-Type": "application/json"})
    r = conn.getresponse()
    return r.status, json.loads(r.read() or b"{}")


def serve(somm, repo, log):
    proc = subprocess.Popen([somm, "serve", "--repo", repo, "--http-port", "0", "--grpc-port", "0",
                             "--metrics-port", "0", "--log-level", "info"],
                            stdout=subprocess.PIPE, stderr=log, text=True)
    for line in proc.stdout:
        m = re.search(r"http=(\d+) grpc=(\d+) metrics=(\d+)", line)
        if m:
            return proc, int(m.group(1)), int(m.group(3))
    raise SystemExit("somm serve did not start; see " + log.name)


def wait_profiled(port, timeout_s=300):
    """Until digits-mlp's variant job is done (profiles measure latency)."""
    end = time.time() + timeout_s
    while time.time() < end:
        status, body = call(port, "GET", "/v2/repository/models/digits-mlp/variants")
        if status == 200 and body.get("state") in ("READY", "FAILED"):
            return
        time.sleep(1)


def scenario(somm, name, source, digits, args, work):
    repo = os.path.join(work, name)
    os.makedirs(os.path.join(repo, "digits-mlp"))
    shutil.copy(os.path.join(DEMO, "digits-mlp", "model.yaml"), os.path.join(repo, "digits-mlp"))
    os.symlink(os.path.join(DEMO, "digits-mlp", "1"), os.path.join(repo, "digits-mlp", "1"))
    with open(os.path.join(work, name + ".log"), "w") as log:
        proc, port, metrics = serve(somm, repo, log)
        try:
            wait_profiled(port)
            os.symlink(source, os.path.join(repo, "digits-mlp", "2"))
            change = {"version": "2", "bounds": BOUNDS}
            if name == "wrong-shadow":
                change.update(mode="shadow", percent=100)
            else:
                change["percent"] = 10
            with Load(port, digits, args.qps) as load:
                time.sleep(3)  # the load settles on v1
                started = time.time()
                status, view = call(port, "POST", "/v2/repository/models/digits-mlp/rollout", change)
                if status != 200:
                    raise SystemExit(f"{name}: rollout refused: {view}")
                judged = view  # the last view of the canary's step before it ended
                while time.time() - started < args.timeout_s:
                    status, view = call(port, "GET", "/v2/repository/models/digits-mlp/rollout")
                    if view.get("state") != "canary":
                        break
                    judged = view
                    time.sleep(0.25)
                ended = time.time()
                time.sleep(3)  # and after it
            scrape = subprocess.run(["curl", "-s", f"127.0.0.1:{metrics}/metrics"], capture_output=True,
                                    text=True).stdout
        finally:
            proc.terminate()
            proc.wait(timeout=60)
    answers = load.answers
    during = [a for a in answers if started <= a[0] < ended]
    report = {
        "scenario": name, "state": view.get("state"), "seconds": round(ended - started, 1),
        "queries": len(answers), "failed": sum(1 for a in answers if a[1] is None),
        "by_version": {v: sum(1 for a in answers if a[1] == v) for v in ("1", "2")},
        "canary_answers_during": sum(1 for a in during if a[1] == "2"),
        "queries_during": len(during),
        "canary_window": judged.get("window", {}).get("canary", {}),
        "rollbacks_metric": sum(float(l.split()[-1]) for l in scrape.splitlines()
                                if l.startswith("somm_canary_rollbacks_total{")),
        "timeline": [{"t_s": round((e["unix_ms"] / 1000.0) - started, 2), "event": e["event"],
                      "percent": e["percent"], "reason": e["reason"]} for e in view.get("history", [])],
    }
    return report


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--somm", default=os.path.join(ROOT, "build", "somm"))
    ap.add_argument("--scenarios", default="wrong,wrong-shadow,slow,good")
    ap.add_argument("--qps", type=float, default=100)
    ap.add_argument("--timeout-s", type=float, default=240)
    ap.add_argument("--json", help="write the reports here too")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="somm-canary.")
    try:
        sources = make_versions(work)
        digits = held_out_digits()
        reports = []
        for name in args.scenarios.split(","):
            r = scenario(args.somm, name, sources[name], digits, args, work)
            reports.append(r)
            print(f"== {name}: {r['state']} after {r['seconds']} s; client queries {r['queries']}, "
                  f"failed {r['failed']}, answered by v1 {r['by_version']['1']}, by v2 "
                  f"{r['by_version']['2']}; during the rollout {r['queries_during']} queries, "
                  f"{r['canary_answers_during']} answered by the canary; "
                  f"somm_canary_rollbacks_total {r['rollbacks_metric']:.0f}")
            w = r["canary_window"]
            print(f"   canary's step as last read before the end: {w.get('answered', 0)} answered, {w.get('failed', 0)} failed, "
                  f"mean {w.get('mean_latency_ms', 0):.2f} ms, compared {w.get('compared', 0)}, "
                  f"differed {w.get('disagreed', 0)}, held-out top-1 {w.get('accuracy', '-')}")
            for e in r["timeline"]:
                print(f"   t={e['t_s']:7.2f} s  {e['event']:<11} {e['percent']:3d}%  {e['reason']}")
            sys.stdout.flush()
        if args.json:
            json.dump(reports, open(args.json, "w"), indent=1)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
