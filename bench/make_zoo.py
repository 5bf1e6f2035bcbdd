#!/usr/bin/python3
"""A synthetic model zoo for `somm simulate`: a model repository of --models
models, each with the variants the variant pipeline generated for its source
model on this CPU (ts-fp32 as registered, ts-opt, ts-int8, and ts-bf16 where
the CPU computes bf16 natively), profiled on 1 and 2 threads. --variants N
makes as many models as N variants need (3,334 models for 10,000 where there
is no bf16; 2,500 where there is) and overrides --models.

Usage: /usr/bin/python3 bench/make_zoo.py --out DIR [--models N | --variants N] [--seed S]
           [--from REPO] [--slo-refs FILE] [--split-tasks]

Every synthetic model copies one model of a real repository (--from, default
models/demo): its model.yaml (inputs, max_batch_size, batching; the name
changed) and its persisted variant profiles (REPO/.somm/variants/...), with
every latency multiplied by a factor drawn log-uniformly from 0.5 to 2 and
every memory figure and load time by another from 0.5 to 2 (and one small
input instead of the model's own: the simulator runs no model), so the zoo keeps
the shapes of measured profiles (how batch latency grows, which variant wins
on which threads) and spreads their sizes. The models take the real ones in
turn: syn-00000 copies the first, syn-00001 the second, and so on. No model
file is written: the simulator reads only model.yaml and the profiles.

--split-tasks gives each round of the source models tasks of their own (the
source's task with the round's number, `classification/digits-r0007`), so
that a model-less row of a synthetic model's task chooses among as many
models as the source repository's task has, not among every model of the zoo
that copies it.

--slo-refs FILE writes one `MODEL=MS` line per model: the reference SLO for
bench/make_trace.py --slo-ref (the real model's reference times the latency
factor), so SLO classes stay feasible in the same proportion as for the real
models. Only Python's `random` is used: the same arguments give the same zoo.
Standard library only.
"""
import argparse
import glob
import json
import math
import os
import random
import re

# The reference SLO (ms) of each demo model: make_trace.py's DEFAULT_SLO_REF
# (the tight SLO of its default mix). Other models get 100 ms.
DEMO_SLO_REF = {"digits-logistic": 20, "digits-mlp": 20, "digits-cnn": 25,
                "mobilenet_v3_small": 150, "resnet18": 300}


def log_uniform(rng, lo, hi):
    return math.exp(rng.uniform(math.log(lo), math.log(hi)))


def small_inputs(yaml):
    """One 16-float input instead of the model's own (an image is 600 KB):
    the simulator executes nothing, and every query copies its inputs, so
    small ones keep a 1,000-worker replay fast. Image preprocessing, which
    needs an image input, goes with them."""
    yaml = re.sub(r"(?ms)^inputs:\n.*?(?=^outputs:)",
                  "inputs:\n- name: input\n  datatype: FP32\n  shape: [16]\n", yaml)
    return re.sub(r"(?ms)^preprocessing:\n(?:[ -].*\n)*", "", yaml)


def scale_profile(profile, name, lat, mem):
    p = json.loads(json.dumps(profile))
    p["model"] = name
    p["file"] = ""
    p["accuracy_source"] = "synthetic (bench/make_zoo.py), from " + profile["model"]
    for hw in p["hardware"]:
        latency = hw["latency"]
        for point in latency["points"]:
            point["latency_ms"] = round(point["latency_ms"] * lat, 6)
        for key in ("intercept_ms", "slope_ms"):
            if key in latency:
                latency[key] = latency[key] * lat
        hw["load_time_ms"] = round(hw["load_time_ms"] * mem, 3)
        hw["peak_memory_mb"] = round(hw["peak_memory_mb"] * mem, 3)
    return p


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="repository folder to write")
    ap.add_argument("--models", type=int, default=2500)
    ap.add_argument("--variants", type=int, help="make models until they hold this many variants")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--from", dest="source", default="models/demo")
    ap.add_argument("--slo-refs", help="write MODEL=MS reference SLOs here")
    ap.add_argument("--split-tasks", action="store_true",
                    help="each round of the source models gets tasks of its own")
    args = ap.parse_args()

    sources = []
    for yaml in sorted(glob.glob(os.path.join(args.source, "*", "model.yaml"))):
        model = os.path.basename(os.path.dirname(yaml))
        profiles = []
        for f in sorted(glob.glob(os.path.join(args.source, ".somm", "variants", model, "1",
                                               "*", "profile.json"))):
            with open(f) as fh:
                profiles.append(json.load(fh))
        if profiles:
            with open(yaml) as fh:
                sources.append((model, fh.read(), profiles))
    if not sources:
        raise SystemExit(f"make_zoo.py: no model with persisted profiles in {args.source}")

    if args.variants is not None:
        args.models, held = 0, 0
        while held < args.variants:
            held += len(sources[args.models % len(sources)][2])
            args.models += 1
    rng = random.Random(args.seed)
    refs = []
    for i in range(args.models):
        name = f"syn-{i:05d}"
        model, yaml, profiles = sources[i % len(sources)]
        lat = log_uniform(rng, 0.5, 2.0)
        mem = log_uniform(rng, 0.5, 2.0)
        os.makedirs(os.path.join(args.out, name, "1"), exist_ok=True)
        text = small_inputs(re.sub(r"(?m)^name: .*$", f"name: {name}", yaml))
        if args.split_tasks:
            # Round r (syn models r*S to r*S + S - 1, S sources) serves tasks
            # of its own: the demo's five models serve two tasks, so model-less
            # rows choose among a few models, as in a real catalog, not
            # among half the zoo.
            text = re.sub(r"(?m)^task: *(\S+)$",
                          lambda m: f"task: {m.group(1)}-r{i // len(sources):04d}", text)
        with open(os.path.join(args.out, name, "model.yaml"), "w") as fh:
            fh.write(text)
        for p in profiles:
            d = os.path.join(args.out, ".somm", "variants", name, "1", p["variant"])
            os.makedirs(d, exist_ok=True)
            with open(os.path.join(d, "profile.json"), "w") as fh:
                json.dump(scale_profile(p, name, lat, mem), fh)
        refs.append(f"{name}={DEMO_SLO_REF.get(model, 100) * lat:.3g}")
    if args.slo_refs:
        with open(args.slo_refs, "w") as fh:
            fh.write("\n".join(refs) + "\n")
    variants = sum(len(sources[i % len(sources)][2]) for i in range(args.models))
    print(f"make_zoo.py: {args.models} models, {variants} variants in {args.out}")


if __name__ == "__main__":
    main()
