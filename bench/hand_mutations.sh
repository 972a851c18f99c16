#!/usr/bin/env bash
# Issue 39's hand-made mutations of the judging code, the ones that once passed every relevant test: each is
# applied to a scratch copy of the tracked tree, the test files that cover it are run, and the copy is reset.
# A row reads "caught" when pytest fails with the mutation in place (and the same files pass without it).
#   bench/hand_mutations.sh            # prints a markdown table (python: $PYTHON, else .venv's, else python3)
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
W=$(mktemp -d /tmp/hand-mutations.XXXXXX); trap 'rm -rf "$W"' EXIT
(cd "$ROOT" && git ls-files -z | xargs -0 cp --parents -t "$W")
cd "$W" && git init -q && git add -A && git -c user.name=m -c user.email=m@localhost commit -qm base || exit 2
export PYTHONPATH=$W
PY=${PYTHON:-python3}; [[ -z ${PYTHON:-} && -x $ROOT/.venv/bin/python3 ]] && PY=$ROOT/.venv/bin/python3  # the project's venv
export PATH="$(dirname "$(command -v "$PY")"):$PATH"  # its scripts too (nodeset, ansible)
run() {  # pytest's last line, and the test that failed first (-x)
  local out; out=$(nice -n 10 "$PY" -m pytest -q -p no:cacheprovider -x -rf "$@" 2>&1); [[ $out == *error* ]] && echo "$out" >&2
  local first; first=$(sed -nE 's/^FAILED ([^ ]+).*/\1/p' <<< "$out" | head -1 | sed 's/\[.*//')
  echo "$(tail -1 <<< "$out")${first:+ (\`${first#tests/unit/}\`)}"
}
try() {  # what, file, old text, new text, test files...
  local what=$1 f=$2 old=$3 new=$4; shift 4
  local clean; clean=$(run "$@")
  "$PY" - "$f" "$old" "$new" <<'PY' || { echo "| $what | \`$f\` | the text to mutate is gone: update this script |"; return; }
import sys
path, old, new = sys.argv[1:]
text = open(path).read()
sys.exit(0 if text.count(old) == 1 and open(path, "w").write(text.replace(old, new)) else 1)
PY
  local mutated; mutated=$(run "$@"); git checkout -q .
  local verdict=missed; [[ $mutated == *failed* && $clean != *failed* ]] && verdict=caught
  echo "| $what | \`$f\` | $verdict | without: $clean; with: $mutated |"
}
echo "| mutation | file | | pytest |"
echo "|---|---|---|---|"
try 'an incomplete probe not held out' sweep/analysis/compare.py '("foreign_process", "probe_incomplete")' '("foreign_process",)' \
    tests/unit/test_compare.py tests/unit/test_verdict.py
try 'an ambiguous UUID prefix accepted' probe_agent/mask.py '    if len(hits) > 1:' '    if False:' tests/unit/test_mask_oracle.py
try 'Xid 167 moved from reboot to the application' probe_agent/xid_catalogue.py '167: ("RESTART_BM"' '167: ("RESTART_APP"' \
    tests/unit/test_xid_catalogue_oracle.py tests/unit/test_xid.py
try 'speed broken below 70% instead of 75%' sweep/analysis/speed_reference.py 'BROKEN_BELOW = 0.75' 'BROKEN_BELOW = 0.70' \
    tests/unit/test_judging_boundaries.py
try 'the scaled MAD without 1.4826' sweep/analysis/bench.py ' * 1.4826 / abs(median)' ' / abs(median)' \
    tests/unit/test_judging_boundaries.py tests/unit/test_bench_figures.py
try "-e x=' ' split as a shell splits it" sweep/inventory/keyvalue.py '    for word in split_words(text):' \
    '    for word in __import__("shlex").split(text):' tests/unit/test_command_line.py
