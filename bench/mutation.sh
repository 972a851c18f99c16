#!/usr/bin/env bash
# Mutation score of the code that judges (issue 39): mutmut 3 over ONE module at a time, each run
# against that module's own unit test files only, niced, under a time cap per module.
#
#   pip install mutmut==3.8.1          # into the project's venv (adds mutmut, libcst, coverage, textual)
#   bench/mutation.sh [KEY ...]        # KEYs below (ALL, ALL_TABLES); default: all, one after the other
#   CAP=600 JOBS=1 TESTS_AT=dcc27e2 bench/mutation.sh mask    # TESTS_AT: the test files as of a commit
#                                                              # (the "before" score), the code as it is now
#   EVERY=5 TABLE_CAP=900 bench/mutation.sh xid-tables        # a table's every 5th mutant (a sample);
#                                                              # TABLE_CAP: seconds for a whole table run
#   SAMPLE=4 bench/mutation.sh compare    # every 4th mutant of the module, in mutmut's listing order (a
#                                         # systematic sample across its functions); the rest stay unchecked
#   RERUN=1 bench/mutation.sh compare     # the same work folder, the test files as they are now: re-run
#                                         # every mutant checked and not killed (after new tests);
#   RERUN=rest bench/mutation.sh compare  # ... or go on with the mutants a capped run left unchecked
#   RERUN=sample SAMPLE=3 bench/mutation.sh speed  # ... or only those of a capped sample's (every 3rd) left unchecked
#   TAG=before RERUN=1 NAME=limit bench/mutation.sh limit   # re-run the "before" run's survivors; report limit.txt
#
# Each module runs in a copy of the tracked tree under ${WORK:-/tmp}/mutation-KEY (mutmut writes its
# mutants/ there, not here), with a generated setup.cfg [mutmut] section (source_paths: both
# packages, so imports work; only_mutate: the module; pytest_add_cli_args_test_selection: its
# tests). PYTHONPATH is unset so that the mutated copy is what the tests import. Per module it
# leaves in ${OUT:-bench/results/mutation}/KEY[-TAG].txt the counts (mutmut's cicd stats) and every
# mutant that was not killed, with its diff: the survivors to explain or to kill. A module that runs
# past CAP seconds is stopped; its unchecked mutants are counted as such, never as killed.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$ROOT/bench/results/mutation}
WORK=${WORK:-/tmp}
CAP=${CAP:-600}
JOBS=${JOBS:-1}
TAG=${TAG:-${TESTS_AT:+before}}
mkdir -p "$OUT"

declare -A SRC TESTS
SRC[compare]="sweep/analysis/compare.py";       TESTS[compare]="tests/unit/test_compare.py"
SRC[speed]="sweep/analysis/speed.py sweep/analysis/speed_reference.py"
TESTS[speed]="tests/unit/test_speed_judge.py tests/unit/test_judging_boundaries.py"
SRC[bench]="sweep/analysis/bench.py";           TESTS[bench]="tests/unit/test_bench_figures.py tests/unit/test_judging_boundaries.py"
SRC[facts]="sweep/analysis/facts.py sweep/analysis/fact_values.py sweep/analysis/platform_facts.py sweep/analysis/speed_facts.py"
TESTS[facts]="tests/unit/test_facts.py tests/unit/test_facts_inprocess.py"
SRC[impact]="sweep/analysis/impact.py"
TESTS[impact]="tests/unit/test_facts.py tests/unit/test_compare.py tests/unit/test_facts_inprocess.py tests/unit/test_impact_rules.py"
SRC[mask]="probe_agent/mask.py";                TESTS[mask]="tests/unit/test_mask_oracle.py"
SRC[chain]="probe_agent/chain.py";              TESTS[chain]="tests/unit/test_contract_table.py"
# (not test_agent.py, test_hostchecks.py: they judge through the agent run as a subprocess, which mutmut's
# stats never map to a function, so no mutant ever ran them; they cost 80 s of every stats run)
SRC[contracts]="probe_agent/contracts.py";      TESTS[contracts]="tests/unit/test_contract_table.py tests/unit/test_mask_oracle.py tests/unit/test_contracts_inprocess.py"
SRC[xid]="probe_agent/xid_catalogue.py";        TESTS[xid]="tests/unit/test_xid.py tests/unit/test_xid_catalogue_oracle.py"
SRC[limit]="sweep/inventory/limit.py";          TESTS[limit]="tests/unit/test_inventory.py"
ALL="mask limit chain compare bench speed impact contracts facts"
# the tables (module-level data mutmut does not mutate): bench/mutate_tables.py, same niceness and cap
declare -A TABLE
TABLE[xid-tables]="probe_agent/xid_catalogue.py tests/unit/test_xid_catalogue_oracle.py tests/unit/test_xid.py --names XIDS,SWEEP_CHOSEN"
TABLE[sxid-tables]="probe_agent/xid_catalogue.py tests/unit/test_xid_catalogue_oracle.py tests/unit/test_xid.py --names SXIDS"
TABLE[speed-tables]="sweep/analysis/speed_reference.py tests/unit/test_judging_boundaries.py tests/unit/test_speed_judge.py --names WARNING_BELOW,BROKEN_BELOW,PCIE_EFFICIENCY,LINK_CEILING"
TABLE[bench-tables]="sweep/analysis/bench.py tests/unit/test_judging_boundaries.py tests/unit/test_bench_figures.py"
ALL_TABLES="xid-tables sxid-tables speed-tables bench-tables"

lines() { printf '    %s\n' $1; }

for key in ${@:-$ALL $ALL_TABLES}; do
  if [[ -n "${TABLE[$key]:-}" ]]; then
    report="$OUT/$key${TAG:+-$TAG}.txt"
    (cd "$ROOT" && env -u PYTHONPATH timeout -s INT -k 60 "${TABLE_CAP:-900}" nice -n 19 python3 bench/mutate_tables.py \
      ${TABLE[$key]} ${TESTS_AT:+--tests-at $TESTS_AT} ${EVERY:+--every $EVERY}) > "$report" 2>&1
    echo "$key: $(tail -1 "$report")"
    continue
  fi
  [[ -n "${SRC[$key]:-}" ]] || { echo "unknown module key $key (one of: $ALL)" >&2; exit 2; }
  work="$WORK/mutation-$key${TAG:+-$TAG}"
  if [[ -n "${RERUN:-}" ]]; then  # keep the mutants and their results; bring the test files up to date
    [[ -d "$work/mutants" ]] || { echo "$key: no earlier run in $work to re-run" >&2; exit 2; }
    (cd "$ROOT" && git ls-files -z tests | xargs -0 cp --parents -t "$work")
  else
    rm -rf "$work" && mkdir -p "$work"
    (cd "$ROOT" && git ls-files -z | xargs -0 cp --parents -t "$work")
  fi
  tests=""
  for t in ${TESTS[$key]}; do
    if [[ -n "${TESTS_AT:-}" ]]; then  # "before": the test files as they were at TESTS_AT (absent: left out)
      if git -C "$ROOT" cat-file -e "$TESTS_AT:$t" 2>/dev/null; then
        git -C "$ROOT" show "$TESTS_AT:$t" > "$work/$t"; tests="$tests $t"
      else rm -f "$work/$t"; fi
    else tests="$tests $t"; fi
  done
  {
    echo "[mutmut]"
    echo "source_paths ="; lines "sweep probe_agent"
    echo "only_mutate ="; lines "${SRC[$key]}"
    echo "pytest_add_cli_args_test_selection ="; lines "$tests"
    echo "pytest_add_cli_args ="; lines "-p no:cacheprovider -x -q"
    echo "also_copy ="; lines "tools docs inventories bench reports README.md"
  } > "$work/setup.cfg"
  report="$OUT/${NAME:-$key${TAG:+-$TAG}}.txt"   # NAME: the report's name (a re-run beside the first report)
  start=$(date +%s)
  names=()
  if [[ "${RERUN:-}" == 1 ]]; then
    mapfile -t names < <(cd "$work" && env -u PYTHONPATH mutmut results --all true 2>/dev/null \
      | sed -nE 's/^ *([^ ]+): (survived|no tests|suspicious|segfault)$/\1/p')
    (( ${#names[@]} )) || { echo "$key: nothing to re-run"; continue; }
  elif [[ "${RERUN:-}" == sample ]]; then  # the sample's mutants (every SAMPLE-th of the listing) not checked yet
    mapfile -t names < <(cd "$work" && env -u PYTHONPATH mutmut results --all true 2>/dev/null \
      | sed -nE 's/^ *([^ ]+): (.*)$/\1 \2/p' | awk -v n="${SAMPLE:?RERUN=sample needs SAMPLE}" \
      '(NR - 1) % n == 0 && $2 == "not" { print $1 }')
    (( ${#names[@]} )) || { echo "$key: nothing of the sample left to check"; continue; }
  elif [[ -n "${SAMPLE:-}" && -z "${RERUN:-}" ]]; then
    # mutants are made (and the stats run) by a run whose filter matches nothing; then every SAMPLE-th
    (cd "$work" && env -u PYTHONPATH nice -n 19 mutmut run --max-children "$JOBS" no-such-mutant) > "$work/generate.log" 2>&1
    mapfile -t names < <(cd "$work" && env -u PYTHONPATH mutmut results --all true 2>/dev/null \
      | sed -nE 's/^ *([^ ]+): .*$/\1/p' | awk -v n="$SAMPLE" '(NR - 1) % n == 0')
  fi
  (cd "$work" && env -u PYTHONPATH timeout -s INT -k 30 "$CAP" nice -n 19 mutmut run --max-children "$JOBS" "${names[@]}") \
    >> "$work/run.log" 2>&1
  rc=$?
  took=$(( $(date +%s) - start ))
  (cd "$work" && env -u PYTHONPATH mutmut export-cicd-stats >/dev/null 2>&1)
  {
    echo "module: ${SRC[$key]}"
    echo "tests: $tests${TESTS_AT:+ (as of $TESTS_AT)}"
    echo "seconds: $took (cap $CAP, mutmut exit $rc$( [[ $rc == 124 || $rc == 130 ]] && echo ': stopped at the cap'))${RERUN:+; a re-run ($RERUN) in the work folder of an earlier run}${SAMPLE:+; a sample: every ${SAMPLE}th mutant}"
    python3 - "$work/mutants/mutmut-cicd-stats.json" <<'PY'
import json, sys
try:
    s = json.load(open(sys.argv[1]))
except (OSError, ValueError):
    sys.exit(print("stats: none (see run.log)"))
killed = s["killed"] + s["timeout"]
unchecked = s["total"] - sum(v for k, v in s.items() if k != "total")
checked = s["total"] - unchecked
print(f"stats: killed {killed} of {checked} checked ({100.0 * killed / max(1, checked):.1f}%): survived {s['survived']}, "
      f"no tests {s['no_tests']}, timeout {s['timeout']}, suspicious {s['suspicious']}; "
      f"{unchecked} of {s['total']} mutants not checked")
PY
    echo
    echo "## checked and not killed (the diffs of the first ${SHOW:-40})"
    (cd "$work" && env -u PYTHONPATH mutmut results --all true 2>/dev/null) \
      | grep -E ': (survived|no tests|suspicious|segfault)$' | nl -nln | while read -r n name status; do
      echo "### $name $status"
      if (( n <= ${SHOW:-40} )); then
        (cd "$work" && env -u PYTHONPATH mutmut show "${name%:}" 2>/dev/null </dev/null | grep -E '^[-+] ')
      fi
    done
  } > "$report"
  echo "$key: $(sed -n 4p "$report")"
done
