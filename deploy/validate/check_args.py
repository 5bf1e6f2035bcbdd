#!/usr/bin/python3
"""Runs every somm container's args from the rendered manifests through the
binary's own flag checks, so that a manifest can never ask for a flag, a
flag combination or a file the binary refuses (deploy/README.md):

  for each container of each workload whose args start with a somm
  subcommand (router, worker, controller, serve), in `kubectl kustomize` of
  each --kustomize DIR and in each --render FILE (the chart, rendered):
    - $(VAR) references are replaced as Kubernetes would: the container's env
      values, and plausible downward-API values (pod name, 127.0.0.1 for the
      pod IP, the namespace, a CPU limit);
    - every volume gets a folder: a Secret's files from the Secrets of
      deploy/make-secrets (made here, in a temporary folder: real keys and
      certificates of a throw-away CA) or from the render itself, an emptyDir
      an empty folder, the model repository models/demo (or an empty one);
      paths under a mount in args and env (alone, or inside a value such as
      --flag=PATH or rediss://...?ca=PATH) are rewritten to that folder;
    - `somm ARGS... --check-args` runs with the container's env, and must
      exit 0 (it prints `ok`); any refusal fails the check.

Usage: check_args.py --somm BINARY [--kustomize DIR]... [--render FILE]...
The binary is only asked to check its arguments: nothing is started and no
address is contacted.
"""

import argparse
import base64
import os
import re
import shutil
import subprocess
import sys
import tempfile

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
DEPLOY = os.path.dirname(HERE)
ROOT = os.path.dirname(DEPLOY)
SUBCOMMANDS = {"router", "worker", "controller", "serve"}
WORKLOADS = {"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"}
DOWNWARD = {
    "metadata.name": lambda pod: pod,
    "metadata.namespace": lambda pod: "somm",
    "status.podIP": lambda pod: "127.0.0.1",
    "status.hostIP": lambda pod: "127.0.0.1",
    "spec.nodeName": lambda pod: "node-0",
    "spec.serviceAccountName": lambda pod: "default",
}


def kubectl():
    return os.environ.get("SOMM_KUBECTL", "kubectl")


def load_stream(text):
    return [d for d in yaml.safe_load_all(text) if isinstance(d, dict)]


def kustomize(path):
    out = subprocess.run([kubectl(), "kustomize", path], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"check_args.py: kubectl kustomize {path} failed:\n{out.stderr}")
    return load_stream(out.stdout)


def secret_files(obj):
    files = {k: base64.b64decode(v or "") for k, v in (obj.get("data") or {}).items()}
    files.update({k: v.encode() for k, v in (obj.get("stringData") or {}).items()})
    return files


class Volumes:
    """Folders standing in for a pod's volumes, made under `work`."""

    def __init__(self, work, secrets):
        self.work = work
        self.secrets = secrets  # name -> {key: bytes}
        self.count = 0

    def folder(self, volume):
        self.count += 1
        path = os.path.join(self.work, f"vol{self.count}-{volume['name']}")
        os.makedirs(path)
        if "secret" in volume:
            name = volume["secret"].get("secretName")
            files = self.secrets.get(name)
            if files is None:
                return None, f"Secret {name!r} is neither made by deploy/make-secrets nor in the render"
            items = volume["secret"].get("items")
            chosen = [(i["key"], i["path"]) for i in items] if items else [(k, k) for k in files]
            for key, rel in chosen:
                if key not in files:
                    return None, f"Secret {name!r} has no key {key!r}"
                dest = os.path.join(path, rel)
                os.makedirs(os.path.dirname(dest), exist_ok=True)
                with open(dest, "wb") as f:
                    f.write(files[key])
                os.chmod(dest, 0o600)
        elif "persistentVolumeClaim" in volume:
            demo = os.path.join(ROOT, "models", "demo")
            if os.path.isdir(demo):
                os.rmdir(path)
                return demo, None
        return path, None


def substitute(text, env):
    # $$ escapes a literal $(...), as in Kubernetes; an undefined one stays.
    parts = str(text).split("$$")
    return "$".join(re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)",
                           lambda m: env.get(m.group(1), m.group(0)), p) for p in parts)


def rewrite_path(text, mounts):
    best = None
    for mount_path, folder in mounts.items():
        if text == mount_path or text.startswith(mount_path.rstrip("/") + "/"):
            if best is None or len(mount_path) > len(best[0]):
                best = (mount_path, folder)
    if best is None:
        return text
    return best[1] + text[len(best[0].rstrip("/")):]


def rewrite(text, mounts):
    # A path alone, or inside a value: --flag=PATH, a URL's ?ca=PATH&key=PATH.
    return re.sub(r"(^|[=?&,])(/[^=?&,\s]*)", lambda m: m.group(1) + rewrite_path(m.group(2), mounts), text)


def check_workload(source, obj, volumes, somm):
    """Returns (checked, failures) for one workload's somm containers."""
    spec = (obj.get("spec") or {}).get("template", {}).get("spec") or {}
    name = obj["metadata"]["name"]
    pod = f"{name}-7d9f8c6b5-x2k4q"
    checked, failures = 0, []
    for c in (spec.get("initContainers") or []) + (spec.get("containers") or []):
        args = [str(a) for a in (c.get("command") or []) + (c.get("args") or [])]
        if not args or args[0] not in SUBCOMMANDS:
            continue
        where = f"{source}: {obj['kind']} {name}, container {c['name']}"
        mounts, problems = {}, []
        by_name = {v["name"]: v for v in spec.get("volumes") or []}
        for m in c.get("volumeMounts") or []:
            v = by_name.get(m["name"])
            if v is None:
                problems.append(f"volumeMount {m['name']!r} names no volume")
                continue
            folder, problem = volumes.folder(v)
            if problem:
                problems.append(problem)
                continue
            if m.get("subPath"):
                folder = os.path.join(folder, m["subPath"])
            mounts[m["mountPath"]] = folder
        env = {}
        for e in c.get("env") or []:
            if "value" in e:
                env[e["name"]] = substitute(e["value"], env)
            elif "fieldRef" in (e.get("valueFrom") or {}):
                field = e["valueFrom"]["fieldRef"]["fieldPath"]
                env[e["name"]] = DOWNWARD.get(field, lambda p: "x")(pod)
            elif "resourceFieldRef" in (e.get("valueFrom") or {}):
                env[e["name"]] = "4"
            elif "secretKeyRef" in (e.get("valueFrom") or {}):
                ref = e["valueFrom"]["secretKeyRef"]
                value = volumes.secrets.get(ref["name"], {}).get(ref["key"])
                if value is None:
                    problems.append(f"env {e['name']}: Secret {ref['name']!r} key {ref['key']!r} is not made")
                    continue
                env[e["name"]] = value.decode()
        env = {k: rewrite(v, mounts) for k, v in env.items()}
        argv = [somm] + [rewrite(substitute(a, env), mounts) for a in args] + ["--check-args"]
        checked += 1
        if problems:
            failures.append(f"{where}: " + "; ".join(problems))
            continue
        run_env = dict(os.environ)
        run_env.update(env)
        try:
            out = subprocess.run(argv, capture_output=True, text=True, env=run_env, timeout=60)
        except subprocess.TimeoutExpired:
            failures.append(f"{where}: somm {' '.join(args)} --check-args ran for 60 s")
            continue
        shown = " ".join(args) + " --check-args"
        said = (out.stdout + out.stderr).strip()
        if out.returncode == 0:
            print(f"ok       {where}: somm {shown}")
        else:
            print(f"refused  {where}: somm {shown}\n         exit {out.returncode}: {said}")
            failures.append(f"{where}: exit {out.returncode}: {said.splitlines()[-1] if said else ''}")
    return checked, failures


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--somm", required=True, help="the somm binary")
    parser.add_argument("--kustomize", action="append", default=[], metavar="DIR")
    parser.add_argument("--render", action="append", default=[], metavar="FILE",
                        help="a rendered YAML stream (helm template, or deploy/validate/helm-render)")
    args = parser.parse_args()
    somm = os.path.abspath(args.somm)
    if not os.access(somm, os.X_OK):
        sys.exit(f"check_args.py: no somm binary at {somm} (build the somm target)")
    sources = [(f"kubectl kustomize {d}", kustomize(d)) for d in args.kustomize]
    for path in args.render:
        with open(path, encoding="utf-8") as f:
            sources.append((path, load_stream(f.read())))
    if not sources:
        sys.exit("check_args.py: nothing to check (--kustomize DIR or --render FILE)")

    work = tempfile.mkdtemp(prefix="somm-check-args.")
    try:
        made = os.path.join(work, "secrets")
        out = subprocess.run([os.path.join(DEPLOY, "make-secrets"), made, "--somm", somm],
                             capture_output=True, text=True)
        if out.returncode != 0:
            sys.exit(f"check_args.py: deploy/make-secrets failed:\n{out.stdout}{out.stderr}")
        made_secrets = {o["metadata"]["name"]: secret_files(o)
                        for o in kustomize(made) if o.get("kind") == "Secret"}
        total, failures = 0, []
        for i, (source, objects) in enumerate(sources):
            # The render's own Secrets, with deploy/make-secrets' over them:
            # real certificates and keys where the render has placeholders.
            secrets = {o["metadata"]["name"]: secret_files(o) for o in objects if o.get("kind") == "Secret"}
            secrets.update(made_secrets)
            volumes = Volumes(os.path.join(work, f"source{i}"), secrets)
            os.makedirs(volumes.work)
            for obj in objects:
                if obj.get("kind") in WORKLOADS:
                    n, f = check_workload(source, obj, volumes, somm)
                    total += n
                    failures += f
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if total == 0:
        print("FAIL: no somm container found")
        return 1
    if failures:
        print(f"FAIL: {len(failures)} of {total} somm containers' args are refused:\n  " + "\n  ".join(failures))
        return 1
    print(f"all {total} somm containers' args pass `somm ... --check-args`")
    return 0


if __name__ == "__main__":
    sys.exit(main())
