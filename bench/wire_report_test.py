#!/usr/bin/env python3
"""wire_report.py on a made-up run folder: shares are median somm / median
limit with each run's share listed, the server CPU share is the limit's CPU
per request over somm's, the client-cheaper verdict compares each run's
client and server CPU, resnet18 rows are shares of their own run's raw
figure, and the decode line turns µs per body into µs per MB."""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
COLUMNS = ("model wire connections run target qps p50_us p99_us requests errors "
           "client_cpu_us server_cpu_us").split()


def row(*values):
    return "\t".join(str(v) for v in values)


def main():
    lines = ["\t".join(COLUMNS)]
    # digits-mlp REST JSON at c=16: somm 10, 30, 20 against limits 40, 40, 50.
    for run, somm, limit in ((1, 10, 40), (2, 30, 40), (3, 20, 50)):
        lines.append(row("digits-mlp", "rest-json", 16, run, "somm", somm, 500, 2000, 1000, 0, 10, 40))
        lines.append(row("digits-mlp", "rest-json", 16, run, "limit", limit, 100, 800, 1000, 0, 12, 8))
    # resnet18: raw 80 then 100; somm 76/100 on JSON, 96/50 on binary, 90/95 on gRPC.
    for run, raw, js, binary, grpc in ((1, 80, 76, 96, 90), (2, 100, 100, 50, 95)):
        lines.append(row("resnet18", "raw", 1, run, "raw-libtorch-b8", raw, 1, 2, "-", 0, "-", "-"))
        lines.append(row("resnet18", "rest-json", 16, run, "somm", js, 1, 2, 10, 0, 5, 9))
        lines.append(row("resnet18", "rest-binary", 16, run, "somm", binary, 1, 2, 10, 0, 5, 9))
        lines.append(row("resnet18", "grpc", 16, run, "somm", grpc, 1, 2, 10, 0, 5, 9))
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "runs.tsv"), "w") as f:
            f.write("\n".join(lines) + "\n")
        with open(os.path.join(d, "json_decode.md"), "w") as f:
            f.write("| body | bytes | fast | general | ratio | MB/s |\n|---|---:|---:|---:|---:|---:|\n"
                    "| resnet_input.json | 2000000 | 7000.0 | 70000.0 | 10.0x | 286 |\n")
        out = subprocess.run([sys.executable, os.path.join(HERE, "wire_report.py"), d],
                             check=True, capture_output=True, text=True).stdout
    expect = [
        # median 20 / median 40; runs 25%, 75%, 40%; CPU share 8 / 40.
        "| REST JSON (nginx) | 16 | 20 | 40 | 50.0% (25, 75, 40) | 2.00 | 0.80 | 10.0 / 12.0 "
        "| 40.0 / 8.0 | 20.0% | yes / no |",
        "| 1 | 80.0 | 76.0 | 95.0% | 96.0 | 120.0% | 90.0 | 112.5% |",
        "| 2 | 100.0 | 100.0 | 100.0% | 50.0 | 50.0% | 95.0 | 95.0% |",
        "At least 95% of raw libtorch on every wire in every run: no.",
        "**3,500 µs per MB**",
    ]
    missing = [e for e in expect if e not in out]
    if missing:
        sys.exit("wire_report.py printed:\n" + out + "\nmissing:\n" + "\n".join(missing))
    print("wire_report_test: ok")


if __name__ == "__main__":
    main()
