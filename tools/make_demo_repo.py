#!/usr/bin/python3
"""Generates somm's demo model repository.

    /usr/bin/python3 tools/make_demo_repo.py [--out models/demo] [--force] [--configs-only]

Run it with Debian's /usr/bin/python3 (python3-torch, python3-torchvision,
python3-sklearn); no network access is needed.

Layout written (see README.md, "Model repository"):

    <out>/<model>/model.yaml
    <out>/<model>/1/model.pt                  TorchScript
    <out>/<model>/1/validation/               held-out data (digits models)
        inputs.bin   little-endian float32, N x 64, row-major
        labels.bin   little-endian int64, N
        meta.json
    <out>/digits-png/pipeline.yaml            a pipeline (docs/pipelines.md), labels.txt
    <out>/digits-cascade/pipeline.yaml        a cascade pipeline, labels.txt
    <out>/.examples/digit_<c>.json            OIP v2 REST infer request bodies
    <out>/.examples/digit_<c>.png             the same digits as 32x32 PNGs
    <out>/.examples/resnet_input.json         an OIP v2 request for the ImageNet models
    <out>/.examples/expected.json             what torch.jit.load gives for each example
    <out>/.stamp                              hash of this script; see below

Models:
  digits-logistic, digits-mlp, digits-cnn   trained here on scikit-learn's
      bundled digits (8x8, pixel values 0..16); input `pixels` FP32 [64] in raw
      0..16 units (each model divides by 16 itself), output `logits` FP32 [10].
      Accuracy is measured by running the saved TorchScript file on a held-out
      stratified 25% split, and written into model.yaml.
  resnet18, mobilenet_v3_small              torchvision architectures with
      RANDOM weights (no pretrained checkpoint is available offline); input
      `image` FP32 [3,224,224] (already normalised), output `logits` FP32 [1000].
      For compute and performance work only.

Pipelines:
  digits-png                                PNG bytes (one BYTES element per image) ->
      decode to 8x8 grayscale in 0..16 units -> the classification/digits task
      (somm picks the model and variant per query, min_accuracy 0.95) ->
      softmax and the top 3 classes with their names.
  digits-cascade                            pixels FP32 [64] (as the digits models take
      them) -> digits-logistic, and digits-cnn only for the samples whose
      softmax top-1 on digits-logistic is below a threshold that somm chooses
      when it loads the pipeline, on digits-logistic's validation data, for
      an accuracy of 0.97 -> the class with its name, and which stage
      answered. Pixels in, not PNG, so that bench/cascade.py compares it with
      digits-cnn alone on exactly the inputs of the held-out split.

Everything is seeded, so two runs produce the same models and figures.

Caching: <out>/.stamp holds a hash of this file. When it matches (and the
generated files are present) the script prints "demo repository up to date"
and exits at once, without importing torch; --force regenerates. The new
repository is built in a temporary folder next to <out> and renamed into place,
so an interrupted run never leaves a half-written repository. Entries of <out>
that this script did not generate (e.g. models registered later) are carried
over; the variant cache <out>/.somm/variants/<model> of each regenerated model
is dropped, because it was built from the old model.pt.

--configs-only rewrites the model.yaml files of an existing repository in
place (model.pt, validation data and the measured accuracy stay) and stamps it
up to date. Use it after a change to this script that touches only the
configs (say, a batching setting): training and tracing take minutes, and
since every step is seeded a full run would rebuild the same model.pt files.
On another machine an old repository is simply regenerated in full.
"""

import argparse
import fcntl
import hashlib
import json
import os
import shutil
import signal
import struct
import sys
import tempfile
import time
import zlib

SCRIPT_PATH = os.path.abspath(__file__)

DIGITS_MODELS = ["digits-logistic", "digits-mlp", "digits-cnn"]
IMAGENET_MODELS = ["resnet18", "mobilenet_v3_small"]
ALL_MODELS = DIGITS_MODELS + IMAGENET_MODELS
PIPELINES = ["digits-png", "digits-cascade"]
VERSION = "1"

SEED = 0
TEST_FRACTION = 0.25
SPLIT_SEED = 0  # sklearn train_test_split random_state
IMAGENET_INPUT_SEED = 1234

DIGITS_SPLIT_SOURCE = ("a held-out 25% stratified split ({n} samples) of scikit-learn's bundled "
                       "digits (sklearn.datasets.load_digits, train_test_split random_state=0)")

IMAGENET_MEAN = [0.485, 0.456, 0.406]
IMAGENET_STD = [0.229, 0.224, 0.225]

# Files whose presence the up-to-date check requires, relative to <out>.
REQUIRED_FILES = (
    [os.path.join(m, "model.yaml") for m in ALL_MODELS]
    + [os.path.join(m, VERSION, "model.pt") for m in ALL_MODELS]
    + [os.path.join(m, VERSION, "validation", "meta.json") for m in DIGITS_MODELS]
    + [os.path.join(".examples", "expected.json"), os.path.join(".examples", "resnet_input.json")]
    + [os.path.join(p, "pipeline.yaml") for p in PIPELINES]
)
# Top-level entries of <out> that this script owns; anything else is carried over.
GENERATED_ENTRIES = set(ALL_MODELS) | set(PIPELINES) | {".examples", ".stamp", ".somm"}


def script_digest():
    with open(SCRIPT_PATH, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def is_up_to_date(out, digest):
    try:
        with open(os.path.join(out, ".stamp")) as f:
            if f.read().strip() != digest:
                return False
    except OSError:
        return False
    return all(os.path.isfile(os.path.join(out, p)) for p in REQUIRED_FILES)


# --------------------------------------------------------------------------- small writers

def write_png_gray(path, pixels_2d):
    """Writes an 8-bit grayscale PNG with the standard library only."""
    height = len(pixels_2d)
    width = len(pixels_2d[0])

    def chunk(tag, data):
        return (struct.pack(">I", len(data)) + tag + data
                + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF))

    raw = b"".join(b"\x00" + bytes(row) for row in pixels_2d)  # filter type 0 per row
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)  # 8-bit, grayscale
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr)
                + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def f32_json_values(array):
    """float32 values -> Python floats whose JSON text is the shortest decimal that
    parses back to the same float32 (keeps the JSON small and exact)."""
    import numpy as np
    flat = np.asarray(array, dtype=np.float32).reshape(-1)
    return [float(np.format_float_positional(v, unique=True, trim="0")) for v in flat]


def write_json(path, obj, compact=False):
    with open(path, "w") as f:
        if compact:
            json.dump(obj, f, separators=(",", ":"))
        else:
            json.dump(obj, f, indent=2)
        f.write("\n")


def write_yaml(path, obj, header):
    import yaml
    text = yaml.safe_dump(obj, sort_keys=False, default_flow_style=None, width=100)
    with open(path, "w") as f:
        f.write(header + text)


# --------------------------------------------------------------------------- models

def build_digits_modules():
    import torch
    from torch import nn

    class DigitsLogistic(nn.Module):
        """Softmax regression: one Linear(64, 10) on pixels / 16."""

        def __init__(self):
            super().__init__()
            self.linear = nn.Linear(64, 10)

        def forward(self, pixels: torch.Tensor) -> torch.Tensor:
            return self.linear(pixels / 16.0)

    class DigitsMLP(nn.Module):
        """64 -> 256 -> 128 -> 10 with ReLU, on pixels / 16."""

        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(
                nn.Linear(64, 256), nn.ReLU(),
                nn.Linear(256, 128), nn.ReLU(),
                nn.Linear(128, 10))

        def forward(self, pixels: torch.Tensor) -> torch.Tensor:
            return self.net(pixels / 16.0)

    class DigitsCNN(nn.Module):
        """Two 3x3 conv layers on the [B,1,8,8] image, max-pool, two Linear layers."""

        def __init__(self):
            super().__init__()
            self.features = nn.Sequential(
                nn.Conv2d(1, 32, kernel_size=3, padding=1), nn.ReLU(),
                nn.Conv2d(32, 64, kernel_size=3, padding=1), nn.ReLU(),
                nn.MaxPool2d(2))
            self.classifier = nn.Sequential(
                nn.Flatten(), nn.Dropout(0.25),
                nn.Linear(64 * 4 * 4, 128), nn.ReLU(),
                nn.Linear(128, 10))

        def forward(self, pixels: torch.Tensor) -> torch.Tensor:
            x = (pixels / 16.0).reshape(-1, 1, 8, 8)
            return self.classifier(self.features(x))

    return DigitsLogistic, DigitsMLP, DigitsCNN


# name -> (module factory index, optimizer, learning rate, epochs, description)
DIGITS_TRAINING = {
    "digits-logistic": dict(
        arch=0, optimizer="sgd", lr=0.1, epochs=3,
        description=("Softmax regression (a single Linear 64->10) on 8x8 digits, deliberately "
                     "under-trained (3 epochs of plain SGD): the smallest and fastest digits model, "
                     "and clearly the least accurate.")),
    "digits-mlp": dict(
        arch=1, optimizer="adam", lr=1e-3, epochs=20,
        description=("Multi-layer perceptron 64->256->128->10 with ReLU on 8x8 digits "
                     "(20 epochs of Adam): mid-sized, mid accuracy.")),
    "digits-cnn": dict(
        arch=2, optimizer="adam", lr=1e-3, epochs=12,
        description=("Small CNN on 8x8 digits: the [B,64] input is reshaped to [B,1,8,8], then "
                     "conv3x3(32)-ReLU-conv3x3(64)-ReLU-maxpool-FC(128)-FC(10) (12 epochs of Adam): "
                     "the largest and most accurate digits model.")),
}


def train_digits_model(factory, cfg, x_train, y_train):
    import torch
    from torch import nn

    torch.manual_seed(SEED)
    model = factory()
    if cfg["optimizer"] == "sgd":
        opt = torch.optim.SGD(model.parameters(), lr=cfg["lr"])
    else:
        opt = torch.optim.Adam(model.parameters(), lr=cfg["lr"])
    gen = torch.Generator().manual_seed(SEED)
    batch = 32
    for _ in range(cfg["epochs"]):
        model.train()
        perm = torch.randperm(len(x_train), generator=gen)
        for i in range(0, len(x_train), batch):
            idx = perm[i:i + batch]
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(x_train[idx]), y_train[idx])
            loss.backward()
            opt.step()
    return model.eval()


def digits_yaml(name, accuracy, correct, n_test, description):
    return {
        "name": name,
        "platform": "torchscript",
        "task": "classification/digits",
        "description": description,
        "max_batch_size": 64,
        "inputs": [{"name": "pixels", "datatype": "FP32", "shape": [64]}],
        "outputs": [{"name": "logits", "datatype": "FP32", "shape": [10]}],
        # No queue delay: a lone query runs at once. Batches still form while the
        # instance is busy (src/batching/batcher.h), and a tiny model's batch-1
        # forward (~50 µs) is shorter than any delay worth waiting.
        "dynamic_batching": {"max_queue_delay_us": 0, "preferred_batch_sizes": [16, 32, 64],
                             "max_queue_size": 4096},
        "instance_count": 1,
        "intra_op_threads": 1,
        "version_policy": {"latest": 1},
        "labels": [str(i) for i in range(10)],
        # 0..255 image pixels * 16/255 -> the 0..16 units the model was trained on.
        "preprocessing": {"image": {"channels": 1, "height": 8, "width": 8,
                                    "scale": 0.0627451, "invert": False}},
        "accuracy": {
            "value": round(accuracy, 4),
            "source": ("top-1 on " + DIGITS_SPLIT_SOURCE.format(n=n_test)
                       + f", {correct}/{n_test} correct, measured by tools/make_demo_repo.py "
                         "running the exported TorchScript file"),
        },
    }


def imagenet_yaml(name, description):
    return {
        "name": name,
        "platform": "torchscript",
        "task": "classification/imagenet",
        "description": description,
        "max_batch_size": 8,
        "inputs": [{"name": "image", "datatype": "FP32", "shape": [3, 224, 224]}],
        "outputs": [{"name": "logits", "datatype": "FP32", "shape": [1000]}],
        "dynamic_batching": {"max_queue_delay_us": 1000, "preferred_batch_sizes": [4, 8],
                             "max_queue_size": 256},
        "instance_count": 1,
        "intra_op_threads": 2,
        "version_policy": {"latest": 1},
        "preprocessing": {"image": {"channels": 3, "height": 224, "width": 224,
                                    "scale": 0.00392157, "mean": IMAGENET_MEAN,
                                    "std": IMAGENET_STD}},
        "accuracy": {
            "value": None,
            "source": ("random weights (torchvision architecture, no pretrained checkpoint "
                       "available offline): accuracy unknown, for compute and performance work only"),
        },
    }


IMAGENET_DESCRIPTIONS = {
    "resnet18": ("torchvision ResNet-18 with RANDOM weights (torch.manual_seed(0); no "
                 "pretrained checkpoint offline), traced: a realistic compute load "
                 "(~1.8 GFLOPs/image) for performance work; its predictions mean nothing."),
    "mobilenet_v3_small": ("torchvision MobileNetV3-Small with RANDOM weights "
                           "(torch.manual_seed(0); no pretrained checkpoint offline), traced: "
                           "a light ImageNet-shaped load for performance work; its "
                           "predictions mean nothing."),
}


YAML_HEADER = ("# Generated by tools/make_demo_repo.py; edits are lost when it regenerates.\n"
               "# Schema: src/repository/model_config.h\n")


PIPELINE_HEADER = ("# Generated by tools/make_demo_repo.py; edits are lost when it regenerates.\n"
                   "# Schema: src/pipeline/pipeline_config.h (docs/pipelines.md)\n")
DIGIT_NAMES = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]


def write_pipelines(root):
    """Writes the demo pipelines (configs only: they hold no model file)."""
    folder = os.path.join(root, "digits-png")
    os.makedirs(folder, exist_ok=True)
    config = {
        "name": "digits-png",
        "description": ("A PNG of a digit (one BYTES element per image) -> decoded to 8x8 "
                        "grayscale in the digits models' 0..16 units -> the classification/digits "
                        "task (somm picks the model and variant per query) -> softmax and the top "
                        "3 classes with their names."),
        "max_batch_size": 16,
        "inputs": [{"name": "image", "datatype": "BYTES", "shape": [1]}],
        "outputs": [
            {"name": "label", "datatype": "BYTES", "shape": [3], "from": "top.labels"},
            {"name": "probability", "datatype": "FP32", "shape": [3], "from": "top.scores"},
            {"name": "class", "datatype": "INT64", "shape": [3], "from": "top.classes"},
        ],
        "steps": [
            # 0..255 pixels times 16/255: the scale model.yaml's preprocessing uses.
            {"name": "decode",
             "preprocess": {"channels": 1, "height": 8, "width": 8, "scale": 0.0627451,
                            "max_encoded_bytes": 1 << 20, "max_pixels": 1 << 22},
             "inputs": {"image": "image"}},
            {"name": "classify", "task": "classification/digits", "min_accuracy": 0.95,
             "inputs": {"pixels": "decode.pixels"}},
            {"name": "top", "postprocess": {"softmax": True, "top_k": 3, "labels": "labels.txt"},
             "inputs": {"logits": "classify.logits"}},
        ],
    }
    write_yaml(os.path.join(folder, "pipeline.yaml"), config, PIPELINE_HEADER)
    with open(os.path.join(folder, "labels.txt"), "w") as f:
        f.write("\n".join(DIGIT_NAMES) + "\n")

    folder = os.path.join(root, "digits-cascade")
    os.makedirs(folder, exist_ok=True)
    config = {
        "name": "digits-cascade",
        "description": ("Digits' pixels (FP32 [64], 0..16) -> digits-logistic, then digits-cnn "
                        "only for the samples digits-logistic is not confident in (its softmax "
                        "top-1 below a threshold chosen at load on the validation data for an "
                        "accuracy of 0.97) -> the class with its name, and the stage that "
                        "answered (0: digits-logistic, 1: digits-cnn)."),
        "max_batch_size": 64,
        "inputs": [{"name": "pixels", "datatype": "FP32", "shape": [64]}],
        "outputs": [
            {"name": "label", "datatype": "BYTES", "shape": [1], "from": "top.label"},
            {"name": "probability", "datatype": "FP32", "shape": [1], "from": "top.score"},
            {"name": "class", "datatype": "INT64", "shape": [1], "from": "top.class"},
            {"name": "stage", "datatype": "INT64", "shape": [1], "from": "classify.stage"},
        ],
        "steps": [
            {"name": "classify",
             "cascade": {"models": ["digits-logistic", "digits-cnn"], "confidence": "top_probability",
                         "min_accuracy": 0.97},
             "inputs": {"pixels": "pixels"}},
            {"name": "top", "postprocess": {"softmax": True, "argmax": True, "labels": "labels.txt"},
             "inputs": {"logits": "classify.logits"}},
        ],
    }
    write_yaml(os.path.join(folder, "pipeline.yaml"), config, PIPELINE_HEADER)
    with open(os.path.join(folder, "labels.txt"), "w") as f:
        f.write("\n".join(DIGIT_NAMES) + "\n")


# --------------------------------------------------------------------------- generation

def generate(root):
    """Writes the whole repository under `root` (an empty folder). Returns summary rows."""
    import numpy as np
    import torch
    import torchvision
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    torch.set_num_threads(2)
    torch.manual_seed(SEED)
    np.random.seed(SEED)
    summary = []

    # ---- data
    digits = load_digits()
    x = digits.data.astype(np.float32)  # [1797, 64], values 0..16
    y = digits.target.astype(np.int64)
    x_train, x_test, y_train, y_test = train_test_split(
        x, y, test_size=TEST_FRACTION, stratify=y, random_state=SPLIT_SEED)
    x_test = np.ascontiguousarray(x_test, dtype="<f4")
    y_test = np.ascontiguousarray(y_test, dtype="<i8")
    n_test = len(y_test)
    xt_train, yt_train = torch.from_numpy(x_train), torch.from_numpy(y_train)
    xt_test = torch.from_numpy(x_test)

    # First held-out sample of each class: the examples.
    example_idx = [int(np.flatnonzero(y_test == c)[0]) for c in range(10)]
    examples_dir = os.path.join(root, ".examples")
    os.makedirs(examples_dir)
    example_tensors = {}
    expected = {}
    for c, i in enumerate(example_idx):
        name = f"digit_{c}.json"
        body = {"inputs": [{"name": "pixels", "shape": [1, 64], "datatype": "FP32",
                            "data": f32_json_values(x_test[i])}]}
        write_json(os.path.join(examples_dir, name), body, compact=True)
        # Build the reference input from the JSON as written, so the expected outputs are
        # those of exactly what a client sends.
        with open(os.path.join(examples_dir, name)) as f:
            parsed = json.load(f)["inputs"][0]["data"]
        t = torch.tensor(parsed, dtype=torch.float32).reshape(1, 64)
        assert torch.equal(t, xt_test[i:i + 1]), name
        example_tensors[name] = t
        pix = [[int(round(float(v) * 255.0 / 16.0)) for v in x_test[i][r * 8:(r + 1) * 8]]
               for r in range(8)]
        big = [[pix[r // 4][col // 4] for col in range(32)] for r in range(32)]
        write_png_gray(os.path.join(examples_dir, f"digit_{c}.png"), big)
        expected[name] = {"label": c, "image": f"digit_{c}.png", "test_index": i, "models": {}}

    # ---- digits models
    factories = build_digits_modules()
    for name in DIGITS_MODELS:
        cfg = DIGITS_TRAINING[name]
        t0 = time.time()
        model = train_digits_model(factories[cfg["arch"]], cfg, xt_train, yt_train)
        vdir = os.path.join(root, name, VERSION)
        os.makedirs(os.path.join(vdir, "validation"))
        path = os.path.join(vdir, "model.pt")
        torch.jit.script(model).save(path)
        train_s = time.time() - t0

        # Accuracy of the exported file, not of the Python module.
        loaded = torch.jit.load(path).eval()
        with torch.no_grad():
            pred = loaded(xt_test).argmax(dim=1).numpy()
            # Batched and single-sample execution must agree on the examples.
            for ex_name, t in example_tensors.items():
                logits = loaded(t)[0]
                expected[ex_name]["models"][name] = {
                    "class": int(logits.argmax()),
                    "logits": f32_json_values(logits.numpy()),
                }
                # What `somm infer --image digit_<c>.png` feeds the model: 0..255 pixels
                # * 16/255 (the yaml's scale), i.e. slightly off the raw 0..16 values.
                png_in = (torch.round(t * 255.0 / 16.0) * 0.0627451).to(torch.float32)
                expected[ex_name]["models"][name]["class_from_png"] = int(loaded(png_in)[0].argmax())
        correct = int((pred == y_test).sum())
        accuracy = correct / n_test
        params = sum(p.numel() for p in loaded.parameters())

        write_yaml(os.path.join(root, name, "model.yaml"),
                   digits_yaml(name, accuracy, correct, n_test, cfg["description"]), YAML_HEADER)
        vpath = os.path.join(vdir, "validation")
        x_test.tofile(os.path.join(vpath, "inputs.bin"))
        y_test.tofile(os.path.join(vpath, "labels.bin"))
        write_json(os.path.join(vpath, "meta.json"), {
            "count": n_test, "input": "pixels", "datatype": "FP32", "shape": [64],
            "labels_datatype": "INT64",
            "files": {"inputs": "inputs.bin", "labels": "labels.bin"},
            "layout": "inputs.bin: little-endian float32, count x 64, row-major, raw pixel "
                      "values 0..16; labels.bin: little-endian int64, count",
            "source": DIGITS_SPLIT_SOURCE.format(n=n_test),
        })
        summary.append((name, params, accuracy, os.path.getsize(path), train_s))

    # ---- ImageNet architectures with random weights
    g = torch.Generator().manual_seed(IMAGENET_INPUT_SEED)
    pixels = torch.randint(0, 256, (1, 3, 224, 224), generator=g, dtype=torch.int64)
    mean = torch.tensor(IMAGENET_MEAN).reshape(1, 3, 1, 1)
    std = torch.tensor(IMAGENET_STD).reshape(1, 3, 1, 1)
    image = ((pixels.to(torch.float32) / 255.0 - mean) / std).to(torch.float32)
    body = {"inputs": [{"name": "image", "shape": [1, 3, 224, 224], "datatype": "FP32",
                        "data": f32_json_values(image.numpy())}]}
    rpath = os.path.join(examples_dir, "resnet_input.json")
    write_json(rpath, body, compact=True)
    with open(rpath) as f:
        image = torch.tensor(json.load(f)["inputs"][0]["data"], dtype=torch.float32)
    image = image.reshape(1, 3, 224, 224)
    expected["resnet_input.json"] = {
        "label": None,
        "about": (f"uniform random 0..255 pixels (torch.Generator seed {IMAGENET_INPUT_SEED}) "
                  "normalised with the ImageNet mean/std; the models have random weights"),
        "models": {},
    }

    for name in IMAGENET_MODELS:
        t0 = time.time()
        torch.manual_seed(SEED)
        model = getattr(torchvision.models, name)(weights=None).eval()
        example = torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(SEED))
        vdir = os.path.join(root, name, VERSION)
        os.makedirs(vdir)
        path = os.path.join(vdir, "model.pt")
        with torch.no_grad():
            traced = torch.jit.trace(model, example)
        traced.save(path)
        loaded = torch.jit.load(path).eval()
        with torch.no_grad():
            # The trace used batch 1; it must still batch correctly.
            batch = torch.cat([example, image, -example], dim=0)
            ref = model(batch)
            got = loaded(batch)
            if got.shape != (3, 1000) or not torch.allclose(got, ref, rtol=1e-4, atol=1e-4):
                raise RuntimeError(f"{name}: traced model disagrees with eager at batch 3")
            logits = loaded(image)[0]
        expected["resnet_input.json"]["models"][name] = {
            "class": int(logits.argmax()),
            "logits": f32_json_values(logits.numpy()),
        }
        write_yaml(os.path.join(root, name, "model.yaml"),
                   imagenet_yaml(name, IMAGENET_DESCRIPTIONS[name]), YAML_HEADER)
        params = sum(p.numel() for p in loaded.parameters())
        summary.append((name, params, None, os.path.getsize(path), time.time() - t0))

    write_json(os.path.join(examples_dir, "expected.json"), expected)
    write_pipelines(root)
    return summary


def rewrite_configs(out):
    """Rewrites every model.yaml of an existing repository from the templates
    above, without touching model.pt: the digits accuracy is carried over from
    the model.yaml present (its held-out count from validation/meta.json).
    For changes to this script that touch only the configs; see --configs-only."""
    import yaml
    missing = [p for p in REQUIRED_FILES
               if not os.path.isfile(os.path.join(out, p)) and not p.endswith("pipeline.yaml")]
    if missing:
        sys.exit(f"make_demo_repo.py: --configs-only needs a generated repository; "
                 f"{out} lacks {missing[0]} (run without --configs-only)")
    for name in ALL_MODELS:
        path = os.path.join(out, name, "model.yaml")
        if name in DIGITS_MODELS:
            with open(path) as f:
                accuracy = yaml.safe_load(f)["accuracy"]["value"]
            with open(os.path.join(out, name, VERSION, "validation", "meta.json")) as f:
                n_test = json.load(f)["count"]
            # The yaml keeps 4 decimals, finer than 1/n_test: the count is exact.
            correct = round(accuracy * n_test)
            config = digits_yaml(name, correct / n_test, correct, n_test,
                                 DIGITS_TRAINING[name]["description"])
        else:
            config = imagenet_yaml(name, IMAGENET_DESCRIPTIONS[name])
        write_yaml(path + ".tmp", config, YAML_HEADER)
        os.replace(path + ".tmp", path)
        print(f"rewrote {path}")
    write_pipelines(out)
    print(f"rewrote the pipelines {', '.join(PIPELINES)}")


def swap_into_place(tmp, out):
    """Carries user entries of an existing <out> into tmp, then renames tmp to <out>."""
    if os.path.isdir(out):
        for entry in os.listdir(out):
            if entry not in GENERATED_ENTRIES and not os.path.exists(os.path.join(tmp, entry)):
                os.rename(os.path.join(out, entry), os.path.join(tmp, entry))
        old_somm = os.path.join(out, ".somm")
        if os.path.isdir(old_somm):
            os.rename(old_somm, os.path.join(tmp, ".somm"))
            for model in ALL_MODELS:  # built from the old model.pt files: stale
                shutil.rmtree(os.path.join(tmp, ".somm", "variants", model), ignore_errors=True)
        parent, base = os.path.split(out)
        old = os.path.join(parent, f".{base}.old-{os.getpid()}")
        os.rename(out, old)
        os.rename(tmp, out)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.rename(tmp, out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="models/demo", help="repository folder (models/demo)")
    parser.add_argument("--force", action="store_true", help="regenerate even if up to date")
    parser.add_argument("--configs-only", action="store_true",
                        help="rewrite the model.yaml files of an existing repository and mark it "
                             "up to date, keeping model.pt and the measured accuracy: only for "
                             "changes to this script that touch nothing but the configs")
    args = parser.parse_args()

    out = os.path.abspath(args.out)
    digest = script_digest()
    if not args.force and is_up_to_date(out, digest):
        print("demo repository up to date")
        return 0

    if os.environ.get("PYTHONHASHSEED") != "0":
        # TorchScript serialisation iterates Python sets (e.g. the order of Final constants),
        # so model.pt is only byte-for-byte reproducible with a fixed string hash seed.
        os.environ["PYTHONHASHSEED"] = "0"
        os.execv(sys.executable, [sys.executable, SCRIPT_PATH] + sys.argv[1:])

    parent, base = os.path.split(out)
    os.makedirs(parent, exist_ok=True)
    # One generator at a time per output folder (two setups started together).
    # (flock on the parent folder itself, so no lock file is left behind.)
    lock_fd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX)
        if args.configs_only:
            rewrite_configs(out)
            with open(os.path.join(out, ".stamp"), "w") as f:
                f.write(digest + "\n")
            return 0
        if not args.force and is_up_to_date(out, digest):
            print("demo repository up to date")
            return 0
        # Leftovers of runs that were killed (we hold the lock, so none is live).
        for entry in os.listdir(parent):
            if entry.startswith(f".{base}.tmp-") or entry.startswith(f".{base}.old-"):
                shutil.rmtree(os.path.join(parent, entry), ignore_errors=True)

        # SIGTERM (e.g. a CI timeout) unwinds like Ctrl-C, so the temp folder is removed.
        signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
        start = time.time()
        print(f"generating demo model repository in {out} ...", flush=True)
        tmp = tempfile.mkdtemp(prefix=f".{base}.tmp-", dir=parent)
        os.chmod(tmp, 0o755)  # mkdtemp makes it 0700
        try:
            summary = generate(tmp)
            with open(os.path.join(tmp, ".stamp"), "w") as f:
                f.write(digest + "\n")
            swap_into_place(tmp, out)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    finally:
        os.close(lock_fd)  # releases the lock

    print()
    print(f"{'model':<20} {'params':>10} {'accuracy':>9} {'model.pt':>10} {'build s':>8}")
    for name, params, acc, size, secs in summary:
        acc_s = f"{acc:.4f}" if acc is not None else "n/a"
        print(f"{name:<20} {params:>10,} {acc_s:>9} {size / 1e6:>8.2f}MB {secs:>8.1f}")
    print(f"\nwrote {out} in {time.time() - start:.1f} s "
          "(digits accuracy: top-1 on the held-out split, running the saved TorchScript)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
