#!/usr/bin/python3
"""Checks of bench/make_trace.py's load shapes, Zipf popularity and SLO classes,
and of bench/simulate_report.py's per-class table built on them.

Run: /usr/bin/python3 bench/make_trace_test.py   (CTest: bench_make_trace_test)
Seconds, standard library only. The default trace's digest pins the old
behaviour: bench/managed.sh replays traces made without --shape and relies on
them staying byte-identical.
"""
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PY = sys.executable


class MakeTraceShapesTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.dir.cleanup()

    def run_trace(self, *args):
        out = os.path.join(self.dir.name, "t.csv")
        summary = os.path.join(self.dir.name, "t.json")
        subprocess.run([PY, os.path.join(HERE, "make_trace.py"), "--out", out, "--quiet",
                        "--summary-json", summary, *args], check=True)
        with open(out, "rb") as f:
            data = f.read()
        with open(summary) as f:
            return data, json.load(f)

    def test_default_trace_is_unchanged_by_the_shapes(self):
        # The digest of this trace before --shape existed.
        data, summary = self.run_trace("--seed", "5", "--duration-s", "60", "--base-rate", "20")
        self.assertEqual(hashlib.sha256(data).hexdigest(),
                         "c20cb62068339757817c436dd02bce86f92acdb9d949c488935ee7b1a3c20978")
        self.assertNotIn("shape", summary)
        self.assertNotIn("shape", summary["args"])

    def per_second(self, shape, *extra):
        _, s = self.run_trace("--seed", "2", "--duration-s", "1200", "--base-rate", "30",
                              "--shape", shape, *extra)
        return s, s["shape"]["per_second"]

    def test_diurnal_mean_is_about_a_fifth_of_its_peak(self):
        s, counts = self.per_second("diurnal")
        # Peak of 30-s windows, so Poisson noise of single seconds does not count.
        windows = [sum(counts[i:i + 30]) / 30 for i in range(0, len(counts) - 29, 30)]
        ratio = (sum(counts) / len(counts)) / max(windows)
        self.assertGreater(ratio, 0.14)
        self.assertLess(ratio, 0.28)
        # The valley is at the start and the end.
        self.assertLess(sum(counts[:60]), sum(counts[570:630]) / 5)
        self.assertAlmostEqual(s["total"]["mean_qps"], 30, delta=3)

    def test_spiky_has_a_low_floor_and_rare_high_peaks(self):
        s, counts = self.per_second("spiky")
        mean = sum(counts) / len(counts)
        median = sorted(counts)[len(counts) // 2]
        self.assertLess(median, mean)
        self.assertGreater(max(counts), 8 * mean)
        # Rare: the spikes cover under 5% of the seconds.
        self.assertLess(sum(1 for c in counts if c > 4 * mean), 0.05 * len(counts))

    def test_surges_are_5_to_10_times_the_floor(self):
        s, counts = self.per_second("surge", "--surges", "2")
        part = s["shape"]["parts"][0]
        self.assertEqual(len(part["events"]), 2)
        floor = sorted(counts)[len(counts) // 2]
        for start, end, factor in part["events"]:
            self.assertGreaterEqual(factor, 5)
            self.assertLessEqual(factor, 10)
            inside = counts[int(start) + 1:int(end) - 1]
            self.assertGreater(sum(inside) / len(inside), 3.5 * floor)

    def test_mixed_runs_the_three_shapes_in_turn(self):
        s, counts = self.per_second("mixed")
        self.assertEqual([p["kind"] for p in s["shape"]["parts"]], ["spiky", "diurnal", "surge"])
        third = len(counts) // 3
        for i in range(3):
            part = counts[i * third:(i + 1) * third]
            self.assertAlmostEqual(sum(part) / len(part), 30, delta=4)

    def test_azure_steps_per_minute_with_a_series_per_model(self):
        _, s = self.run_trace("--seed", "2", "--duration-s", "1200", "--base-rate", "60",
                              "--shape", "azure", "--models", "a", "b", "c", "--zipf", "0")
        self.assertAlmostEqual(s["total"]["mean_qps"], 60, delta=6)
        parts = {p["model"]: p for p in s["shape"]["parts"]}
        self.assertEqual(sorted(parts), ["a", "b", "c"])
        for p in parts.values():
            for start, end, factor in p["events"]:
                self.assertEqual(end - start, 60)
                self.assertGreaterEqual(factor, 3)
                self.assertLessEqual(factor, 20)
        minutes = {m: [sum(s["models"][m]["per_second"][k:k + 60]) for k in range(0, 1200, 60)]
                   for m in parts}
        # Bursty at the minute: the busiest minute is several times the
        # quietest (a flat rate would keep them within a few percent).
        for m, counts in minutes.items():
            self.assertGreater(max(counts), 3 * min(counts), m)
        # Each model its own series: their busiest minutes differ.
        self.assertGreater(len({c.index(max(c)) for c in minutes.values()}), 1)

    def test_twitter_flash_crowds_lift_every_model_and_decay(self):
        _, s = self.run_trace("--seed", "2", "--duration-s", "1200", "--base-rate", "60",
                              "--shape", "twitter", "--flashes", "1", "--models", "a", "b",
                              "--zipf", "0")
        self.assertAlmostEqual(s["total"]["mean_qps"], 60, delta=6)
        (t0, tau, factor), = s["shape"]["parts"][0]["events"]
        self.assertGreaterEqual(factor, 2)
        self.assertLessEqual(factor, 6)
        total = s["shape"]["per_second"]
        start = int(t0)
        before = sum(total[start - 20:start]) / 20
        at = sum(total[start + 2:start + 7]) / 5
        late = sum(total[start + int(4 * tau):start + int(4 * tau) + 20]) / 20
        self.assertGreater(at, 1.5 * before)
        self.assertLess(late, at / 1.5)
        for m in ("a", "b"):  # a flash crowd lifts every model at once
            c = s["models"][m]["per_second"]
            self.assertGreater(sum(c[start + 2:start + 7]) / 5, 1.4 * sum(c[start - 20:start]) / 20)

    def test_zipf_popularity_has_a_long_tail(self):
        models = [f"m{i}" for i in range(1, 9)]
        _, s = self.run_trace("--seed", "3", "--duration-s", "600", "--base-rate", "50",
                              "--shape", "diurnal", "--zipf", "1.2", "--models", *models)
        q = [s["models"][m]["queries"] for m in models]
        self.assertGreater(q[0], q[1])
        self.assertGreater(q[1], q[3])
        # 1/rank^1.2: the first model takes 8^1.2 = 12x the last one's share.
        self.assertGreater(q[0] / q[7], 8)
        self.assertLess(q[0] / q[7], 18)

    def test_slo_classes_scale_each_models_reference(self):
        data, s = self.run_trace("--seed", "4", "--duration-s", "300", "--base-rate", "40",
                                 "--models", "digits-mlp", "other", "--slo-classes",
                                 "tight=0.5:0.2,normal=1:0.5,relaxed=5:0.3",
                                 "--slo-ref", "other=40")
        self.assertEqual(s["slo_classes"]["digits-mlp"],
                         {"10": "tight", "20": "normal", "100": "relaxed"})
        self.assertEqual(s["slo_classes"]["other"],
                         {"20": "tight", "40": "normal", "200": "relaxed"})
        rows = [r.split(",") for r in data.decode().splitlines()[1:]]
        other = [float(r[2]) for r in rows if r[1] == "other"]
        self.assertAlmostEqual(other.count(20.0) / len(other), 0.2, delta=0.05)
        self.assertAlmostEqual(other.count(200.0) / len(other), 0.3, delta=0.05)

    def test_slo_classes_and_slo_mix_exclude_each_other(self):
        r = subprocess.run([PY, os.path.join(HERE, "make_trace.py"), "--out", "-", "--quiet",
                            "--slo-classes", "a=1:1", "--slo-mix", "*=10:1"],
                           capture_output=True, text=True)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("exclude each other", r.stderr)


class SimulateReportTest(unittest.TestCase):
    def test_per_class_attainment_and_the_docs_splice(self):
        sys.path.insert(0, HERE)
        import simulate_report  # noqa: E402
        summary = {"queries": 10, "duration_s": 60, "seed": 1,
                   "total": {"mean_qps": 1, "peak_qps": 3}, "shape": {"name": "mixed"},
                   "models": {"a": {"weight": 1.0}},
                   "slo_classes": {"a": {"10": "tight", "20": "normal"}}}
        policy = {"attainment": 0.75, "instance_seconds": 100, "usd": 0.002, "cold_starts": 1,
                  "rejections": 2, "p50_ms": 1, "p99_ms": 9, "worker_seconds": 120,
                  "control_actions": 3, "cost_bound_usd": 0.0005, "cost_over_bound": 4.0,
                  "models": {"a": {"slos": {"10": {"queries": 4, "feasible": 4, "met": 1},
                                            "20": {"queries": 4, "feasible": 4, "met": 4}}}}}
        clairvoyant = dict(policy, usd=0.001)
        meta = {"date": "d", "git": "g", "command": "c", "workers": 2, "worker_cores": 4,
                "worker_memory_mb": 1024, "repository": "r", "seed": 1}
        text = simulate_report.report({"policies": {"somm": policy, "clairvoyant": clairvoyant}},
                                      summary, meta)
        row = [line for line in text.splitlines() if line.startswith("| **somm**")][0]
        cells = [c.strip() for c in row.strip("|").split("|")]
        self.assertEqual(cells[1:4], ["0.7500", "0.2500", "1.0000"])  # overall, tight, normal
        self.assertIn("2.00x", cells)  # twice the clairvoyant heuristic's dollars
        self.assertIn("4.00x", cells)  # four times the lower bound on cost
        with tempfile.TemporaryDirectory() as d:
            doc = os.path.join(d, "sim.md")
            with open(doc, "w") as f:
                f.write(f"intro\n{simulate_report.BEGIN}\nSTALE-TABLE\n{simulate_report.END}\nrest\n")
            simulate_report.splice(doc, text)
            with open(doc) as f:
                out = f.read()
        self.assertTrue(out.startswith("intro\n"))
        self.assertTrue(out.endswith("rest\n"))
        self.assertNotIn("STALE-TABLE", out)
        self.assertIn("| **clairvoyant**", out)


if __name__ == "__main__":
    unittest.main()
