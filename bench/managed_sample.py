#!/usr/bin/python3
"""Once a second, what a somm server holds: replicas, memory, cold starts.

Usage: managed_sample.py --pid PID --metrics-url URL --http-url URL --out samples.jsonl
                         [--interval-s 1]

Each line of --out is one JSON sample:
  {"t": unix seconds,
   "rss_kb": VmRSS of PID, "hwm_kb": VmHWM of PID (the kernel's peak RSS),
   "cpu_s": user + system CPU seconds of PID so far,
   "metrics": {series: value} for the families below, as Prometheus names
              them (e.g. 'somm_instances{hardware="cpu2",model="m",...}'),
   "index": [{"name", "version", "state"}]  (only when /metrics has no
              replica gauge: the repository index, the last fallback)}
Families kept: somm_instances, somm_instances_loaded,
somm_instance_seconds_total, somm_cold_starts_total, somm_memory_used_bytes,
somm_memory_budget_bytes, somm_control_actions_total, somm_arrival_rate_qps,
somm_forecast_rate_qps. A failed scrape records "metrics": null and goes on.
It stops when PID exits or on SIGTERM/SIGINT. Standard library only.
"""
import argparse
import json
import os
import re
import signal
import sys
import time
import urllib.request

FAMILIES = ("somm_instances", "somm_instances_loaded", "somm_instance_seconds_total",
            "somm_cold_starts_total", "somm_memory_used_bytes", "somm_memory_budget_bytes",
            "somm_control_actions_total", "somm_arrival_rate_qps", "somm_forecast_rate_qps")
SERIES = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)")
CLK_TCK = os.sysconf("SC_CLK_TCK")

stop = False


def on_signal(signum, frame):
    global stop
    stop = True


def scrape(url):
    with urllib.request.urlopen(url, timeout=0.8) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        m = SERIES.match(line)
        if m and m.group(1) in FAMILIES:
            out[m.group(1) + (m.group(2) or "")] = float(m.group(3))
    return out


def repository_index(http_url):
    req = urllib.request.Request(http_url.rstrip("/") + "/v2/repository/index", data=b"{}",
                                 method="POST", headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=0.8) as r:
        return [{"name": m.get("name"), "version": m.get("version"), "state": m.get("state")}
                for m in json.loads(r.read().decode())]


def proc_status(pid):
    rss = hwm = None
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
            elif line.startswith("VmHWM:"):
                hwm = int(line.split()[1])
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    cpu_s = (int(fields[11]) + int(fields[12])) / CLK_TCK
    return rss, hwm, cpu_s


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pid", type=int, required=True)
    ap.add_argument("--metrics-url", required=True, help="e.g. http://127.0.0.1:8002/metrics")
    ap.add_argument("--http-url", required=True, help="e.g. http://127.0.0.1:8000")
    ap.add_argument("--out", required=True)
    ap.add_argument("--interval-s", type=float, default=1.0)
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    next_t = time.time()
    with open(args.out, "w") as out:
        while not stop:
            sample = {"t": round(time.time(), 3)}
            try:
                sample["rss_kb"], sample["hwm_kb"], sample["cpu_s"] = proc_status(args.pid)
            except (OSError, IndexError, ValueError):
                break  # the server is gone
            try:
                sample["metrics"] = scrape(args.metrics_url)
            except (OSError, ValueError) as e:
                sample["metrics"] = None
                sample["error"] = str(e)
            m = sample["metrics"] or {}
            if not any(k.startswith("somm_instances") and not k.startswith("somm_instance_")
                       for k in m):
                try:
                    sample["index"] = repository_index(args.http_url)
                except (OSError, ValueError) as e:
                    sample["index_error"] = str(e)
            out.write(json.dumps(sample, sort_keys=True) + "\n")
            out.flush()
            next_t += args.interval_s
            delay = next_t - time.time()
            if delay > 0:
                time.sleep(delay)
            else:
                next_t = time.time()
    return 0


if __name__ == "__main__":
    sys.exit(main())
