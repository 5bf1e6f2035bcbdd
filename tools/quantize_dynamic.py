#!/usr/bin/python3
"""Dynamic int8 quantisation of a TorchScript file (somm's ts-int8 variant).

    /usr/bin/python3 tools/quantize_dynamic.py SRC.pt DST.pt

libtorch's C++ API has no quantize_dynamic, and eager-mode
torch.ao.quantization.quantize_dynamic cannot take a TorchScript module, so
this uses graph-mode dynamic quantisation: quantize_dynamic_jit rewrites every
aten::linear whose weight is a module attribute into
quantized::linear_dynamic (int8 weights, activations quantised per batch at
run time) and freezes the result. Inputs and outputs stay FP32, so the
variant keeps the registered model's signature.

Graph mode in torch 1.13 quantises Linear only: aten::lstm / aten::gru stay
FP32 (reported on stdout). Eager-mode RNN quantisation needs the Python
nn.Module, which a registered TorchScript file does not carry.

Exit codes: 0 = written; the last stdout line describes what was quantised.
3 = nothing to quantise (the message says why; somm records the variant as
skipped). 1 = failure (the message says what failed).
"""

import sys
import warnings


def _kinds(module):
    return [n.kind() for n in module.inlined_graph.nodes()]


def main(argv):
    if len(argv) != 3:
        print("usage: quantize_dynamic.py SRC.pt DST.pt", file=sys.stderr)
        return 1
    src, dst = argv[1], argv[2]
    warnings.simplefilter("ignore")
    import torch
    from torch.ao.quantization import default_dynamic_qconfig, quantize_dynamic_jit

    try:
        model = torch.jit.load(src, map_location="cpu")
    except Exception as e:  # torch raises RuntimeError subclasses of many kinds
        print(f"cannot load TorchScript file {src}: {str(e).splitlines()[0]}")
        return 1
    model.eval()
    kinds = _kinds(model)
    linears = kinds.count("aten::linear")
    rnns = kinds.count("aten::lstm") + kinds.count("aten::gru")
    if linears == 0:
        if rnns:
            print(f"the model's only quantisable layers are {rnns} LSTM/GRU layer(s); graph-mode "
                  f"dynamic quantisation in torch {torch.__version__} handles Linear only")
        else:
            print("the model has no Linear, LSTM or GRU layers to quantise dynamically")
        return 3

    try:
        quantized = quantize_dynamic_jit(model, {"": default_dynamic_qconfig})
    except Exception as e:
        print(f"quantize_dynamic_jit failed: {str(e).splitlines()[0]}")
        return 1
    done = _kinds(quantized).count("quantized::linear_dynamic")
    if done == 0:
        print(f"none of the model's {linears} Linear layer(s) could be quantised "
              "(their weights are not module parameters)")
        return 3
    # quantize_dynamic_jit has already frozen the module (quant_finalize).
    quantized.save(dst)
    note = f"; {rnns} LSTM/GRU layer(s) left in fp32" if rnns else ""
    print(f"dynamic int8: {done} of {linears} Linear layer(s) "
          f"(quantize_dynamic_jit, {torch.backends.quantized.engine} weights){note}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
