#!/usr/bin/env bash
# `cmake --install` makes a working tree (the layout scripts/image puts in
# the image): P/bin/somm runs and answers `--version` with the project's
# version on its first line (the commit and libtorch's version follow), and
# P/share/somm/tools holds the int8 tool, where the installed binary looks
# for it (common/install_paths.h; its unit test checks the lookup itself).
#
# Usage: tests/install_test.sh BUILD_DIR VERSION   (ctest passes both)
set -euo pipefail
BUILD="${1:?usage: install_test.sh BUILD_DIR VERSION}"
VERSION="${2:?usage: install_test.sh BUILD_DIR VERSION}"
PREFIX="$(mktemp -d -t somm-install.XXXXXX)"
trap 'rm -rf "$PREFIX"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

cmake --install "$BUILD" --prefix "$PREFIX" >/dev/null
[[ -x "$PREFIX/bin/somm" ]] || fail "no $PREFIX/bin/somm"
[[ -x "$PREFIX/share/somm/tools/quantize_dynamic.py" ]] || fail "no share/somm/tools/quantize_dynamic.py"
out="$(env -u SOMM_TOOLS_DIR "$PREFIX/bin/somm" --version)" || fail "somm --version exited with $?"
[[ "${out%%$'\n'*}" == "somm $VERSION" ]] || fail "somm --version said '$out', not 'somm $VERSION' first"
[[ "$out" == *$'\nlibtorch '* ]] || fail "somm --version names no libtorch: '$out'"
echo "ok: $PREFIX/bin/somm --version: ${out//$'\n'/; }"
