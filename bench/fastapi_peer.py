#!/usr/bin/python3
"""fastapi_peer.py: the naive-Python baseline that bench/compare.sh measures somm against.

It is the server a team writes when it has no serving system: FastAPI on
uvicorn, one TorchScript file loaded with torch.jit.load, one query per
forward call (no batching, no variants, no queue of its own). It speaks the
JSON form of the Open Inference Protocol v2 (the KServe v2 REST API), enough
of it for `somm bench` to drive it with the very requests it sends to
`somm serve`:

    GET  /v2                          server metadata
    GET  /v2/health/live              server health
    GET  /v2/health/ready
    GET  /v2/models/{name}            model metadata (tensors from model.yaml, see --config)
    GET  /v2/models/{name}/ready      model health
    POST /v2/models/{name}/infer      inference, tensors as JSON "data" arrays

Errors answer {"error": "..."} with 400 (a body it cannot read, a model that
fails on it) or 404 (another model name), as the protocol asks.

It stays naive on purpose. The infer handler is a coroutine, so uvicorn's
event loop reads the body, parses the JSON, runs the model and writes the
answer for one query before it looks at the next: one Python process, one
query at a time, whatever the concurrency. That is the baseline; a faster
peer would change what the comparison says.

Needs Debian's /usr/bin/python3 with python3-fastapi, python3-uvicorn and
python3-torch (python3-yaml for the metadata's tensors). bench/compare.sh
starts it once per model, on a free port, and waits for /v2/health/ready:

    /usr/bin/python3 bench/fastapi_peer.py --model models/demo/digits-mlp/1/model.pt \\
        --name digits-mlp --port 8100 --threads 1
"""
import argparse
import os

import torch
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

# Protocol datatype names and the torch dtypes they decode to (BYTES has none).
DATATYPES = {
    "BOOL": torch.bool,
    "UINT8": torch.uint8,
    "INT8": torch.int8,
    "INT16": torch.int16,
    "INT32": torch.int32,
    "INT64": torch.int64,
    "FP16": torch.float16,
    "FP32": torch.float32,
    "FP64": torch.float64,
}
DATATYPE_OF = {dtype: name for name, dtype in DATATYPES.items()}


def load_config(model_path, config_path):
    """The model's model.yaml as a dict: CONFIG_PATH when given, else the
    model.yaml of the repository layout <repo>/<name>/<version>/model.pt when
    it is there (and PyYAML is), else {} (metadata then lists no tensors)."""
    if config_path is None:
        guess = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(model_path))),
                             "model.yaml")
        if not os.path.isfile(guess):
            return {}
        config_path = guess
    try:
        import yaml
    except ImportError:
        return {}
    with open(config_path) as f:
        return yaml.safe_load(f) or {}


def tensor_metadata(entries, batched):
    """OIP tensor metadata from model.yaml's inputs or outputs; a model that
    batches gets a leading -1 (any batch size)."""
    lead = [-1] if batched else []
    return [{"name": e["name"], "datatype": e["datatype"], "shape": lead + list(e["shape"])}
            for e in entries]


def decode_input(item):
    """One request input as a tensor of its declared datatype and shape."""
    dtype = DATATYPES.get(item["datatype"])
    if dtype is None:
        raise ValueError(f"datatype '{item['datatype']}' is not supported here")
    return torch.tensor(item["data"], dtype=dtype).reshape(item["shape"])


def encode_output(name, tensor):
    """One response output, data flattened in row-major order."""
    if tensor.dtype not in DATATYPE_OF:
        tensor = tensor.float()
    return {"name": name, "datatype": DATATYPE_OF[tensor.dtype],
            "shape": list(tensor.shape), "data": tensor.flatten().tolist()}


def error(status, message):
    return JSONResponse({"error": message}, status_code=status)


def make_app(model_path, name, threads, config):
    torch.set_num_threads(threads)
    model = torch.jit.load(model_path, map_location="cpu").eval()
    version = os.path.basename(os.path.dirname(os.path.abspath(model_path)))
    batched = int(config.get("max_batch_size", 0) or 0) > 0
    output_names = [o["name"] for o in config.get("outputs", [])]
    metadata = {
        "name": name,
        "versions": [version] if version.isdigit() else [],
        "platform": config.get("platform", "torchscript"),
        "inputs": tensor_metadata(config.get("inputs", []), batched),
        "outputs": tensor_metadata(config.get("outputs", []), batched),
    }

    app = FastAPI(title="fastapi-peer", openapi_url=None, docs_url=None, redoc_url=None)

    def unknown(model_name):
        return error(404, f"unknown model '{model_name}' (this server has only '{name}')")

    @app.get("/v2")
    def server_metadata():
        return {"name": "fastapi-peer", "version": torch.__version__, "extensions": []}

    @app.get("/v2/health/live")
    def live():
        return {}

    @app.get("/v2/health/ready")
    def ready():
        return {}

    @app.get("/v2/models/{model_name}")
    def model_metadata(model_name: str):
        return metadata if model_name == name else unknown(model_name)

    @app.get("/v2/models/{model_name}/ready")
    def model_ready(model_name: str):
        return {} if model_name == name else unknown(model_name)

    @app.post("/v2/models/{model_name}/infer")
    async def infer(model_name: str, request: Request):
        if model_name != name:
            return unknown(model_name)
        try:
            body = await request.json()
            inputs = [decode_input(item) for item in body["inputs"]]
        except (KeyError, IndexError, TypeError, ValueError, RuntimeError) as e:
            return error(400, f"cannot read the request: {e}")
        if not inputs:
            return error(400, "the request has no inputs")
        try:
            with torch.inference_mode():
                result = model(*inputs)
        except RuntimeError as e:
            # TorchScript errors carry the script's traceback; the last line says what failed.
            return error(400, f"the model failed on this input: {str(e).strip().splitlines()[-1]}")
        tensors = list(result) if isinstance(result, (tuple, list)) else [result]
        names = output_names if len(output_names) == len(tensors) else \
            [f"output__{i}" for i in range(len(tensors))]
        answer = {"model_name": name, "outputs": [encode_output(n, t) for n, t in zip(names, tensors)]}
        if version.isdigit():
            answer["model_version"] = version
        if "id" in body:
            answer["id"] = body["id"]
        return answer

    return app


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="TorchScript file (model.pt)")
    ap.add_argument("--name", default="model", help="model name in the URLs (default: model)")
    ap.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    ap.add_argument("--port", type=int, default=8100, help="port (default: 8100)")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch intra-op threads (compare.sh passes the model's intra_op_threads)")
    ap.add_argument("--config", default=None,
                    help="model.yaml for the metadata's tensors (default: the one two folders "
                         "above --model, if any)")
    args = ap.parse_args()
    app = make_app(args.model, args.name, args.threads, load_config(args.model, args.config))
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
