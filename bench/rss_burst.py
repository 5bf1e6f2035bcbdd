#!/usr/bin/env python3
"""RSS of a somm server before, during and after a burst of concurrent
maximum-size hostile bodies.

REST (the default): well-formed JSON queries whose `data` holds far more
numbers than their `shape` declares (the security review's 60 MB body that
raised one server's RSS by 1.6 GB and kept it). gRPC (`--protocol grpc`):
ModelInfer messages of as many raw bytes against a shape of [1,64], sent by
build/bench_grpc_burst (bench/grpc_burst.cc), which this script runs while
it samples. `--key` sends an API key on either; without one, a server with
`--auth keys` refuses the burst before reading it.

Usage: rss_burst.py --port P --pid PID [--protocol rest|grpc] [--bodies 4]
         [--mb 60] [--settle 30] [--key somm_...] [--grpc-client PATH]
Prints one line per phase: idle, peak (sampled every 20 ms), and `settle`
seconds after the last answer; then a JSON line of the same figures.
Standard library only (Debian's /usr/bin/python3).
"""
import argparse
import http.client
import json
import os
import subprocess
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


def hostile_body(mb):
    # 64 numbers are declared; about mb MB of them are sent.
    count = int(mb * 1024 * 1024 / len("0.123456,"))
    data = ",".join(["0.123456"] * count)
    return ('{"inputs":[{"name":"pixels","datatype":"FP32","shape":[1,64],"data":[' + data + "]}]}").encode()


def rest_burst(a, body, statuses, lock):
    """Sends the REST bodies from threads of their own; returns them."""
    headers = {"Content-Type": "application/json"}
    if a.key:
        headers["Authorization"] = "Bearer " + a.key

    def send():
        try:
            c = http.client.HTTPConnection("127.0.0.1", a.port, timeout=300)
            c.request("POST", f"/v2/models/{a.model}/infer", body, headers)
            r = c.getresponse()
            r.read()
            status = r.status
            c.close()
        except OSError as e:  # refused early and closed while still sending
            status = type(e).__name__
        with lock:
            statuses.append(status)

    threads = [threading.Thread(target=send) for _ in range(a.bodies)]
    for t in threads:
        t.start()
    return threads


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--pid", type=int, required=True)
    p.add_argument("--protocol", choices=["rest", "grpc"], default="rest")
    p.add_argument("--model", default="digits-mlp")
    p.add_argument("--bodies", type=int, default=4)
    p.add_argument("--mb", type=float, default=60)
    p.add_argument("--settle", type=float, default=30)
    p.add_argument("--key", default="")
    p.add_argument("--grpc-client", default=os.path.join(ROOT, "build", "bench_grpc_burst"))
    a = p.parse_args()
    idle = rss_mib(a.pid)
    statuses = []
    lock = threading.Lock()
    start = time.time()
    if a.protocol == "rest":
        body = hostile_body(a.mb)
        size_mb = len(body) / 1e6
        threads = rest_burst(a, body, statuses, lock)
        alive = lambda: any(t.is_alive() for t in threads)  # noqa: E731
    else:
        cmd = [a.grpc_client, "--target", f"127.0.0.1:{a.port}", "--bodies", str(a.bodies),
               "--mb", str(a.mb), "--model", a.model]
        if a.key:
            cmd += ["--key", a.key]
        client = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        alive = lambda: client.poll() is None  # noqa: E731
    peak = idle
    while alive():
        peak = max(peak, rss_mib(a.pid))
        time.sleep(0.02)
    answered_s = time.time() - start
    if a.protocol == "grpc":
        result = json.loads(client.stdout.read().strip().splitlines()[-1])
        statuses = result["codes"]
        size_mb = result["message_mb"]
    time.sleep(a.settle)
    after = rss_mib(a.pid)
    print(f"{a.protocol}: {a.bodies} x {size_mb:.1f} MB, answered {sorted(map(str, statuses))} "
          f"in {answered_s:.1f} s")
    print(f"RSS idle {idle:.0f} MiB, peak {peak:.0f} MiB, {a.settle:.0f} s after {after:.0f} MiB")
    print(json.dumps({"protocol": a.protocol, "idle_mib": round(idle), "peak_mib": round(peak),
                      "after_mib": round(after), "statuses": sorted(map(str, statuses)),
                      "body_mb": round(size_mb, 1), "answered_s": round(answered_s, 1)}))


if __name__ == "__main__":
    main()
