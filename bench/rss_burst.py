#!/usr/bin/env python3
"""RSS of a somm server before, during and after a burst of concurrent
maximum-size hostile REST bodies: well-formed JSON queries whose `data`
holds far more numbers than their `shape` declares (the security review's
60 MB body that raised one server's RSS by 1.6 GB and kept it).

Usage: rss_burst.py --port P --pid PID [--bodies 4] [--mb 60] [--settle 30]
Prints one line per phase: idle, peak (sampled every 20 ms), and `settle`
seconds after the last answer; then a JSON line of the same figures.
Standard library only (Debian's /usr/bin/python3).
"""
import argparse
import http.client
import json
import threading
import time


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


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--pid", type=int, required=True)
    p.add_argument("--model", default="digits-mlp")
    p.add_argument("--bodies", type=int, default=4)
    p.add_argument("--mb", type=float, default=60)
    p.add_argument("--settle", type=float, default=30)
    a = p.parse_args()
    body = hostile_body(a.mb)
    idle = rss_mib(a.pid)
    statuses = []
    lock = threading.Lock()

    def send():
        c = http.client.HTTPConnection("127.0.0.1", a.port, timeout=300)
        c.request("POST", f"/v2/models/{a.model}/infer", body, {"Content-Type": "application/json"})
        r = c.getresponse()
        r.read()
        with lock:
            statuses.append(r.status)
        c.close()

    threads = [threading.Thread(target=send) for _ in range(a.bodies)]
    peak = idle
    start = time.time()
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        peak = max(peak, rss_mib(a.pid))
        time.sleep(0.02)
    answered_s = time.time() - start
    time.sleep(a.settle)
    after = rss_mib(a.pid)
    print(f"bodies: {a.bodies} x {len(body) / 1e6:.1f} MB, answered {sorted(statuses)} in {answered_s:.1f} s")
    print(f"RSS idle {idle:.0f} MiB, peak {peak:.0f} MiB, {a.settle:.0f} s after {after:.0f} MiB")
    print(json.dumps({"idle_mib": round(idle), "peak_mib": round(peak), "after_mib": round(after),
                      "statuses": sorted(statuses), "body_mb": round(len(body) / 1e6, 1)}))


if __name__ == "__main__":
    main()
