#!/bin/bash
# issue 14: `--load 10` (torch engine) on the H200 with the agent before and after the mid-load
# read fix, one after the other on one machine. Run in the repository root of a tree whose
# probe_agent/load.py is the old one, with the fix as a patch in $1 (git diff -U1 e48a3b8 -- probe_agent/load.py);
# the device session of 2026-11-30 ran exactly this, inline. Outputs: $OUT/old.json, $OUT/new.json
# (tests/fixtures/h200/load10-fixed-time-read.health.json, load10.health.json).
A() { python3 -c "from sweep.collect.bundle import build_bundle as b; b('/tmp/$1.pyz')"
      python3 -I -S /tmp/$1.pyz --load 10 > $OUT/$1.json; echo $1 $?; }
A old
patch -p1 < "$1" && A new
