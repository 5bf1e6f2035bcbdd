"""A live somm's /metrics, for the checks and the documentation that must
not drift from it: tests/browser/metrics_contract_test.py (every metric that
deploy/grafana and deploy/prometheus name exists) and scripts/metrics_doc
(docs/metrics.md, generated from a scrape).

live_metrics() starts `somm serve` on the demo repository on free ports,
sends a few queries (with an SLO, in task form, and one the selector must
reject) so that the labelled series exist, scrapes /metrics, stops somm and
returns the families: {name: {"type", "help", "labels"}}.

Metrics that `somm serve` does not export, each with the reason: the
controller's worker scaler, and contracts of features not built yet.
"""
import json
import os
import re
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

# name -> why `somm serve` does not export it (docs/metrics.md shows the reason).
NOT_IN_SERVE = {
    "somm_workers": "the controller of a cluster, with a worker provisioner (`somm controller --provisioner`)",
    "somm_workers_desired": "the controller of a cluster, with a worker provisioner (`somm controller --provisioner`)",
    "somm_worker_scale_steps_total": "the controller of a cluster, with a worker provisioner, once it has taken a step",
    "somm_response_cache_hits_total": "only for a model whose model.yaml enables response_cache (none of the demo's does)",
    "somm_response_cache_misses_total": "only for a model whose model.yaml enables response_cache (none of the demo's does)",
    "somm_response_cache_evictions_total": "only for a model whose model.yaml enables response_cache (none of the demo's does)",
    "somm_response_cache_bytes": "only for a model whose model.yaml enables response_cache (none of the demo's does)",
    "somm_response_cache_entries": "only for a model whose model.yaml enables response_cache (none of the demo's does)",
    "somm_cluster_view_lag_seconds": "a router or the controller of a cluster (`process` is `router:<id>` or `controller:<id>`), for each report a heartbeat's change notice carried (docs/cluster-state.md, \"Steady-state cost of the cluster state\")",
}
NOT_IN_SERVE_TYPES = {
    "somm_workers": ("gauge", "Workers registered plus those being started", ""),
    "somm_workers_desired": ("gauge", "Workers the worker scaler wants", ""),
    "somm_worker_scale_steps_total": ("counter", "Workers the worker scaler asked for (out) or drained (in), by reason",
                                      "direction, reason"),
    "somm_response_cache_hits_total": ("counter", "Queries answered from the router's response cache", "model"),
    "somm_response_cache_misses_total": ("counter", "Queries to a model with a response cache that ran the model",
                                         "model"),
    "somm_response_cache_evictions_total": ("counter", "Answers dropped from the response cache to keep within its "
                                            "bound (least recently used first)", "model"),
    "somm_response_cache_bytes": ("gauge", "Bytes the response cache holds for a model (its bound: model.yaml's "
                                  "response_cache.max_mb)", "model"),
    "somm_response_cache_entries": ("gauge", "Answers the response cache holds for a model", "model"),
    "somm_cluster_view_lag_seconds": ("histogram", "From a worker's report written in Redis (Redis's clock) to "
                                      "this process's view holding it (its clock)", "process"),
}

_LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)')
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse(text):
    """Families of a Prometheus text exposition: {name: {type, help, labels}}."""
    families = {}
    for line in text.splitlines():
        if line.startswith("# HELP "):
            name, _, help_text = line[7:].partition(" ")
            families.setdefault(name, {"type": "", "help": "", "labels": set()})["help"] = help_text
        elif line.startswith("# TYPE "):
            name, _, kind = line[7:].partition(" ")
            families.setdefault(name, {"type": "", "help": "", "labels": set()})["type"] = kind
        elif line and not line.startswith("#"):
            m = _LINE.match(line)
            if not m:
                continue
            name = m.group(1)
            for suffix in ("_bucket", "_sum", "_count"):
                if name.endswith(suffix) and name[: -len(suffix)] in families:
                    name = name[: -len(suffix)]
            family = families.setdefault(name, {"type": "", "help": "", "labels": set()})
            family["samples"] = family.get("samples", 0) + 1
            family["labels"].update(k for k, _ in _LABEL.findall(m.group(2) or "") if k != "le")
    return families


def _post(url, body):
    req = urllib.request.Request(url, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            r.read()
    except urllib.error.HTTPError as e:
        e.read()


def live_metrics(somm, repo):
    """Starts somm serve, drives a few queries, returns parse(/metrics)."""
    with tempfile.TemporaryDirectory(prefix="somm-metrics-") as tmp:
        log = open(os.path.join(tmp, "somm.log"), "w")
        proc = subprocess.Popen([somm, "serve", "--repo", repo, "--http-port", "0", "--grpc-port", "0",
                                 "--metrics-port", "0", "--log-level", "warn"],
                                stdout=subprocess.PIPE, stderr=log, text=True)
        try:
            deadline = time.time() + 120
            http = metrics = None
            while time.time() < deadline:
                line = proc.stdout.readline()
                if not line:
                    raise RuntimeError("somm serve exited before listening; see its log")
                m = re.match(r"somm: listening http=(\d+) grpc=\d+ metrics=(\d+)", line)
                if m:
                    http, metrics = int(m.group(1)), int(m.group(2))
                    break
            if http is None:
                raise RuntimeError("somm serve did not start in 120 s")
            base = f"http://127.0.0.1:{http}"
            with open(os.path.join(repo, ".examples", "digit_3.json")) as f:
                digit = json.load(f)
            for params in ({"latency_slo_ms": 50}, {}, {"min_accuracy": 0.99999}):
                _post(f"{base}/v2/tasks/classification/digits/infer", dict(digit, parameters=params))
            _post(f"{base}/v2/models/digits-mlp/infer", dict(digit, parameters={"latency_slo_ms": 50}))
            # A variant named explicitly and not loaded: a cold start.
            _post(f"{base}/v2/models/digits-mlp:1:ts-int8@cpu1/infer", digit)
            # A wrong datatype: a failure counted against the model.
            bad = json.loads(json.dumps(digit))
            bad["inputs"][0]["datatype"] = "INT64"
            bad["inputs"][0]["data"] = [int(x) for x in bad["inputs"][0]["data"]]
            _post(f"{base}/v2/models/digits-mlp/infer", bad)
            time.sleep(1.5)  # one control tick: the controller's gauges
            with urllib.request.urlopen(f"http://127.0.0.1:{metrics}/metrics", timeout=30) as r:
                return parse(r.read().decode())
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
            log.close()


def names_in_expr(expr):
    """The somm metric families a PromQL expression names."""
    names = set()
    for name in re.findall(r"\bsomm_[a-z0-9_]+", expr):
        for suffix in ("_bucket", "_sum", "_count"):
            if name.endswith(suffix) and not name.endswith("_total"):
                name = name[: -len(suffix)]
        names.add(name)
    return names
