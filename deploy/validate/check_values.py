#!/usr/bin/python3
"""Offline checks of the Helm chart in deploy/helm/somm, since Helm itself is
not installed here (deploy/README.md):

  1. values.schema.json is a valid JSON Schema (draft-07);
  2. values.yaml, and each ci/*.yaml merged over it as Helm merges values,
     satisfy the schema;
  3. every .Values path that a template reads exists in values.yaml (a typo
     there renders as an empty string, silently), and every if/with/range/
     define in a template has its end;
  4. each component's somm flags are the same in the chart's template and in
     the kustomize manifest (deploy/kubernetes/base), so the two cannot drift.

Usage: check_values.py [--chart DIR] [--kubernetes DIR] [--expect-invalid FILE...]
  --expect-invalid FILE...  the negative test: each FILE, merged over
      values.yaml, must be rejected by the schema with the error that its
      `# expect: TEXT` line names (a substring of "path: message").
Needs Debian's python3-jsonschema and python3-yaml (run it with /usr/bin/python3).
"""

import argparse
import glob
import json
import os
import re
import sys

import yaml

try:
    import jsonschema
except ImportError:
    sys.exit("check_values.py: python3-jsonschema is missing (apt-get install python3-jsonschema)")

HERE = os.path.dirname(os.path.abspath(__file__))
DEPLOY = os.path.dirname(HERE)
# Flags the chart may add that the plain manifests do not have.
CHART_ONLY_FLAGS = {"worker": {"--device"}, "router": {"--tls-cert", "--tls-key"}}


def merge(base, override):
    """Helm's coalescing of values: maps merge key by key, anything else replaces."""
    if isinstance(base, dict) and isinstance(override, dict):
        out = dict(base)
        for key, value in override.items():
            out[key] = merge(base.get(key), value) if key in base else value
        return out
    return override


def load_yaml(path):
    with open(path, encoding="utf-8") as f:
        return yaml.safe_load(f) or {}


def schema_errors(validator, values):
    errors = []
    for e in sorted(validator.iter_errors(values), key=lambda e: list(e.absolute_path)):
        path = ".".join(str(p) for p in e.absolute_path) or "(top level)"
        errors.append(f"{path}: {e.message}")
    return errors


def values_paths(values, prefix=()):
    yield prefix
    if isinstance(values, dict):
        for key, value in values.items():
            yield from values_paths(value, prefix + (key,))


def check_templates(chart, values):
    """Problems in templates/*: unknown .Values paths, unbalanced blocks."""
    known = set(values_paths(values))
    problems = []
    for path in sorted(glob.glob(os.path.join(chart, "templates", "*"))):
        name = os.path.relpath(path, chart)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        # `$r := .Values.router` makes `$r.zone` mean .Values.router.zone.
        aliases = dict(re.findall(r"(\$\w+)\s*:=\s*\$?\.Values((?:\.\w+)*)", text))
        refs = [m for m in re.findall(r"\$?\.Values((?:\.\w+)+)", text)]
        for var, base in aliases.items():
            refs += [base + m for m in re.findall(re.escape(var) + r"((?:\.\w+)+)", text)]
        for ref in sorted(set(refs)):
            if tuple(ref.strip(".").split(".")) not in known:
                problems.append(f"{name}: .Values{ref} is not in values.yaml")
        opened = len(re.findall(r"\{\{-?\s*(?:if|with|range|define|block)\b", text))
        closed = len(re.findall(r"\{\{-?\s*end\s*-?\}\}", text))
        if opened != closed:
            problems.append(f"{name}: {opened} if/with/range/define blocks but {closed} ends")
    return problems


FLAG = re.compile(r"^\s*-\s+(--[a-z0-9-]+)\s*$", re.MULTILINE)


def check_flags(chart, kubernetes):
    """Problems where a component's flags differ between chart and manifests."""
    problems = []
    for component in ("router", "worker", "controller"):
        files = {
            "chart": os.path.join(chart, "templates", f"{component}.yaml"),
            "kustomize": os.path.join(kubernetes, f"{component}.yaml"),
        }
        flags = {}
        for side, path in files.items():
            with open(path, encoding="utf-8") as f:
                flags[side] = set(FLAG.findall(f.read()))
        only_chart = flags["chart"] - flags["kustomize"] - CHART_ONLY_FLAGS.get(component, set())
        only_kustomize = flags["kustomize"] - flags["chart"]
        for flag in sorted(only_chart):
            problems.append(f"{component}: {flag} is in the chart but not in {files['kustomize']}")
        for flag in sorted(only_kustomize):
            problems.append(f"{component}: {flag} is in {files['kustomize']} but not in the chart")
        if not flags["chart"]:
            problems.append(f"{component}: no flags found in {files['chart']}")
    return problems


def expectation(path):
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = re.match(r"#\s*expect:\s*(.+?)\s*$", line)
            if m:
                return m.group(1)
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chart", default=os.path.join(DEPLOY, "helm", "somm"))
    parser.add_argument("--kubernetes", default=os.path.join(DEPLOY, "kubernetes", "base"))
    parser.add_argument("--expect-invalid", nargs="+", metavar="FILE")
    args = parser.parse_args()

    with open(os.path.join(args.chart, "values.schema.json"), encoding="utf-8") as f:
        schema = json.load(f)
    jsonschema.Draft7Validator.check_schema(schema)
    validator = jsonschema.Draft7Validator(schema)
    defaults = load_yaml(os.path.join(args.chart, "values.yaml"))

    if args.expect_invalid:
        missed = []
        for path in args.expect_invalid:
            expected = expectation(path)
            errors = schema_errors(validator, merge(defaults, load_yaml(path)))
            for e in errors:
                print(f"rejected  {os.path.basename(path)}: {e}")
            if not errors:
                missed.append(f"{path} was accepted")
            elif expected and not any(expected in e for e in errors):
                missed.append(f"{path} was rejected, but not with {expected!r}")
        if missed:
            print("FAIL: broken values got through:\n  " + "\n  ".join(missed))
            return 1
        print(f"all {len(args.expect_invalid)} broken values files were rejected for the expected reasons")
        return 0

    problems = [f"values.yaml: {e}" for e in schema_errors(validator, defaults)]
    checked = ["values.yaml"]
    for path in sorted(glob.glob(os.path.join(args.chart, "ci", "*.yaml"))):
        name = os.path.relpath(path, args.chart)
        problems += [f"{name}: {e}" for e in schema_errors(validator, merge(defaults, load_yaml(path)))]
        checked.append(name)
    problems += check_templates(args.chart, defaults)
    problems += check_flags(args.chart, args.kubernetes)
    for p in problems:
        print(f"invalid  {p}")
    if problems:
        print(f"FAIL: {len(problems)} problem(s) in {args.chart}")
        return 1
    print(f"ok: {', '.join(checked)} satisfy values.schema.json (draft-07); "
          "templates read only known values; flags match deploy/kubernetes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
