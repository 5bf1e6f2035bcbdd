#!/usr/bin/python3
"""The response cache on a skewed, repeated workload (docs/lifecycle.md):
resnet18 served twice by `somm serve`, with model.yaml's response_cache at a
small bound and without it, and the same client load against each: N
distinct random images, each query drawing one with Zipf popularity
(P(rank k) ~ 1/k^s), sent as binary tensors (the OIP binary extension) by C
client threads for D seconds on keep-alive connections.

Reports per side: queries per second, the client's p50/p99, the hit ratio
(somm_response_cache_{hits,misses}_total), the cache's bytes against its
bound (somm_response_cache_bytes) and evictions, the server's RSS, and the
server's own time for a hit against a miss (somm_server_us, medians).

Usage: bench/response_cache_zipf.py [--somm build/somm] [--images 200] [--zipf-s 1.0]
           [--max-mb 0.25] [--seconds 20] [--clients 4] [--rounds 1]
"""
import argparse
import http.client
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEMO = os.path.join(ROOT, "models", "demo")
IMAGE_BYTES = 3 * 224 * 224 * 4


def bodies(n, seed):
    rng = random.Random(seed)
    header = json.dumps({"inputs": [{"name": "image", "datatype": "FP32", "shape": [1, 3, 224, 224],
                                     "parameters": {"binary_data_size": IMAGE_BYTES}}]}).encode()
    out = []
    for _ in range(n):
        # Random bytes as small floats: a distinct input each (the cache
        # keys on the bytes), finite values (exponent bits kept low).
        raw = bytearray(rng.randbytes(IMAGE_BYTES))
        raw[3::4] = bytes(b & 0x3E for b in raw[3::4])
        out.append((header, bytes(raw)))
    return out


def zipf_ranks(n, s, count, seed):
    weights = [1.0 / (k ** s) for k in range(1, n + 1)]
    return random.Random(seed).choices(range(n), weights=weights, k=count)


def serve(somm, repo, log):
    proc = subprocess.Popen([somm, "serve", "--repo", repo, "--http-port", "0", "--grpc-port", "0",
                             "--metrics-port", "0", "--log-level", "warn", "--auto-variants", "false"],
                            stdout=subprocess.PIPE, stderr=log, text=True)
    for line in proc.stdout:
        m = re.search(r"http=(\d+) grpc=(\d+) metrics=(\d+)", line)
        if m:
            return proc, int(m.group(1)), int(m.group(3))
    raise SystemExit("somm serve did not start")


def metric(scrape, name):
    total = 0.0
    for line in scrape.splitlines():
        if line.startswith(name + "{") and 'model="resnet18"' in line:
            total += float(line.split()[-1])
    return total


def run_side(args, side, images, work):
    repo = os.path.join(work, side)
    os.makedirs(os.path.join(repo, "resnet18"))
    shutil.copy(os.path.join(DEMO, "resnet18", "model.yaml"), os.path.join(repo, "resnet18"))
    os.symlink(os.path.join(DEMO, "resnet18", "1"), os.path.join(repo, "resnet18", "1"))
    if side == "cache":
        with open(os.path.join(repo, "resnet18", "model.yaml"), "a") as f:
            f.write(f"\nresponse_cache: {{enable: true, max_mb: {args.max_mb}}}\n")
    with open(os.path.join(work, side + ".log"), "w") as log:
        proc, port, metrics = serve(args.somm, repo, log)
    try:
        while True:
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                c.request("GET", "/v2/models/resnet18/ready")
                if c.getresponse().status == 200:
                    break
            except OSError:
                pass
            time.sleep(0.5)
        results = []  # (latency_ms, hit, server_us)
        lock = threading.Lock()
        stop = time.time() + args.seconds

        def client(k):
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            for rank in zipf_ranks(len(images), args.zipf_s, 10 ** 6, seed=k):
                if time.time() >= stop:
                    break
                header, raw = images[rank]
                t0 = time.time()
                conn.request("POST", "/v2/models/resnet18/infer", header + raw,
                             {"Content-Type": "application/octet-stream",
                              "Inference-Header-Content-Length": str(len(header))})
                r = conn.getresponse()
                body = r.read()
                ms = (time.time() - t0) * 1000
                if r.status != 200:
                    raise SystemExit(f"query failed: {r.status} {body[:200]}")
                p = json.loads(body).get("parameters", {})
                with lock:
                    results.append((ms, bool(p.get("somm_cache_hit", False)), p.get("somm_server_us", 0)))

        threads = [threading.Thread(target=client, args=(k,)) for k in range(args.clients)]
        t0 = time.time()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.time() - t0
        scrape = subprocess.run(["curl", "-s", f"127.0.0.1:{metrics}/metrics"], capture_output=True,
                                text=True).stdout
        rss_kb = int(re.search(r"VmRSS:\s+(\d+)", open(f"/proc/{proc.pid}/status").read()).group(1))
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    lat = sorted(r[0] for r in results)
    hits = [r[2] for r in results if r[1]]
    misses = [r[2] for r in results if not r[1]]
    return {
        "side": side, "queries": len(results), "qps": len(results) / elapsed,
        "p50_ms": lat[len(lat) // 2], "p99_ms": lat[min(len(lat) - 1, int(len(lat) * 0.99))],
        "hit_ratio": len(hits) / len(results),
        "metric_hits": metric(scrape, "somm_response_cache_hits_total"),
        "metric_misses": metric(scrape, "somm_response_cache_misses_total"),
        "cache_bytes": metric(scrape, "somm_response_cache_bytes"),
        "cache_entries": metric(scrape, "somm_response_cache_entries"),
        "evictions": metric(scrape, "somm_response_cache_evictions_total"),
        "rss_mib": rss_kb / 1024,
        "server_us_hit": statistics.median(hits) if hits else None,
        "server_us_miss": statistics.median(misses) if misses else None,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--somm", default=os.path.join(ROOT, "build", "somm"))
    ap.add_argument("--images", type=int, default=200)
    ap.add_argument("--zipf-s", type=float, default=1.0)
    ap.add_argument("--max-mb", type=float, default=0.25)
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=1)
    args = ap.parse_args()
    images = bodies(args.images, seed=1)
    work = tempfile.mkdtemp(prefix="somm-cache-zipf.")
    print(f"resnet18, {args.images} distinct images, Zipf s={args.zipf_s}, {args.clients} clients, "
          f"{args.seconds:.0f} s per side, bound {args.max_mb} MiB")
    print("round side queries q/s p50_ms p99_ms hit_ratio hits misses cache_bytes bound_bytes "
          "entries evictions rss_mib server_us_hit server_us_miss")
    try:
        for rnd in range(1, args.rounds + 1):
            for side in ("cache", "none"):
                r = run_side(args, side, images, work)
                print(rnd, side, r["queries"], f"{r['qps']:.1f}", f"{r['p50_ms']:.1f}", f"{r['p99_ms']:.1f}",
                      f"{r['hit_ratio']:.3f}", int(r["metric_hits"]), int(r["metric_misses"]),
                      int(r["cache_bytes"]), int(args.max_mb * 1024 * 1024) if side == "cache" else "-",
                      int(r["cache_entries"]), int(r["evictions"]), f"{r['rss_mib']:.0f}",
                      r["server_us_hit"] if r["server_us_hit"] is not None else "-",
                      r["server_us_miss"] if r["server_us_miss"] is not None else "-", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
