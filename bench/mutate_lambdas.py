#!/usr/bin/env python3
"""Mutants of a module's module-level lambdas, which neither mutmut nor bench/mutate_tables.py reach (issue 39).

mutmut 3 mutates code inside functions only, and a module-level table of lambdas -- the fact table's
`render=` and `unread=` tests (sweep/analysis/facts.py), the impact rules' `when` tests
(sweep/analysis/impact.py), `ACCEPTS` -- is built at import, before a mutant is switched on;
bench/mutate_tables.py makes no mutant of a lambda either. This script negates each such lambda's body
(`lambda r: X` -> `lambda r: (not (X))`), one at a time, in a copy of the tracked tree, and runs the given
test files (`pytest -x`: the first failure kills it). Lambdas inside a function or class are left to mutmut.

    nice -n 15 python3 bench/mutate_lambdas.py sweep/analysis/impact.py tests/unit/test_impact_rules.py
"""
from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def lambda_bodies(source: str) -> list[ast.expr]:
    """The bodies of the lambdas outside any function or class body, in source order."""
    found = []

    def walk(node):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            if isinstance(child, ast.Lambda):
                found.append(child.body)
            walk(child)
    walk(ast.parse(source))
    return found


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        sys.exit(__doc__)
    module, tests = argv[0], argv[1:]
    source = (ROOT / module).read_text()
    lines = source.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def offset(lineno, col):  # ast columns count UTF-8 bytes
        return starts[lineno - 1] + len(lines[lineno - 1].encode()[:col].decode())

    work = Path(tempfile.mkdtemp(prefix="mutate-lambdas-"))
    try:
        files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
        for name in filter(None, files.decode().split("\0")):
            (work / name).parent.mkdir(parents=True, exist_ok=True)
            if (ROOT / name).is_file():
                shutil.copy2(ROOT / name, work / name)
        env = {**os.environ, "PYTHONPATH": str(work)}
        bodies, killed = lambda_bodies(source), 0
        for body in bodies:
            a, b = offset(body.lineno, body.col_offset), offset(body.end_lineno, body.end_col_offset)
            (work / module).write_text(source[:a] + f"(not ({source[a:b]}))" + source[b:])
            rc = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *tests],
                                cwd=work, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
            killed += rc != 0
            print(f"{'killed  ' if rc else 'SURVIVED'} line {body.lineno}: not ({' '.join(source[a:b].split())[:100]})",
                  flush=True)
        print(f"{module}: {killed} of {len(bodies)} module-level lambdas negated are killed")
        return 0
    finally:
        shutil.rmtree(work)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
