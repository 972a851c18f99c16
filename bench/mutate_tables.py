#!/usr/bin/env python3
"""Mutants of a module's TABLES, the part of the judging code mutmut cannot reach (issue 39).

mutmut 3 mutates code inside functions only, and cosmic-ray has no operator for string values, so a
table of knowledge -- the Xid catalogue's buckets (a module without a single function), a threshold
such as `BROKEN_BELOW = 0.75` -- gets no mutant from either. This script makes those mutants, one
at a time, in a copy of the tree, and runs the module's own unit test files against each:

* a bucket moved: in a module-level dict whose values are tuples led by a string (XIDS, SXIDS), that
  string replaced by the next one (in sorted order) used in the same dict -- Xid 167 "RESTART_BM" ->
  "RESTART_VM", as issue 39's hand-made mutant moved it;
* a number moved: a module-level number (a plain `NAME = 0.75`, or a value, never a key, of a
  module-level dict or tuple) times 0.9 and 1.1 for floats, minus and plus 1 for ints.

A mutant is killed when pytest fails (`-x`: the first failing test ends it). Each mutant runs in a
child forked from a parent that has imported pytest and the heavy libraries but none of the project,
so the child imports the mutated file; subprocesses the tests start read the mutated file on disk.

    python3 bench/mutate_tables.py probe_agent/xid_catalogue.py tests/unit/test_xid.py \\
        tests/unit/test_xid_catalogue_oracle.py [--names XIDS,SWEEP_CHOSEN] [--every N] [--cap 120]
"""
from __future__ import annotations

import argparse
import ast
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _number_mutants(node: ast.Constant) -> list[str]:
    v = node.value
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return []
    if isinstance(v, float):
        return [repr(v * 0.9), repr(v * 1.1)]
    return [repr(v - 1), repr(v + 1)]


def _values(node: ast.AST):
    """The value nodes of a module-level table (dict values, tuple/list/call-argument items), recursively."""
    if isinstance(node, ast.Dict):
        for v in node.values:
            yield from _values(v)
    elif isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        for e in node.elts:
            yield from _values(e)
    elif isinstance(node, ast.Call):
        for a in node.args:
            yield from _values(a)
    elif isinstance(node, ast.BinOp):
        yield from _values(node.left)
        yield from _values(node.right)
    else:
        yield node


def mutants(source: str, names: set | None) -> list[tuple[int, int, int, str, str]]:
    """(line, start col, end col, replacement, what) of every mutant of the module-level tables."""
    out = []
    for stmt in ast.parse(source).body:
        if not isinstance(stmt, (ast.Assign, ast.AnnAssign)) or stmt.value is None:
            continue
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        name = next((t.id for t in targets if isinstance(t, ast.Name)), None)
        if name is None or (names and name not in names):
            continue
        if isinstance(stmt.value, ast.Dict):
            leads = [v.elts[0] for v in stmt.value.values if isinstance(v, ast.Tuple) and v.elts
                     and isinstance(v.elts[0], ast.Constant) and isinstance(v.elts[0].value, str)]
            buckets = sorted({c.value for c in leads})
            for key, v in zip(stmt.value.keys, stmt.value.values):
                if not (isinstance(v, ast.Tuple) and v.elts and v.elts[0] in leads) or len(buckets) < 2:
                    continue
                lead = v.elts[0]
                other = buckets[(buckets.index(lead.value) + 1) % len(buckets)]
                code = ast.literal_eval(key) if key is not None else "?"
                out.append((lead.lineno, lead.col_offset, lead.end_col_offset, repr(other),
                            f"{name}[{code}] {lead.value} -> {other}"))
        for node in _values(stmt.value):
            if isinstance(node, ast.Constant) and node.lineno == node.end_lineno:
                for repl in _number_mutants(node):
                    out.append((node.lineno, node.col_offset, node.end_col_offset, repl,
                                f"{name}: {node.value!r} -> {repl} (line {node.lineno})"))
    return out


def apply(source: str, mutant) -> str:
    line, start, end, repl, _ = mutant
    lines = source.splitlines(keepends=True)
    text = lines[line - 1].encode()
    lines[line - 1] = (text[:start] + repl.encode() + text[end:]).decode()
    return "".join(lines)


def run_one(tree: Path, target: Path, mutated: str, tests: list, cap: float) -> str:
    """'killed', 'survived' or 'timeout' of one mutant (a forked child runs pytest in-process)."""
    original = target.read_text()
    target.write_text(mutated)
    try:
        pid = os.fork()
        if pid == 0:  # the child: import the project from the copy, run the tests, report by exit code
            os.chdir(tree)
            sys.path.insert(0, str(tree))
            os.environ["PYTHONPATH"] = str(tree)
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1), os.dup2(devnull, 2)
            import pytest
            os._exit(int(pytest.main(["-x", "-q", "-p", "no:cacheprovider", *tests])))
        deadline = time.monotonic() + cap
        try:
            while time.monotonic() < deadline:
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    code = os.waitstatus_to_exitcode(status)
                    if code in (2, 3, 4, 5):  # interrupted, internal error, usage error, no tests: not a kill
                        return "error"
                    return "survived" if code == 0 else "killed"
                time.sleep(0.05)
        except BaseException:  # stopped from outside: end the child too, then say so
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        return "timeout"
    finally:
        target.write_text(original)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("module")
    ap.add_argument("tests", nargs="+")
    ap.add_argument("--names", help="only these module-level names (comma-separated)")
    ap.add_argument("--match", help="only the mutants whose description holds this text")
    ap.add_argument("--every", type=int, default=1, help="every Nth mutant only (a sample)")
    ap.add_argument("--cap", type=float, default=120.0, help="seconds per mutant")
    ap.add_argument("--tests-at", help="the test files as of this commit (a 'before' score)")
    args = ap.parse_args(argv)
    import pytest  # noqa: F401  (loaded once in the parent, before any fork)
    import hypothesis  # noqa: F401
    import pandas  # noqa: F401
    tree = Path(tempfile.mkdtemp(prefix="mutate-tables-"))
    try:
        files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
        for name in filter(None, files.decode().split("\0")):
            (tree / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, tree / name)
        tests = []
        for t in args.tests:
            if args.tests_at:
                shown = subprocess.run(["git", "show", f"{args.tests_at}:{t}"], cwd=ROOT, capture_output=True)
                if shown.returncode:
                    (tree / t).unlink(missing_ok=True)
                    continue
                (tree / t).write_bytes(shown.stdout)
            tests.append(t)
        target = tree / args.module
        source = target.read_text()
        found = [m for m in mutants(source, set(args.names.split(",")) if args.names else None)
                 if not args.match or args.match in m[4]][::args.every]
        counts: dict = {}
        started = time.monotonic()
        print(f"module: {args.module}\ntests: {' '.join(tests)}" + (f" (as of {args.tests_at})" if args.tests_at else ""))
        try:
            for m in found:
                status = run_one(tree, target, apply(source, m), tests, args.cap)
                counts[status] = counts.get(status, 0) + 1
                if status != "killed":
                    print(f"{status}: {m[4]}", flush=True)
        except KeyboardInterrupt:  # the caller's time cap: say how far it got, count the rest as not checked
            counts["not checked"] = len(found) - sum(counts.values())
        killed = counts.get("killed", 0) + counts.get("timeout", 0)
        print(f"mutants: {len(found)}; " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) +
              f"; killed {killed} of {len(found)} ({100.0 * killed / max(1, len(found)):.1f}%) in "
              f"{time.monotonic() - started:.0f} s")
        return 0
    finally:
        shutil.rmtree(tree, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
