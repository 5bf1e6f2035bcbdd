#!/usr/bin/python3
"""Checks of the managed-vs-static tooling: make_trace.py, managed_plan.py, managed_report.py.

Run: /usr/bin/python3 bench/managed_test.py   (CTest runs it as bench_managed_tools_test)
No server and no somm binary: the plan and the report are fed small files
written here. Standard library plus PyYAML.
"""
import csv
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PY = sys.executable
sys.path.insert(0, HERE)

import managed_plan  # noqa: E402
import managed_report  # noqa: E402


def make_trace(out, *args):
    subprocess.run([PY, os.path.join(HERE, "make_trace.py"), "--out", out, "--quiet", *args],
                   check=True)
    with open(out, "rb") as f:
        return f.read()


class MakeTraceTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.path = lambda name: os.path.join(self.dir.name, name)

    def tearDown(self):
        self.dir.cleanup()

    def test_same_seed_gives_a_byte_identical_file(self):
        args = ["--seed", "7", "--duration-s", "120", "--base-rate", "30"]
        a = make_trace(self.path("a.csv"), *args)
        b = make_trace(self.path("b.csv"), *args)
        self.assertEqual(a, b)
        c = make_trace(self.path("c.csv"), "--seed", "8", "--duration-s", "120", "--base-rate", "30")
        self.assertNotEqual(a, c)

    def test_adding_a_model_leaves_the_others_arrivals_alone(self):
        def rows_of(model, data):
            return [r for r in data.decode().splitlines()[1:] if r.split(",")[1] == model]
        common = ["--seed", "3", "--duration-s", "60", "--bursts", "0"]
        a = make_trace(self.path("a.csv"), *common, "--models", "x:1", "y:1")
        b = make_trace(self.path("b.csv"), *common, "--models", "x:1", "y:1", "z:1")
        # Weights renormalise, so rates change; a flat curve keeps the thinning
        # stream identical only for equal rates: compare x with itself at equal weights.
        c = make_trace(self.path("c.csv"), *common, "--models", "x:1", "y:1", "--base-rate", "40")
        d = make_trace(self.path("d.csv"), *common, "--models", "x:2", "y:2", "z:2",
                       "--base-rate", "60")
        self.assertEqual(rows_of("x", c), rows_of("x", d))
        self.assertTrue(rows_of("z", b))
        self.assertTrue(rows_of("x", a))

    def test_columns_order_rates_bursts_and_slo_mix(self):
        summary_path = self.path("s.json")
        data = make_trace(self.path("t.csv"), "--seed", "1", "--duration-s", "300",
                          "--base-rate", "50", "--models", "a", "b", "c", "--bursts", "3",
                          "--burst-factor", "8:8", "--burst-seconds", "10:10",
                          "--slo-mix", "a=5:1", "--slo-mix", "*=10:0.5,100:0.5",
                          "--min-accuracy", "b=0.9", "--summary-json", summary_path)
        rows = list(csv.DictReader(data.decode().splitlines()))
        self.assertEqual(list(rows[0]), ["timestamp_ms", "model", "latency_slo_ms", "min_accuracy"])
        ts = [float(r["timestamp_ms"]) for r in rows]
        self.assertEqual(ts, sorted(ts))
        self.assertTrue(0 <= ts[0] and ts[-1] < 300000)
        self.assertEqual({r["latency_slo_ms"] for r in rows if r["model"] == "a"}, {"5"})
        self.assertEqual({r["latency_slo_ms"] for r in rows if r["model"] != "a"}, {"10", "100"})
        self.assertEqual({r["min_accuracy"] for r in rows if r["model"] == "b"}, {"0.9"})
        self.assertEqual({r["min_accuracy"] for r in rows if r["model"] != "b"}, {""})
        with open(summary_path) as f:
            s = json.load(f)
        # Zipf s=1 over 3 models: 6/11, 3/11, 2/11.
        self.assertAlmostEqual(s["models"]["a"]["weight"], 6 / 11, places=5)
        # One burst per model (3 bursts, 3 models), each 8x for 10 s.
        self.assertEqual(sorted(b["model"] for b in s["bursts"]), ["a", "b", "c"])
        for b in s["bursts"]:
            self.assertAlmostEqual(b["end_s"] - b["start_s"], 10, places=2)
            self.assertEqual(b["factor"], 8)
        # The mean without bursts is 50/s; 3 bursts of 10 s at 8x add about
        # 7 * 10 * (rate of that model at that time) queries: well under 2x.
        self.assertGreater(s["queries"], 50 * 300 * 0.9)
        self.assertLess(s["queries"], 50 * 300 * 1.6)
        # A burst shows as a peak second well above the mean.
        for m in s["models"].values():
            self.assertGreater(m["peak_qps"], 3 * m["mean_qps"])

    def test_sessions_silence_a_model_between_uses_and_burst_models_limit_bursts(self):
        summary_path = self.path("s.json")
        data = make_trace(self.path("t.csv"), "--seed", "4", "--duration-s", "600",
                          "--base-rate", "40", "--models", "hot", "tail", "--bursts", "4",
                          "--burst-models", "hot", "--sessions", "tail=30:90",
                          "--summary-json", summary_path)
        with open(summary_path) as f:
            s = json.load(f)
        self.assertEqual({b["model"] for b in s["bursts"]}, {"hot"})
        self.assertIsNone(s["models"]["hot"]["sessions"])
        self.assertEqual(s["models"]["hot"]["active_share"], 1.0)
        spans = s["models"]["tail"]["sessions"]
        self.assertTrue(spans, "600 s with sessions of 30 s every 120 s on average has some")
        share = s["models"]["tail"]["active_share"]
        self.assertGreater(share, 0.05)
        self.assertLess(share, 0.6)
        # Every arrival of the tail model falls inside one of its sessions,
        # and a session of a few seconds or more has arrivals.
        tail_ts = [float(r.split(",")[0]) / 1000 for r in data.decode().splitlines()[1:]
                   if r.split(",")[1] == "tail"]
        self.assertTrue(tail_ts)
        for t in tail_ts:
            self.assertTrue(any(a <= t < b for a, b in spans), f"arrival at {t} s is between sessions")
        for a, b in spans:
            if b - a > 5:
                self.assertTrue(any(a <= t < b for t in tail_ts), f"no arrival in session {a}-{b}")
        # The hot model is unaffected by the tail's sessions.
        plain = make_trace(self.path("p.csv"), "--seed", "4", "--duration-s", "600",
                           "--base-rate", "40", "--models", "hot", "tail", "--bursts", "4",
                           "--burst-models", "hot")
        def rows_of(model, raw):
            return [r for r in raw.decode().splitlines()[1:] if r.split(",")[1] == model]
        self.assertEqual(rows_of("hot", data), rows_of("hot", plain))

    def test_bad_arguments_name_the_option(self):
        r = subprocess.run([PY, os.path.join(HERE, "make_trace.py"), "--out", self.path("x.csv"),
                            "--slo-mix", "nosuch=5:1"], capture_output=True, text=True)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("--slo-mix", r.stderr)
        for bad in (["--sessions", "nosuch=1:1"], ["--sessions", "digits-mlp=0:5"],
                    ["--burst-models", "nosuch"]):
            r = subprocess.run([PY, os.path.join(HERE, "make_trace.py"), "--out",
                                self.path("x.csv"), *bad], capture_output=True, text=True)
            self.assertNotEqual(r.returncode, 0, bad)
            self.assertIn(bad[0], r.stderr)


def write_profile(repo, model, variant, optimization, hw_points, usable=True):
    d = os.path.join(repo, ".somm", "variants", model, "1", variant)
    os.makedirs(d, exist_ok=True)
    hardware = [{"device": "cpu", "device_index": 0, "threads": threads,
                 "latency": {"intercept_ms": 0, "slope_ms": 0,
                             "points": [{"batch": b, "latency_ms": ms} for b, ms in points]},
                 "load_time_ms": 10, "peak_memory_mb": 1}
                for threads, points in hw_points.items()]
    with open(os.path.join(d, "profile.json"), "w") as f:
        json.dump({"model": model, "version": 1, "variant": variant, "optimization": optimization,
                   "usable": usable, "hardware": hardware}, f)


def write_model(repo, model, threads, max_batch):
    os.makedirs(os.path.join(repo, model, "1"), exist_ok=True)
    with open(os.path.join(repo, model, "model.yaml"), "w") as f:
        f.write(f"# comment kept\nname: {model}\nmax_batch_size: {max_batch}\n"
                f"instance_count: 1\nintra_op_threads: {threads}\n")
    with open(os.path.join(repo, model, "1", "model.pt"), "w") as f:
        f.write("not a model")


class PlanTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.repo = os.path.join(self.dir.name, "repo")
        write_model(self.repo, "heavy", threads=2, max_batch=8)
        # As registered: 100 ms at batch 1, 400 ms at batch 8 on cpu2 -> 20/s at batch 8.
        write_profile(self.repo, "heavy", "ts-fp32", "as registered",
                      {2: [(1, 100), (8, 400)], 1: [(1, 150), (8, 900)]})
        # Faster, but it is not what a static server runs; its batch-1 latency
        # sets the feasibility threshold (an unusable one would not).
        write_profile(self.repo, "heavy", "ts-opt", "frozen", {1: [(1, 40), (8, 200)]})
        write_profile(self.repo, "heavy", "ts-int8", "quantized", {1: [(1, 5)]}, usable=False)
        self.trace = os.path.join(self.dir.name, "t.csv")
        with open(self.trace, "w") as f:
            f.write("timestamp_ms,model,latency_slo_ms\n")
            # 100 s of trace: one query a second, plus 90 more in trace second 50.
            rows = [(i * 1000.0, 500) for i in range(100)] + [(50000 + i, 30) for i in range(90)]
            for ts, slo in sorted(rows):
                f.write(f"{ts:.3f},heavy,{slo}\n")

    def tearDown(self):
        self.dir.cleanup()

    def plan(self, *extra):
        out = os.path.join(self.dir.name, "plan.json")
        subprocess.run([PY, os.path.join(HERE, "managed_plan.py"), "plan", "--trace", self.trace,
                        "--repo", self.repo, "--time-scale", "2", "--out", out, *extra],
                       check=True, capture_output=True)
        with open(out) as f:
            return json.load(f)

    def test_profile_capacity_replicas_and_feasibility(self):
        m = self.plan()["models"]["heavy"]
        self.assertEqual(m["fixed_variant"], "ts-fp32")
        self.assertEqual(m["threads"], 2)
        self.assertAlmostEqual(m["capacity_qps"], 20.0)  # 8 / 0.4 s
        # Time scale 2: trace second 50 (91 queries) falls in replay second 25,
        # with trace second 51's query: 92/s at peak; the mean is 190 / 49.5 s.
        self.assertEqual(m["peak_qps"], 92)
        self.assertEqual(m["replicas_peak"], 5)  # ceil(92 / 20)
        self.assertEqual(m["replicas_avg"], 1)
        self.assertEqual(m["best_b1_ms"], 40)  # ts-opt on cpu1; the unusable int8 is ignored
        self.assertEqual(m["feasible_queries"], 100)  # the 90 at 30 ms are below 40 ms

    def test_measured_capacity_wins(self):
        bench = os.path.join(self.dir.name, "heavy.json")
        with open(bench, "w") as f:
            json.dump({"points": [{"throughput_qps": 46.0}]}, f)
        plan = self.plan("--measured", f"heavy={bench}")
        self.assertEqual(plan["capacity_source"], "measured")
        self.assertEqual(plan["targets"]["static-peak"]["heavy"], 2)  # ceil(92 / 46)
        self.assertEqual(plan["models"]["heavy"]["capacity_profile_qps"], 20.0)

    def test_repo_copy_sets_instance_count_and_keeps_the_rest(self):
        dst = os.path.join(self.dir.name, "copy")
        subprocess.run([PY, os.path.join(HERE, "managed_plan.py"), "repo", "--src", self.repo,
                        "--dst", dst, "--models", "heavy", "--instances", "heavy=3"], check=True)
        with open(os.path.join(dst, "heavy", "model.yaml")) as f:
            text = f.read()
        self.assertIn("instance_count: 3\n", text)
        self.assertIn("# comment kept", text)
        self.assertTrue(os.path.exists(os.path.join(dst, ".somm", "variants", "heavy", "1",
                                                    "ts-opt", "profile.json")))


class ReportTest(unittest.TestCase):
    def test_integrate_holds_each_value_until_the_next_sample(self):
        pts = [(10.0, 1), (12.0, 3), (15.0, 2)]
        self.assertAlmostEqual(managed_report.integrate(pts, 10, 20), 1 * 2 + 3 * 3 + 2 * 5)
        # Before the first sample its value holds; the window clips.
        self.assertAlmostEqual(managed_report.integrate(pts, 8, 13), 1 * 4 + 3 * 1)

    def test_replicas_prefer_somm_instances_then_loaded_then_index(self):
        s = {"metrics": {'somm_instances{hardware="cpu1",model="a",variant="ts-opt",version="1"}': 2,
                         'somm_instances{hardware="cpu2",model="a",variant="ts-fp32",version="1"}': 1,
                         'somm_instances_loaded{model="a",version="1"}': 7}}
        self.assertEqual(managed_report.replicas(s, {})[:2], (3, {"a": 3}))
        s = {"metrics": {'somm_instances_loaded{model="a",version="1"}': 2}}
        self.assertEqual(managed_report.replicas(s, {})[2], "somm_instances_loaded")
        s = {"metrics": {}, "index": [{"name": "a", "state": "READY"},
                                      {"name": "b", "state": "UNAVAILABLE"}]}
        self.assertEqual(managed_report.replicas(s, {"a": 4})[:2], (4, {"a": 4}))

    def test_target_attainment_leaves_infeasible_queries_out(self):
        with tempfile.TemporaryDirectory() as out:
            d = os.path.join(out, "static-peak")
            os.makedirs(d)
            with open(os.path.join(d, "bench.log"), "w") as f:
                f.write("trace: origin unix_s=1000.000\n")
            rows = [
                # scheduled, done, latency, model, slo, code
                (0, 5, 5, "m", 10, "OK"),          # met
                (100, 120, 20, "m", 10, "OK"),     # late
                (200, 200.1, 0.1, "m", 10, "RESOURCE_EXHAUSTED"),  # rejected
                (300, 320, 20, "m", 10, "DEADLINE_EXCEEDED"),      # expired in the queue
                (1500, 1501, 1, "m", 0.5, "RESOURCE_EXHAUSTED"),   # infeasible: left out
                (1600, 1602, 2, "m", 10, "OK"),    # met, second 1
            ]
            with open(os.path.join(d, "queries.csv"), "w") as f:
                f.write("scheduled_ms,sent_ms,done_ms,latency_ms,model,slo_ms,code,queue_us,"
                        "compute_us,server_us,error\n")
                for s, done, lat, m, slo, code in rows:
                    err = '"queue full"' if code != "OK" else ""
                    f.write(f"{s},{s},{done},{lat},{m},{slo},{code},,,,{err}\n")
            with open(os.path.join(d, "samples.jsonl"), "w") as f:
                for t, n in [(999.5, 2), (1000.5, 2), (1001.0, 4), (1002.0, 4)]:
                    f.write(json.dumps({"t": t, "rss_kb": 1024 * n, "metrics": {
                        'somm_instances_loaded{model="m",version="1"}': n,
                        "somm_cold_starts_total": n}}) + "\n")
            plan = {"models": {"m": {"best_b1_ms": 1.0}}}
            r = managed_report.analyse_target(out, "static-peak", plan)
        self.assertEqual((r["feasible"], r["met"], r["late"], r["rejected"], r["expired"]),
                         (5, 2, 1, 1, 1))
        self.assertEqual((r["infeasible"], r["infeasible_rejected"]), (1, 1))
        self.assertAlmostEqual(r["attainment"], 0.4)
        self.assertEqual(r["attainment_per_second"], {0: 1 / 4, 1: 1.0})
        # Replay from 1000 to 1001.602 s: 2 replicas for 1 s, then 4.
        self.assertAlmostEqual(r["instance_s"], 2 * 1.0 + 4 * 0.602, places=3)
        self.assertEqual(r["cold_starts"], 2)  # 4 at the end, 2 before the origin
        self.assertEqual(r["p50"], 5)


if __name__ == "__main__":
    unittest.main()
