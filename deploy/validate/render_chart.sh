#!/usr/bin/env bash
# Renders the Helm chart offline with helm-render (built from
# deploy/validate/helm-render with Debian's Go, Sprig and yaml packages) for
# its default values and each ci/*.yaml, checks each render with
# validate.mjs (Secrets the chart does not make must be created in
# deploy/README.md), and leaves the renders in OUTDIR (default.yaml,
# <ci file>.yaml).
# Usage: render_chart.sh HELM_RENDER OUTDIR
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
deploy="$(dirname "$here")"
render="$1" out="$2"
rm -rf "$out" && mkdir -p "$out"
status=0
for values in "" "$deploy"/helm/somm/ci/*.yaml; do
  name="$(basename "${values:-default.yaml}")"
  echo "== helm-render --namespace somm ${values:+-f ci/$name }deploy/helm/somm"
  "$render" --namespace somm ${values:+-f "$values"} "$deploy/helm/somm" >"$out/$name"
  "$render" --namespace somm ${values:+-f "$values"} --notes "$deploy/helm/somm" >"$out/NOTES-$name.txt"
  node "$here/validate.mjs" --namespace somm --secrets-doc "$deploy/README.md" "$out/$name" || status=1
done
exit $status
