#!/bin/bash
# The controller's wheels for a machine with no package index (tools/h200_acceptance.sh, tools/device_workers.sh
# read them from .accept/whl): every dependency of pyproject.toml and theirs, resolved by pip for CPython
# PYVER on x86-64 manylinux. A hand-picked list missed typer's pydantic on 2026-12-05 and cost an acceptance run.
#   tools/accept_wheels.sh OUTDIR [PYVER]     (OUTDIR: .accept/whl of the repository; PYVER default 3.12)
set -euo pipefail
DEST=${1:?usage: tools/accept_wheels.sh OUTDIR [PYVER]}
PYVER=${2:-3.12}
REPO=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$DEST"
REQ=$(mktemp)
trap 'rm -f "$REQ"' EXIT
python3 -c "import sys, tomllib; print('\n'.join(tomllib.load(open(sys.argv[1], 'rb'))['project']['dependencies']))" \
    "$REPO/pyproject.toml" > "$REQ"
PLATFORMS=()
for p in manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux_2_24_x86_64 manylinux_2_26_x86_64 \
         manylinux_2_27_x86_64 manylinux_2_28_x86_64 manylinux_2_31_x86_64 manylinux_2_34_x86_64 manylinux1_x86_64; do
    PLATFORMS+=(--platform "$p")
done
python3 -m pip download -q --only-binary=:all: --python-version "$PYVER" --implementation cp "${PLATFORMS[@]}" \
    -d "$DEST" -r "$REQ"
ls "$DEST"
