#!/usr/bin/python3
"""Synthetic, reproducible query traces for `somm bench --trace`.

Usage: /usr/bin/python3 bench/make_trace.py --out trace.csv [options]

The trace is the arrivals of several models, each a non-homogeneous Poisson
process whose rate is the product of:
  popularity  the model's share of --base-rate (queries/s over the whole
              trace, bursts left out): weights given as NAME:WEIGHT, or Zipf
              (1/rank^s, --zipf s) in the order the models are named;
  a diurnal   1 + A sin(2 pi days t / T - pi/2): --days "days" compressed
  curve       into the --duration-s T, starting at the trough (night), with
              amplitude A = --diurnal-amplitude (0 = flat);
  bursts      --bursts N intervals of --burst-seconds LO:HI seconds at random
              times, each multiplying one model's rate by a factor drawn from
              --burst-factor LO:HI (the models take turns, in a seeded
              shuffled order, so each gets a burst when N >= models;
              --burst-models limits the turns to the models it names);
  sessions    for a model named by --sessions MODEL=ON:OFF, 1 while the
              model is in use and 0 between uses: alternating periods drawn
              from exponential distributions with means ON and OFF seconds,
              the first one active with probability ON / (ON + OFF). This is
              the long tail of a model-serving fleet: most models are queried
              now and then, in sessions, not all the time. The popularity
              share is the model's rate while active (so its mean over the
              trace is lower by its active share). Without --sessions a model
              is always in use.
  shape       --shape spiky|diurnal|surge|mixed|azure|twitter replaces the sine and the
              bursts above with one of the three load shapes production
              inference fleets show, applied to every model at once and
              scaled so that its mean over the trace is 1 (--base-rate stays
              the mean rate):
                spiky    low mean with rare peaks: a flat floor with --spikes
                         short spikes (2-6 s) of 10-20x the floor;
                diurnal  a peak and a valley per day (--days):
                         0.05 + 0.95 ((1 - cos)/2)^12, whose mean is about
                         20% of its peak, starting in the valley;
                surge    a flat floor with --surges surges (10-40 s) of
                         --surge-factor (5-10x) the floor;
                mixed    the trace in three equal parts, spiky, diurnal and
                         surge, each scaled to mean 1 on its own;
                azure    the Azure Functions 2019 trace's per-minute shape,
                         a drifting level with burst minutes, one series per
                         model (SeriesShape);
                twitter  the Twitter stream's shape: a diurnal sine with
                         per-second jitter and flash crowds (SeriesShape).
              --shape default (the default) keeps the curve above unchanged.
Arrivals are drawn by thinning (Lewis and Shedler): candidate arrivals at the
model's highest rate, each kept with probability rate(t) / highest rate.
Every query gets a latency SLO drawn from its model's --slo-mix, and a
min_accuracy column when --min-accuracy names the model. --slo-classes
NAME=F:SHARE,... instead draws a class per query (tight, normal, relaxed...)
whose SLO is F times the model's reference SLO (--slo-ref MODEL=MS; default
the tight SLO of DEFAULT_SLO_MIX, else 100 ms); the summary maps each
model's SLO values back to their class ("slo_classes"), since the CSV has no
class column.

The CSV has the columns somm bench --trace reads (src/loadgen/trace.h):
timestamp_ms (3 decimals), model, latency_slo_ms and, only when some model
has one, min_accuracy. The same arguments give a byte-identical file: only
Python's `random` (Mersenne Twister, stable across versions) is used. Each
model's arrivals have their own generator, seeded from --seed and the model's
name, so they depend only on that model's rate curve (adding a model changes
the others only through the weights and the bursts' order).

It prints a summary (queries, mean and peak-second rate per model, the
bursts) and with --summary-json writes it, with per-second counts, as JSON.
Standard library only.
"""
import argparse
import json
import math
import random
import sys

DEFAULT_MODELS = ["digits-mlp", "digits-cnn", "mobilenet_v3_small"]

# Default SLO mixes (latency_slo_ms: share) for the demo models, chosen
# against their profiled latencies (models/demo/.somm/variants/): about 1%
# of queries ask for less than any variant's batch-1 latency (infeasible:
# a correct server rejects them, and reports leave them out), the rest
# split between a tight and a loose SLO. Other models get DEFAULT_MIX.
DEFAULT_SLO_MIX = {
    "digits-logistic": {0.01: 0.01, 20: 0.39, 200: 0.60},
    "digits-mlp": {0.01: 0.01, 20: 0.39, 200: 0.60},
    "digits-cnn": {0.05: 0.01, 25: 0.39, 250: 0.60},
    "mobilenet_v3_small": {1: 0.01, 150: 0.39, 1000: 0.60},
    "resnet18": {5: 0.01, 300: 0.39, 2000: 0.60},
}
DEFAULT_MIX = {100: 0.5, 1000: 0.5}


def parse_range(text, name):
    try:
        lo, hi = (float(v) for v in text.split(":"))
    except ValueError:
        sys.exit(f"make_trace.py: {name} '{text}' must be LO:HI (two numbers)")
    if not 0 < lo <= hi:
        sys.exit(f"make_trace.py: {name} '{text}' needs 0 < LO <= HI")
    return lo, hi


def parse_models(items, zipf_s):
    """[(name, weight)] with weights summing to 1."""
    named = []
    for rank, item in enumerate(items, start=1):
        name, sep, weight = item.partition(":")
        if not name:
            sys.exit(f"make_trace.py: --models '{item}' has no model name")
        try:
            w = float(weight) if sep else 1.0 / rank ** zipf_s
        except ValueError:
            sys.exit(f"make_trace.py: --models '{item}': weight '{weight}' is not a number")
        if w <= 0:
            sys.exit(f"make_trace.py: --models '{item}': weight must be positive")
        named.append((name, w))
    if len({n for n, _ in named}) != len(named):
        sys.exit("make_trace.py: --models names a model twice")
    total = sum(w for _, w in named)
    return [(n, w / total) for n, w in named]


def parse_slo_mix(items, models):
    """{model: [(slo_ms, cumulative share)]}; MODEL=MS:SHARE[,MS:SHARE...], '*' for the rest."""
    given = {}
    for item in items:
        model, sep, mix = item.partition("=")
        if not sep or not model:
            sys.exit(f"make_trace.py: --slo-mix '{item}' must be MODEL=MS:SHARE[,MS:SHARE...]")
        entries = {}
        for part in mix.split(","):
            try:
                ms, share = (float(v) for v in part.split(":"))
            except ValueError:
                sys.exit(f"make_trace.py: --slo-mix '{item}': '{part}' must be MS:SHARE")
            if ms <= 0 or share < 0:
                sys.exit(f"make_trace.py: --slo-mix '{item}': '{part}' needs MS > 0, SHARE >= 0")
            entries[ms] = entries.get(ms, 0.0) + share
        if sum(entries.values()) <= 0:
            sys.exit(f"make_trace.py: --slo-mix '{item}': the shares add up to 0")
        given[model] = entries
    out = {}
    for name in models:
        mix = given.get(name) or given.get("*") or DEFAULT_SLO_MIX.get(name) or DEFAULT_MIX
        total = sum(mix.values())
        acc, cum = 0.0, []
        for ms in sorted(mix):
            acc += mix[ms] / total
            cum.append((ms, acc))
        cum[-1] = (cum[-1][0], 1.0)
        out[name] = cum
    unknown = set(given) - set(models) - {"*"}
    if unknown:
        sys.exit(f"make_trace.py: --slo-mix names models not in --models: {', '.join(sorted(unknown))}")
    return out


def parse_accuracy(items, models):
    out = {}
    for item in items:
        model, sep, value = item.partition("=")
        try:
            v = float(value)
        except ValueError:
            v = -1
        if not sep or model not in models or not 0 <= v <= 1:
            sys.exit(f"make_trace.py: --min-accuracy '{item}' must be MODEL=X, MODEL in --models, "
                     "0 <= X <= 1")
        out[model] = v
    return out


def plan_bursts(rng, n, models, duration, factor_range, seconds_range):
    """[{model, start_s, end_s, factor}], sorted by start; models take turns."""
    order = list(models)
    rng.shuffle(order)
    bursts = []
    for i in range(n):
        length = rng.uniform(*seconds_range)
        length = min(length, duration * 0.5)
        # Away from the very start and end, so a burst is always whole.
        lo, hi = duration * 0.03, duration * 0.97 - length
        start = rng.uniform(lo, max(lo, hi))
        bursts.append({"model": order[i % len(order)], "start_s": round(start, 3),
                       "end_s": round(start + length, 3),
                       "factor": round(rng.uniform(*factor_range), 2)})
    return sorted(bursts, key=lambda b: (b["start_s"], b["model"]))


def parse_sessions(items, models):
    """{model: (mean on s, mean off s)} from MODEL=ON:OFF items."""
    out = {}
    for item in items:
        model, sep, spec = item.partition("=")
        try:
            on, off = (float(v) for v in spec.split(":"))
        except ValueError:
            on = off = -1
        if not sep or model not in models or on <= 0 or off <= 0:
            sys.exit(f"make_trace.py: --sessions '{item}' must be MODEL=ON:OFF with MODEL in "
                     "--models and ON, OFF > 0 (mean seconds in use and between uses)")
        if model in out:
            sys.exit(f"make_trace.py: --sessions names '{model}' twice")
        out[model] = (on, off)
    return out


def plan_sessions(rng, on_s, off_s, duration):
    """[(start_s, end_s)] when a model with sessions is in use, in order."""
    active = rng.random() < on_s / (on_s + off_s)
    t, out = 0.0, []
    while t < duration:
        length = rng.expovariate(1.0 / (on_s if active else off_s))
        if active:
            out.append((round(t, 3), round(min(t + length, duration), 3)))
        t += length
        active = not active
    return out


class RateCurve:
    """Queries/s of one model at time t (seconds)."""

    def __init__(self, mean_rate, duration, days, amplitude, bursts, sessions=None, shape=None):
        self.mean_rate = mean_rate
        self.duration = duration
        self.days = days
        self.amplitude = amplitude
        self.bursts = bursts
        self.sessions = sessions  # None: always in use
        self.shape = shape  # None: --shape default

    def active(self, t):
        return self.sessions is None or any(a <= t < b for a, b in self.sessions)

    def diurnal(self, t):
        phase = 2 * math.pi * self.days * t / self.duration - math.pi / 2
        return 1 + self.amplitude * math.sin(phase)

    def burst(self, t):
        # Overlapping bursts of one model do not multiply: the larger wins.
        return max([b["factor"] for b in self.bursts if b["start_s"] <= t < b["end_s"]],
                   default=1.0)

    def rate(self, t):
        if not self.active(t):
            return 0.0
        r = self.mean_rate * self.diurnal(t) * self.burst(t)
        return r * self.shape.factor(t) if self.shape else r

    def bound(self):
        top = max([b["factor"] for b in self.bursts], default=1.0)
        b = self.mean_rate * (1 + self.amplitude) * top
        return b * self.shape.top() if self.shape else b


SHAPES = ("default", "spiky", "diurnal", "surge", "mixed", "azure", "twitter")
# Reference SLO (ms) of each demo model for --slo-classes: its tight SLO.
DEFAULT_SLO_REF = {m: sorted(mix)[1] for m, mix in DEFAULT_SLO_MIX.items()}
DEFAULT_REF_MS = 100.0


def plan_events(rng, n, start, length_s, seconds_range, factor_range):
    """n [start_s, end_s, factor] events inside [start, start + length_s)."""
    out = []
    for _ in range(n):
        seconds = min(rng.uniform(*seconds_range), length_s * 0.5)
        lo, hi = start + length_s * 0.03, start + length_s * 0.97 - seconds
        t0 = rng.uniform(lo, max(lo, hi))
        out.append([round(t0, 3), round(t0 + seconds, 3), round(rng.uniform(*factor_range), 2)])
    return sorted(out)


class Shape:
    """The load shape: a factor on every model's rate, mean 1 over each part."""

    STEP_S = 0.1  # the grid the mean is taken on

    def __init__(self, name, rng, duration, days, spikes, surges, surge_factor):
        self.name = name
        parts = ["spiky", "diurnal", "surge"] if name == "mixed" else [name]
        length = duration / len(parts)
        self.parts = []  # [(start, end, kind, events, scale)]
        for i, kind in enumerate(parts):
            start = i * length
            events = []
            if kind == "spiky":
                n = spikes if spikes >= 0 else max(1, round(length / 300))
                events = plan_events(rng, n, start, length, (2, 6), (10, 20))
            elif kind == "surge":
                n = surges if surges >= 0 else max(1, round(length / 300))
                events = plan_events(rng, n, start, length, (10, 40), surge_factor)
            part = [start, start + length, kind, events, 1.0]
            self.parts.append(part)
            steps = max(1, int(length / self.STEP_S))
            mean = sum(self.raw(part, days, start + (k + 0.5) * length / steps)
                       for k in range(steps)) / steps
            part[4] = 1.0 / mean
        self.days = days

    @staticmethod
    def raw(part, days, t):
        start, end, kind, events, _ = part
        if kind == "diurnal":
            x = (1 - math.cos(2 * math.pi * days * (t - start) / (end - start))) / 2
            return 0.05 + 0.95 * x ** 12
        return max([f for a, b, f in events if a <= t < b], default=1.0)

    def part_of(self, t):
        for part in self.parts:
            if t < part[1]:
                return part
        return self.parts[-1]

    def factor(self, t):
        part = self.part_of(t)
        return part[4] * self.raw(part, self.days, t)

    def top(self):
        return max(p[4] * (1.0 if p[2] == "diurnal" else max([f for _, _, f in p[3]], default=1.0))
                   for p in self.parts)

    def describe(self):
        return [{"kind": p[2], "start_s": round(p[0], 3), "end_s": round(p[1], 3),
                 "scale": round(p[4], 4), "events": p[3]} for p in self.parts]


class SeriesShape:
    """A bursty public trace's shape as a table of factors, one per step, mean 1.

    azure    the per-minute shape of the Azure Functions 2019 invocation trace,
             one series per model (each function has its own): per --minute-s
             step (default 60, the trace's granularity) a log-normal level
             that drifts (AR(1) on its log, lag-one correlation 0.8, standard
             deviation 0.6), times a slow sine of half amplitude over --days,
             and with probability 0.05 a burst minute of 3x a Pareto(1.5)
             draw, at most 20x; Poisson arrivals within a step, as a
             per-minute trace is replayed;
    twitter  the Twitter sample stream's shape, one series for every model (a
             world event lifts the whole service): a diurnal sine of
             peak/trough 3 over --days, per-second jitter (AR(1) on the log,
             correlation 0.9, deviation 0.15) and --flashes flash crowds
             (default one per 200 s), each a rise to 2-6x within 2 s that
             decays exponentially with a time constant of 10-60 s.
    """

    def __init__(self, name, rng, duration, days, step_s, flashes=-1):
        self.name = name
        self.step_s = step_s
        self.events = []
        n = max(1, int(math.ceil(duration / step_s)))
        raw = self.azure(rng, n, duration, days) if name == "azure" else \
            self.twitter(rng, n, duration, days, flashes)
        # Mean 1 over [0, duration): the last step may be cut short.
        weights = [min(step_s, duration - k * step_s) for k in range(n)]
        mean = sum(v * w for v, w in zip(raw, weights)) / duration
        self.table = [v / mean for v in raw]
        self.scale = 1.0 / mean

    def azure(self, rng, n, duration, days):
        phi, sigma = 0.8, 0.6
        x = rng.gauss(0, sigma)
        out = []
        for k in range(n):
            if k:
                x = phi * x + rng.gauss(0, sigma * math.sqrt(1 - phi * phi))
            t = (k + 0.5) * self.step_s
            v = math.exp(x) * (1 + 0.5 * math.sin(2 * math.pi * days * t / duration - math.pi / 2))
            if rng.random() < 0.05:
                f = round(min(20.0, 3 * rng.paretovariate(1.5)), 2)
                self.events.append([round(k * self.step_s, 3), round((k + 1) * self.step_s, 3), f])
                v *= f
            out.append(v)
        return out

    def twitter(self, rng, n, duration, days, flashes):
        count = flashes if flashes >= 0 else max(1, round(duration / 200))
        for _ in range(count):
            t0 = rng.uniform(duration * 0.03, duration * 0.9)
            self.events.append([round(t0, 3), round(rng.uniform(10, 60), 3),
                                round(rng.uniform(2, 6), 2)])
        self.events.sort()
        phi, sigma = 0.9, 0.15
        x = rng.gauss(0, sigma)
        out = []
        for k in range(n):
            if k:
                x = phi * x + rng.gauss(0, sigma * math.sqrt(1 - phi * phi))
            t = (k + 0.5) * self.step_s
            v = 1 + 0.5 * math.sin(2 * math.pi * days * t / duration - math.pi / 2)
            lift = 0.0
            for t0, tau, f in self.events:
                if t >= t0:
                    ramp = min(1.0, (t - t0) / 2.0)
                    lift += (f - 1) * ramp * math.exp(-max(0.0, t - t0 - 2.0) / tau)
            out.append(v * math.exp(x) * (1 + lift))
        return out

    def factor(self, t):
        return self.table[min(len(self.table) - 1, max(0, int(t // self.step_s)))]

    def top(self):
        return max(self.table)

    def describe(self):
        # azure: the burst minutes [start, end, factor]; twitter: the flash
        # crowds [start, time constant, factor].
        return [{"kind": self.name, "start_s": 0.0, "end_s": round(len(self.table) * self.step_s, 3),
                 "scale": round(self.scale, 4), "step_s": self.step_s, "events": self.events}]


def parse_slo_classes(text, refs, models, slo_mix_given):
    """({model: {ms: share}} as --slo-mix gives, {model: {ms text: class}}) from
    NAME=F:SHARE,... and MODEL=MS references."""
    if slo_mix_given:
        sys.exit("make_trace.py: --slo-classes and --slo-mix exclude each other")
    classes = []
    for part in text.split(","):
        name, sep, spec = part.partition("=")
        try:
            factor, share = (float(v) for v in spec.split(":"))
        except ValueError:
            factor = share = -1
        if not sep or not name or factor <= 0 or share < 0:
            sys.exit(f"make_trace.py: --slo-classes '{part}' must be NAME=FACTOR:SHARE "
                     "(FACTOR > 0 times the model's reference SLO)")
        classes.append((name, factor, share))
    if sum(c[2] for c in classes) <= 0:
        sys.exit("make_trace.py: --slo-classes: the shares add up to 0")
    given = {}
    for item in refs:
        model, sep, ms = item.partition("=")
        try:
            v = float(ms)
        except ValueError:
            v = -1
        if not sep or v <= 0 or (model not in models and model != "*"):
            sys.exit(f"make_trace.py: --slo-ref '{item}' must be MODEL=MS, MODEL in --models or *")
        given[model] = v
    mixes, names = {}, {}
    for model in models:
        ref = given.get(model) or given.get("*") or DEFAULT_SLO_REF.get(model) or DEFAULT_REF_MS
        mix, labels = {}, {}
        for name, factor, share in classes:
            ms = round(ref * factor, 3)
            mix[ms] = mix.get(ms, 0.0) + share
            labels[fmt_num(ms)] = labels.get(fmt_num(ms), name)
        mixes[model] = mix
        names[model] = labels
    return mixes, names


def arrivals(rng, curve, duration):
    """Arrival times in [0, duration) by thinning a Poisson process at curve.bound()."""
    lam = curve.bound()
    if lam <= 0:
        return []
    out, t = [], 0.0
    while True:
        t += rng.expovariate(lam)
        if t >= duration:
            return out
        if rng.random() * lam < curve.rate(t):
            out.append(t)


def draw_slo(rng, cum):
    u = rng.random()
    for ms, c in cum:
        if u < c:
            return ms
    return cum[-1][0]


def fmt_num(v):
    return f"{v:g}"


def build(args):
    models = parse_models(args.models, args.zipf)
    names = [n for n, _ in models]
    slo_classes = None
    if args.slo_classes:
        mixes, slo_classes = parse_slo_classes(args.slo_classes, args.slo_ref, names, args.slo_mix)
        args.slo_mix = [f"{m}=" + ",".join(f"{fmt_num(ms)}:{sh!r}" for ms, sh in mix.items())
                        for m, mix in mixes.items()]
    elif args.slo_ref:
        sys.exit("make_trace.py: --slo-ref needs --slo-classes")
    slo_mix = parse_slo_mix(args.slo_mix, names)
    accuracy = parse_accuracy(args.min_accuracy, names)
    factor_range = parse_range(args.burst_factor, "--burst-factor")
    seconds_range = parse_range(args.burst_seconds, "--burst-seconds")
    if args.duration_s <= 0 or args.base_rate <= 0:
        sys.exit("make_trace.py: --duration-s and --base-rate must be positive")
    if not 0 <= args.diurnal_amplitude < 1:
        sys.exit("make_trace.py: --diurnal-amplitude must be in [0, 1)")
    if args.days <= 0 or args.bursts < 0:
        sys.exit("make_trace.py: --days must be positive and --bursts not negative")

    sessions = parse_sessions(args.sessions, names)
    shape = None
    if args.shape != "default":
        # The shape replaces the sine and the bursts (their own options stay
        # as they are for --shape default, which bench/managed.sh uses).
        surge_factor = parse_range(args.surge_factor, "--surge-factor")
        if args.shape == "twitter":
            shape = SeriesShape("twitter", random.Random(f"{args.seed}/shape"), args.duration_s,
                                args.days, 1.0, args.flashes)
        elif args.shape != "azure":  # azure: a series per model, below
            shape = Shape(args.shape, random.Random(f"{args.seed}/shape"), args.duration_s,
                          args.days, args.spikes, args.surges, surge_factor)
        args.diurnal_amplitude, args.bursts = 0.0, 0
    burst_models = args.burst_models or names
    unknown = sorted(set(burst_models) - set(names))
    if unknown:
        sys.exit(f"make_trace.py: --burst-models names models not in --models: {', '.join(unknown)}")
    bursts = plan_bursts(random.Random(f"{args.seed}/bursts"), args.bursts,
                         [n for n in names if n in burst_models], args.duration_s, factor_range,
                         seconds_range)
    rows = []
    curves = {}
    model_shapes = {}
    for name, weight in models:
        if args.shape == "azure":
            if args.minute_s <= 0:
                sys.exit("make_trace.py: --minute-s must be positive")
            shape = model_shapes[name] = SeriesShape(
                "azure", random.Random(f"{args.seed}/shape/{name}"), args.duration_s, args.days,
                args.minute_s)
        rng = random.Random(f"{args.seed}/{name}")
        periods = None
        if name in sessions:
            # Its own generator, so the sessions do not shift the arrivals' stream.
            periods = plan_sessions(random.Random(f"{args.seed}/{name}/sessions"),
                                    *sessions[name], args.duration_s)
        curve = RateCurve(args.base_rate * weight, args.duration_s, args.days,
                          args.diurnal_amplitude, [b for b in bursts if b["model"] == name],
                          periods, shape)
        curves[name] = curve
        for t in arrivals(rng, curve, args.duration_s):
            rows.append((round(t * 1000, 3), name, draw_slo(rng, slo_mix[name])))
    rows.sort()
    if model_shapes:
        args.shape_plan = [dict(p, model=m) for m, sh in model_shapes.items() for p in sh.describe()]
    else:
        args.shape_plan = shape.describe() if shape else None
    args.slo_class_of = slo_classes
    return models, slo_mix, accuracy, bursts, curves, rows


def summarize(args, models, slo_mix, bursts, curves, rows):
    seconds = int(math.ceil(args.duration_s))
    per_second = {n: [0] * seconds for n, _ in models}
    slo_counts = {n: {} for n, _ in models}
    for ts, name, slo in rows:
        per_second[name][min(int(ts // 1000), seconds - 1)] += 1
        slo_counts[name][slo] = slo_counts[name].get(slo, 0) + 1
    out = {"seed": args.seed, "duration_s": args.duration_s, "base_rate": args.base_rate,
           "days": args.days, "diurnal_amplitude": args.diurnal_amplitude,
           "queries": len(rows), "bursts": bursts, "models": {}}
    total = [sum(c) for c in zip(*per_second.values())] if per_second else []
    for name, weight in models:
        counts = per_second[name]
        n = sum(counts)
        peak = max(counts) if counts else 0
        out["models"][name] = {
            "weight": round(weight, 6),
            "queries": n,
            "mean_qps": round(n / args.duration_s, 3),
            "peak_qps": peak,  # the busiest one-second bin
            "peak_second": counts.index(peak) if counts else 0,
            "peak_rate_qps": round(max(curves[name].rate(t + 0.5) for t in range(seconds)), 3),
            "slo_mix": {fmt_num(ms): round(c - (slo_mix[name][i - 1][1] if i else 0), 4)
                        for i, (ms, c) in enumerate(slo_mix[name])},
            "slo_queries": {fmt_num(ms): c for ms, c in sorted(slo_counts[name].items())},
            "sessions": curves[name].sessions,  # null: always in use
            "active_share": round(sum(b - a for a, b in curves[name].sessions) / args.duration_s, 4)
                            if curves[name].sessions is not None else 1.0,
            "per_second": counts,
        }
    out["total"] = {"mean_qps": round(len(rows) / args.duration_s, 3),
                    "peak_qps": max(total) if total else 0}
    if args.shape != "default":
        out["shape"] = {"name": args.shape, "parts": args.shape_plan, "per_second": total}
    if args.slo_class_of:
        out["slo_classes"] = args.slo_class_of
    return out


def print_summary(s, out_path):
    print(f"{out_path}: {s['queries']} queries over {s['duration_s']:g} s "
          f"(seed {s['seed']}, base rate {s['base_rate']:g}/s, {s['days']:g} day(s), "
          f"diurnal amplitude {s['diurnal_amplitude']:g})")
    w = max([len(m) for m in s["models"]] + [5])
    print(f"  {'model':<{w}}  {'share':>6}  {'queries':>8}  {'mean/s':>8}  {'peak/s':>7}  "
          f"{'at s':>5}  {'peak/mean':>9}  {'in use':>6}  SLO mix (ms: share)")
    for name, m in s["models"].items():
        ratio = m["peak_qps"] / m["mean_qps"] if m["mean_qps"] else 0
        mix = ", ".join(f"{ms}: {share:g}" for ms, share in m["slo_mix"].items())
        print(f"  {name:<{w}}  {m['weight']:>6.3f}  {m['queries']:>8}  {m['mean_qps']:>8.2f}  "
              f"{m['peak_qps']:>7}  {m['peak_second']:>5}  {ratio:>9.1f}  "
              f"{m['active_share']:>6.0%}  {mix}")
    t = s["total"]
    print(f"  {'total':<{w}}  {1:>6.3f}  {s['queries']:>8}  {t['mean_qps']:>8.2f}  {t['peak_qps']:>7}")
    for p in s.get("shape", {}).get("parts", []):
        if p["kind"] == "twitter":
            events = ", ".join(f"x{f:g} at {a:.0f} s (decay {b:.0f} s)" for a, b, f in p["events"])
        else:
            events = ", ".join(f"x{f:g} {a:.0f}-{b:.0f} s" for a, b, f in p["events"])
        print(f"  shape: {p['kind']}" + (f" ({p['model']})" if "model" in p else "")
              + f" from {p['start_s']:.0f} s to {p['end_s']:.0f} s"
              + (f": {events}" if events else ""))
    for m, labels in s.get("slo_classes", {}).items():
        print(f"  SLO classes: {m}: " + ", ".join(f"{c} {ms} ms" for ms, c in labels.items()))
    for b in s["bursts"]:
        print(f"  burst: {b['model']} x{b['factor']:g} from {b['start_s']:.1f} s to {b['end_s']:.1f} s")
    for name, m in s["models"].items():
        if m["sessions"] is not None:
            spans = ", ".join(f"{a:.0f}-{b:.0f}" for a, b in m["sessions"]) or "none"
            print(f"  sessions: {name} in use {spans} s")


def main():
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Example: bench/make_trace.py --seed 7 --base-rate 40 --out trace.csv "
               "--models digits-mlp digits-cnn mobilenet_v3_small "
               "--slo-mix 'mobilenet_v3_small=100:0.4,1000:0.6'")
    ap.add_argument("--out", required=True, help="CSV to write ('-' = stdout, summary to stderr)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--duration-s", type=float, default=600)
    ap.add_argument("--base-rate", type=float, default=40,
                    help="mean queries/s of all models together, bursts left out (default 40)")
    ap.add_argument("--models", nargs="+", default=DEFAULT_MODELS, metavar="NAME[:WEIGHT]",
                    help="models, most popular first; without weights Zipf (default: "
                         + " ".join(DEFAULT_MODELS) + ")")
    ap.add_argument("--zipf", type=float, default=1.0, help="Zipf exponent s (default 1)")
    ap.add_argument("--days", type=float, default=1, help="diurnal cycles in the trace (default 1)")
    ap.add_argument("--diurnal-amplitude", type=float, default=0.6,
                    help="A in 1 + A sin(...): peak/trough = (1+A)/(1-A) (default 0.6)")
    ap.add_argument("--bursts", type=int, default=6, help="number of bursts (default 6)")
    ap.add_argument("--burst-factor", default="5:10", help="rate multiplier LO:HI (default 5:10)")
    ap.add_argument("--burst-seconds", default="3:8", help="burst length LO:HI s (default 3:8)")
    ap.add_argument("--burst-models", nargs="+", metavar="NAME",
                    help="only these models burst (default: every model)")
    ap.add_argument("--sessions", action="append", default=[], metavar="MODEL=ON:OFF",
                    help="MODEL is in use in sessions: mean ON s in use, mean OFF s between "
                         "(exponential); repeatable; default: always in use")
    ap.add_argument("--slo-mix", action="append", default=[], metavar="MODEL=MS:SHARE[,...]",
                    help="latency SLO mix of a model ('*' = every model not named); repeatable; "
                         "defaults: per demo model, see DEFAULT_SLO_MIX")
    ap.add_argument("--min-accuracy", action="append", default=[], metavar="MODEL=X",
                    help="add a min_accuracy column with X for MODEL's queries; repeatable")
    ap.add_argument("--shape", choices=SHAPES, default="default",
                    help="load shape on every model (default: the sine and the bursts above)")
    ap.add_argument("--spikes", type=int, default=-1,
                    help="--shape spiky: spikes (default one per 300 s, at least 1)")
    ap.add_argument("--surges", type=int, default=-1,
                    help="--shape surge: surges (default one per 300 s, at least 1)")
    ap.add_argument("--surge-factor", default="5:10", help="surge multiplier LO:HI (default 5:10)")
    ap.add_argument("--minute-s", type=float, default=60,
                    help="--shape azure: the length of one step of the per-minute series "
                         "(default 60)")
    ap.add_argument("--flashes", type=int, default=-1,
                    help="--shape twitter: flash crowds (default one per 200 s, at least 1)")
    ap.add_argument("--slo-classes", metavar="NAME=F:SHARE[,...]",
                    help="SLO classes, e.g. tight=0.5:0.2,normal=1:0.5,relaxed=5:0.3: F times "
                         "the model's reference SLO (instead of --slo-mix)")
    ap.add_argument("--slo-ref", action="append", default=[], metavar="MODEL=MS",
                    help="reference SLO of MODEL ('*' = the rest) for --slo-classes")
    ap.add_argument("--summary-json", help="also write the summary, with per-second counts, here")
    ap.add_argument("--quiet", action="store_true", help="print no summary")
    args = ap.parse_args()

    models, slo_mix, accuracy, bursts, curves, rows = build(args)
    header = "timestamp_ms,model,latency_slo_ms" + (",min_accuracy" if accuracy else "")
    lines = [header]
    for ts, name, slo in rows:
        line = f"{ts:.3f},{name},{fmt_num(slo)}"
        if accuracy:
            line += "," + (fmt_num(accuracy[name]) if name in accuracy else "")
        lines.append(line)
    text = "\n".join(lines) + "\n"
    if args.out == "-":
        sys.stdout.write(text)
    else:
        with open(args.out, "w", newline="\n") as f:
            f.write(text)
    summary = summarize(args, models, slo_mix, bursts, curves, rows)
    # The options added with --shape appear only when used, so that a
    # default run's summary is what it always was.
    new_defaults = {"shape": "default", "spikes": -1, "surges": -1, "surge_factor": "5:10",
                    "slo_classes": None, "slo_ref": [], "minute_s": 60, "flashes": -1}
    summary["args"] = {k: v for k, v in vars(args).items()
                       if k not in ("quiet", "shape_plan", "slo_class_of")
                       and not (k in new_defaults and v == new_defaults[k] and args.shape == "default")
                       and not (k == "minute_s" and args.shape != "azure")
                       and not (k == "flashes" and args.shape != "twitter")}
    if args.summary_json:
        with open(args.summary_json, "w") as f:
            json.dump(summary, f, indent=1)
            f.write("\n")
    if not args.quiet:
        old = sys.stdout
        if args.out == "-":
            sys.stdout = sys.stderr
        print_summary(summary, args.out)
        sys.stdout = old


if __name__ == "__main__":
    main()
