#!/usr/bin/python3
"""Hostile TorchScript files for hostile_model_e2e_test (docs/hostile-input.md).

Usage: /usr/bin/python3 tests/make_hostile_models.py SOURCE_MODEL OUT_DIR

Writes, from a valid TorchScript file (a digits model):
  huge_storage.pt  its first storage declares 2^31-1 floats over a 64 KiB
                   record (libtorch 1.13 trusts the declaration; writing a
                   variant of it read past the buffer and crashed somm);
  huge_shape.pt    its first weight declares a [2^31-1, 64] view;
  huge_view.pt     a model that answers, with an unused buffer whose view is
                   [2^31-1, 4] over 64 bytes (a bf16 variant reads all of it);
  loops.pt         a valid archive whose forward never returns (a counted
                   loop with no end), for the registration sandbox;
  eats_memory.pt   a valid archive whose forward allocates 64 MiB tensors,
                   and keeps them, until allocation fails;
  runs_large.pt    a file of a few KiB whose forward writes a 256 MiB
                   tensor, once, and answers (a tenant's memory quota must
                   charge what it takes when it runs, not its file's size).
The truncated, random and corrupted files the test makes itself.
"""
import os
import pickletools
import struct
import sys
import zipfile
from typing import List

import torch


def rewrite(source, path, pickle_name, pickle_bytes):
    with zipfile.ZipFile(source) as z, zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as w:
        for info in z.infolist():
            body = pickle_bytes if info.filename == pickle_name else z.read(info.filename)
            w.writestr(zipfile.ZipInfo(info.filename, info.date_time), body)


def widen(data, ops, index):
    """The small integer at ops[index] replaced by a BININT of 2^31-1."""
    op, _, pos = ops[index]
    width = {"BININT1": 2, "BININT2": 3}[op.name]
    return data[:pos] + b"J" + struct.pack("<i", 0x7FFFFFFF) + data[pos + width:]


def data_pickle(path):
    with zipfile.ZipFile(path) as z:
        name = [n for n in z.namelist() if n.endswith("/data.pkl")][0]
        data = z.read(name)
    return name, data, list(pickletools.genops(data))


def main():
    source, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    name, data, ops = data_pickle(source)
    first_pid = next(i for i, (op, _, _) in enumerate(ops) if op.name == "BINPERSID")
    # ('storage', type, key, location, numel) TUPLE BINPERSID: numel is two back.
    rewrite(source, os.path.join(out, "huge_storage.pt"), name, widen(data, ops, first_pid - 2))
    # After the persistent id: the storage offset, then the first size.
    ints = [i for i in range(first_pid + 1, len(ops)) if ops[i][0].name in ("BININT1", "BININT2")]
    rewrite(source, os.path.join(out, "huge_shape.pt"), name, widen(data, ops, ints[1]))

    class WithBuffer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(64, 10)
            self.register_buffer("pad", torch.zeros(16, 4))

        def forward(self, pixels):
            return self.lin(pixels)

    plain = os.path.join(out, "with_buffer.pt")
    torch.jit.script(WithBuffer()).save(plain)
    name, data, ops = data_pickle(plain)
    # The buffer is the 16x4 tensor: the first size 16 after a persistent id.
    pids = [i for i, (op, _, _) in enumerate(ops) if op.name == "BINPERSID"]
    target = next(j for p in pids for j in range(p + 1, min(p + 6, len(ops)))
                  if ops[j][0].name == "BININT1" and ops[j][1] == 16)
    rewrite(plain, os.path.join(out, "huge_view.pt"), name, widen(data, ops, target))
    os.remove(plain)

    # The signature of the digits models (pixels FP32 [64] -> logits [10]),
    # so that each loads, passes every check, and misbehaves only when run.
    class Loops(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(64, 10)

        def forward(self, pixels):
            x = pixels
            i = 0
            while i >= 0:
                x = x * 1.0
                i += 1
            return self.lin(x)

    class EatsMemory(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(64, 10)

        def forward(self, pixels):
            held: List[torch.Tensor] = []
            i = 0
            while i >= 0:
                held.append(torch.ones(16 * 1024 * 1024) * i)  # 64 MiB, written
                i += 1
            # Used after the loop, so that the compiler keeps what it holds.
            return self.lin(pixels) + held[-1].sum()

    class RunsLarge(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(64, 10)

        def forward(self, pixels):
            scratch = torch.ones(64 * 1024 * 1024)  # 256 MiB, written
            return self.lin(pixels) + scratch[-1] - 1.0

    torch.jit.script(Loops()).save(os.path.join(out, "loops.pt"))
    torch.jit.script(RunsLarge()).save(os.path.join(out, "runs_large.pt"))
    torch.jit.script(EatsMemory()).save(os.path.join(out, "eats_memory.pt"))


if __name__ == "__main__":
    main()
