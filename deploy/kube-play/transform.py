#!/usr/bin/python3
"""The copy of the rendered manifests that deploy/kube-play/run feeds to
`podman kube play`: the same pods, with what podman does not provide
bridged. The manifests a Kubernetes user applies are not changed; this
copy is made per run, and every change is listed here and in
deploy/README.md ("The manifests, run in podman"):

  1. Each Deployment becomes `replicas` Pods named <deployment>-<i> (the
     worker Deployment, which leaves its count to the controller, gets
     --workers): podman plays one pod per Deployment and scales nothing.
  2. Services, PodDisruptionBudgets, NetworkPolicies, the HPA, PodMonitors,
     RBAC, the Namespace and the PVC are left out: there is no API server.
     A Service's name becomes a DNS alias of its pods on the podman network
     (run does it); the PVC is a podman volume named after its claim.
  3. Secret volumes become hostPath folders holding the Secret's files (from
     deploy/make-secrets), owned by the pod's runAsUser, mode 0400; each
     emptyDir an empty hostPath folder of the pod's own, owned by its user
     (podman 4.3 makes an emptyDir a named volume called after the volume,
     which every pod with a volume of that name would share).
  4. env valueFrom becomes a value: metadata.name the pod's name,
     metadata.namespace `somm`, status.podIP the pod's name (run makes it a
     DNS alias of the pod on the network, which aardvark-dns resolves;
     peers check certificates for somm-worker / somm-controller, not for
     the address), a resourceFieldRef the limit rounded up; and $(VAR) in
     command and args is expanded here, as the kubelet does.
  5. Probes and preStop hooks are left out (podman would run them inside the
     image, which has no curl, and has no `sleep` action); run polls each
     pod's readiness endpoint itself, on a published port.
  6. Every container port is published on 127.0.0.1 (hostPort from
     --base-port up): run reaches routers, health ports and Redis there.
  7. topologySpreadConstraints, nodeSelector, affinity and tolerations are
     dropped (one machine).
  8. The controller's `--provisioner kubernetes` becomes `--provisioner
     none` (and its --k8s-* and --min/--max-workers go): it needs an API
     server to scale workers through (see deploy/README.md for what was
     tried).
  (run also bridges the kubelet's restart of a killed container: it starts
  the pod again, see there.)

Usage: transform.py RENDERED SECRETS WORKDIR --workers N --base-port P
  RENDERED  kubectl kustomize of the layout; SECRETS that of deploy/make-secrets
  Writes WORKDIR/pods/<order>-<pod>.yaml and WORKDIR/pods.json (per pod: its
  component, published ports, readiness endpoint), and WORKDIR/secret-volumes/.
"""

import argparse
import base64
import copy
import json
import math
import os
import re
import sys

import yaml

ORDER = {"redis": 0, "controller": 1, "worker": 2, "router": 3}
DROPPED_KINDS = {"Service", "PodDisruptionBudget", "NetworkPolicy", "HorizontalPodAutoscaler",
                 "PodMonitor", "ServiceMonitor", "ServiceAccount", "Role", "RoleBinding",
                 "Namespace", "PersistentVolumeClaim", "Secret", "ConfigMap"}


def cpu_value(q):
    q = str(q)
    if q.endswith("m"):
        return str(max(1, math.ceil(int(q[:-1]) / 1000)))
    return str(max(1, math.ceil(float(q))))


def expand(text, env):
    """$(VAR) from the container's env, $$ a literal $, as the kubelet expands."""
    parts = text.split("$$")
    return "$".join(re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)",
                           lambda m: env.get(m.group(1), m.group(0)), p) for p in parts)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("rendered")
    p.add_argument("secrets")
    p.add_argument("workdir")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--base-port", type=int, default=18000)
    p.add_argument("--namespace", default="somm")
    a = p.parse_args()

    with open(a.rendered) as f:
        objects = [o for o in yaml.safe_load_all(f) if isinstance(o, dict)]
    with open(a.secrets) as f:
        secrets = {o["metadata"]["name"]: o for o in yaml.safe_load_all(f)
                   if isinstance(o, dict) and o.get("kind") == "Secret"}
    os.makedirs(os.path.join(a.workdir, "pods"), exist_ok=True)
    next_port = a.base_port
    pods = []
    skipped = []
    for o in objects:
        kind = o.get("kind")
        if kind in DROPPED_KINDS:
            skipped.append(f"{kind}/{o['metadata']['name']}")
            continue
        if kind != "Deployment":
            sys.exit(f"transform.py: no bridge for {kind} {o['metadata']['name']}")
        name = o["metadata"]["name"]
        template = o["spec"]["template"]
        component = template["metadata"]["labels"].get("app.kubernetes.io/component", name)
        replicas = o["spec"].get("replicas", a.workers if component == "worker" else 1)
        for i in range(replicas):
            pod_name = f"{name}-{i}"
            spec = copy.deepcopy(template["spec"])
            uid = (spec.get("securityContext") or {}).get("runAsUser", 0)
            for field in ("topologySpreadConstraints", "nodeSelector", "affinity", "tolerations",
                          "serviceAccountName", "automountServiceAccountToken"):
                spec.pop(field, None)
            # 3. Secret volumes: folders of the Secret's files.
            for v in spec.get("volumes", []):
                if "emptyDir" in v:
                    folder = os.path.join(os.path.abspath(a.workdir), "empty-dirs", pod_name, v["name"])
                    os.makedirs(folder, exist_ok=True)
                    os.chown(folder, uid, uid)
                    os.chmod(folder, 0o700)
                    v.pop("emptyDir")
                    v["hostPath"] = {"path": folder, "type": "Directory"}
                    continue
                if "secret" not in v:
                    continue
                sname = v["secret"]["secretName"]
                if sname not in secrets:
                    sys.exit(f"transform.py: pod {pod_name} mounts Secret {sname}, which deploy/make-secrets does not make")
                data = {k: base64.b64decode(val) for k, val in (secrets[sname].get("data") or {}).items()}
                items = v["secret"].get("items") or [{"key": k, "path": k} for k in data]
                folder = os.path.join(os.path.abspath(a.workdir), "secret-volumes", pod_name, v["name"])
                os.makedirs(folder, exist_ok=True)
                for item in items:
                    dest = os.path.join(folder, item["path"])
                    with open(dest, "wb") as f:
                        f.write(data[item["key"]])
                    os.chown(dest, uid, uid)
                    os.chmod(dest, 0o400)
                os.chown(folder, uid, uid)
                os.chmod(folder, 0o500)
                v.pop("secret")
                v["hostPath"] = {"path": folder, "type": "Directory"}
            ports, health = {}, None
            for c in spec["containers"]:
                limits = (c.get("resources") or {}).get("limits") or {}
                env = []
                for e in c.get("env") or []:
                    src = e.get("valueFrom")
                    if src is None:
                        env.append(e)
                        continue
                    if "fieldRef" in src:
                        field = src["fieldRef"]["fieldPath"]
                        value = {"metadata.name": pod_name, "metadata.namespace": a.namespace,
                                 "status.podIP": pod_name}.get(field)
                        if value is None:
                            sys.exit(f"transform.py: no bridge for fieldRef {field}")
                    elif "resourceFieldRef" in src:
                        res = src["resourceFieldRef"]["resource"]
                        value = cpu_value(limits.get("cpu", "1")) if res == "limits.cpu" else None
                        if value is None:
                            sys.exit(f"transform.py: no bridge for resourceFieldRef {res}")
                    else:
                        sys.exit(f"transform.py: no bridge for env {e['name']}")
                    env.append({"name": e["name"], "value": value})
                if env:
                    c["env"] = env
                for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
                    got = c.pop(probe, None)
                    if probe == "readinessProbe" and got:
                        handler = got.get("httpGet") or got.get("tcpSocket")
                        health = {"port": handler["port"], "path": got.get("httpGet", {}).get("path"),
                                  "scheme": got.get("httpGet", {}).get("scheme", "HTTP").lower()}
                c.pop("lifecycle", None)
                for port in c.get("ports") or []:
                    port["hostPort"] = next_port
                    port["hostIP"] = "127.0.0.1"
                    ports[port.get("name", str(port["containerPort"]))] = next_port
                    next_port += 1
                values = {e["name"]: str(e.get("value", "")) for e in env}
                for field in ("command", "args"):
                    if c.get(field):
                        c[field] = [expand(str(x), values) for x in c[field]]
                args = c.get("args") or []
                if args[:1] == ["controller"] and "--provisioner" in args:
                    k = args.index("--provisioner")
                    args[k + 1] = "none"
                    for flag in ("--k8s-namespace", "--k8s-deployment", "--min-workers", "--max-workers"):
                        if flag in args:
                            j = args.index(flag)
                            del args[j:j + 2]
            if health and isinstance(health["port"], str):
                health["hostPort"] = ports[health["port"]]
            pod = {"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": pod_name,
                                # run finds a killed run's leftovers by this label.
                                "labels": {**template["metadata"].get("labels", {}), "somm-kube-play": "run"},
                                "annotations": template["metadata"].get("annotations", {})},
                   "spec": spec}
            path = os.path.join(a.workdir, "pods", f"{ORDER.get(component, 9)}-{pod_name}.yaml")
            with open(path, "w") as f:
                yaml.safe_dump(pod, f, sort_keys=False)
            pods.append({"name": pod_name, "component": component, "file": path,
                         "ports": ports, "health": health,
                         "containers": [c["name"] for c in spec["containers"]]})
    pods.sort(key=lambda p: (ORDER.get(p["component"], 9), p["name"]))
    with open(os.path.join(a.workdir, "pods.json"), "w") as f:
        json.dump({"pods": pods, "left_out": skipped}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
