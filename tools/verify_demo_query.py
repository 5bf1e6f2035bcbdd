#!/usr/bin/python3
"""Checks a running somm server against PyTorch on the demo repository's examples.

    /usr/bin/python3 tools/verify_demo_query.py [--url http://127.0.0.1:8000]
        [--repo models/demo] [--models digits-mlp,...] [--wait 30] [--imagenet]

For every digits model and every example digit (<repo>/.examples/digit_<c>.json,
written by tools/make_demo_repo.py) it POSTs the example, unchanged, to
/v2/models/<model>/infer (Open Inference Protocol v2, JSON), takes the argmax of
the returned `logits`, and compares it with the class that torch.jit.load gives
on the same TorchScript file (<repo>/<model>/<latest version>/model.pt) and the
same input, and with the true label. With --imagenet it does the same for
.examples/resnet_input.json on resnet18 and mobilenet_v3_small (random weights:
only agreement with torch means anything there).

Exit status: 0 when the server's class equals torch's for every query; 1 on any
mismatch or failed request; 2 when the server cannot be reached or the
repository is missing. A wrong answer relative to the TRUE label is reported but
is not a failure: the small models are allowed to be wrong, just not differently
from torch.
"""

import argparse
import glob
import json
import os
import sys
import time
import urllib.error
import urllib.request

IMAGENET_MODELS = ["resnet18", "mobilenet_v3_small"]


def http(method, url, body=None, timeout=30.0):
    """Returns (status, bytes). Raises urllib.error.URLError when unreachable."""
    req = urllib.request.Request(url, data=body, method=method)
    if body is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def wait_ready(base, seconds):
    deadline = time.monotonic() + seconds
    while True:
        try:
            status, _ = http("GET", base + "/v2/health/ready", timeout=2.0)
            if status == 200:
                return True
        except (urllib.error.URLError, OSError):
            pass
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.25)


def flatten(x):
    if isinstance(x, list):
        out = []
        for v in x:
            out.extend(flatten(v))
        return out
    return [x]


def latest_model_file(repo, model):
    versions = [d for d in os.listdir(os.path.join(repo, model)) if d.isdigit()
                and os.path.isfile(os.path.join(repo, model, d, "model.pt"))]
    if not versions:
        raise FileNotFoundError(f"{repo}/{model}: no <version>/model.pt")
    return os.path.join(repo, model, max(versions, key=int), "model.pt")


def argmax(values):
    return max(range(len(values)), key=lambda i: values[i])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000", help="server base URL")
    parser.add_argument("--repo", default="models/demo", help="demo model repository")
    parser.add_argument("--models", default="",
                        help="comma-separated digits models (default: all in expected.json)")
    parser.add_argument("--wait", type=float, default=0.0, metavar="SECONDS",
                        help="first wait up to this long for /v2/health/ready to answer 200")
    parser.add_argument("--timeout", type=float, default=30.0, help="per-request timeout, s")
    parser.add_argument("--imagenet", action="store_true",
                        help="also check resnet_input.json on the ImageNet models")
    args = parser.parse_args()

    base = args.url.rstrip("/")
    examples_dir = os.path.join(args.repo, ".examples")
    expected_path = os.path.join(examples_dir, "expected.json")
    if not os.path.isfile(expected_path):
        print(f"error: {expected_path} not found; run tools/make_demo_repo.py first",
              file=sys.stderr)
        return 2
    with open(expected_path) as f:
        expected = json.load(f)

    digit_files = sorted(os.path.basename(p)
                         for p in glob.glob(os.path.join(examples_dir, "digit_*.json")))
    if args.models:
        digits_models = [m for m in args.models.split(",") if m]
    else:
        digits_models = list(expected[digit_files[0]]["models"]) if digit_files else []
    jobs = [(m, ex) for m in digits_models for ex in digit_files]
    if args.imagenet:
        jobs += [(m, "resnet_input.json") for m in IMAGENET_MODELS]

    model_files = {}
    for model in sorted({m for m, _ in jobs}):
        try:
            model_files[model] = latest_model_file(args.repo, model)
        except OSError as e:
            print(f"error: model '{model}': {e}", file=sys.stderr)
            return 2
    if not jobs:
        print(f"error: no examples found in {examples_dir}", file=sys.stderr)
        return 2

    if args.wait > 0 and not wait_ready(base, args.wait):
        print(f"error: {base}/v2/health/ready did not answer 200 within {args.wait:g} s",
              file=sys.stderr)
        return 2

    import torch  # after the cheap checks: importing torch takes a second or two
    torch.set_num_threads(1)
    loaded = {}

    header = (f"{'model':<20} {'example':<18} {'label':>5} {'torch':>5} {'server':>6} "
              f"{'max|dlogit|':>11} {'ms':>7}  result")
    print(header)
    print("-" * len(header))
    failures = 0
    right_vs_label = {}  # model -> [server right, torch right]
    for model, ex in jobs:
        if model not in loaded:
            loaded[model] = torch.jit.load(model_files[model]).eval()
        with open(os.path.join(examples_dir, ex), "rb") as f:
            body = f.read()
        req = json.loads(body)["inputs"][0]
        x = torch.tensor(req["data"], dtype=torch.float32).reshape(req["shape"])
        with torch.no_grad():
            ref = loaded[model](x)[0].tolist()
        torch_class = argmax(ref)
        label = expected.get(ex, {}).get("label")
        label_s = "-" if label is None else str(label)

        t0 = time.monotonic()
        try:
            status, raw = http("POST", f"{base}/v2/models/{model}/infer", body, args.timeout)
        except (urllib.error.URLError, OSError) as e:
            print(f"error: cannot reach {base}: {e}", file=sys.stderr)
            return 2
        ms = (time.monotonic() - t0) * 1000.0
        problem = None
        server_class = None
        diff = None
        if status != 200:
            problem = f"HTTP {status}: {raw[:200].decode('utf-8', 'replace')}"
        else:
            try:
                resp = json.loads(raw)
                outs = [o for o in resp.get("outputs", []) if o.get("name") == "logits"]
                if not outs:
                    raise ValueError("no output named 'logits'")
                data = [float(v) for v in flatten(outs[0]["data"])]
                if len(data) != len(ref):
                    raise ValueError(f"{len(data)} logits, expected {len(ref)}")
                server_class = argmax(data)
                diff = max(abs(a - b) for a, b in zip(data, ref))
            except (ValueError, KeyError, TypeError) as e:
                problem = f"bad response: {e}: {raw[:200].decode('utf-8', 'replace')}"

        if problem is None and server_class != torch_class:
            problem = "server class differs from torch"
        if problem is None:
            result = "ok"
            if label is not None and server_class != label:
                result = "ok (model is wrong, as torch is)"
        else:
            failures += 1
            result = "FAIL " + problem
        if label is not None:
            tally = right_vs_label.setdefault(model, [0, 0])
            tally[0] += int(server_class == label)
            tally[1] += int(torch_class == label)
        print(f"{model:<20} {ex:<18} {label_s:>5} {torch_class:>5} "
              f"{'-' if server_class is None else server_class:>6} "
              f"{'-' if diff is None else f'{diff:.2e}':>11} {ms:>7.1f}  {result}")

    print()
    for m in digits_models:
        server_right, torch_right = right_vs_label.get(m, [0, 0])
        print(f"{m}: true label on {server_right}/{len(digit_files)} examples "
              f"(torch: {torch_right}/{len(digit_files)})")
    if failures:
        print(f"FAILED: {failures} of {len(jobs)} queries disagree with torch or failed")
        return 1
    print(f"OK: all {len(jobs)} queries agree with torch")
    return 0


if __name__ == "__main__":
    sys.exit(main())
