#!/usr/bin/env python3
"""The corpus checks of tests/unit/test_smi_corpus.py, counted and listed, against whichever agent PYTHONPATH
names: on this tree every check agrees; on an older tree (main before issue 51, which lacks the new
parsers) the same checks run through that tree's own functions, and each disagreement is listed.

    PYTHONPATH=OTHER_TREE python3 tools/corpus_check.py tests/fixtures/corpus

Counts per kind: files, checks (one per expected value of the manifest), disagreements.
"""
import json
import sys
from pathlib import Path
corpus = Path(sys.argv[1]); manifest = json.loads((corpus / "manifest.json").read_text())
from probe_agent import collect, hostfacts, contracts, xid
new = hasattr(hostfacts, "OLD_NAMES")
if new:
    from probe_agent.smi_text import parse_topo_matrix, parse_smi_list, parse_active_reasons, parse_reason_counters
else:
    parse_topo_matrix, parse_reason_counters = collect.parse_topo_matrix, collect.parse_reason_counters
    parse_smi_list = parse_active_reasons = None
checks = {}; bad = {}
def check(kind, name, ok, detail=""):
    checks[kind] = checks.get(kind, 0) + 1
    if not ok:
        bad.setdefault(kind, []).append("%s: %s" % (name, detail))
for e in manifest["files"]:
    t = (corpus / e["file"]).read_text(); exp = e["expected"]; n = Path(e["file"]).stem; k = e["kind"]
    if k == "topo":
        topo = parse_topo_matrix(t)
        check(k, n + " cpu_affinity", topo["cpu_affinity"] == exp["cpu_affinity"], "got %s" % {g: v for g, v in topo["cpu_affinity"].items() if exp["cpu_affinity"].get(g) != v})
        check(k, n + " numa_affinity", topo["numa_affinity"] == exp["numa_affinity"], "got %s" % {g: v for g, v in topo["numa_affinity"].items() if exp["numa_affinity"].get(g) != v})
        check(k, n + " unread", sorted(int(x) for x in topo.get("unread", {})) == exp["unread"], "expected unread %s, got %s" % (exp["unread"], sorted(int(x) for x in topo.get("unread", {}))))
        for pair, link in exp["links"].items():
            check(k, n + " link " + pair, topo["pairs"].get(pair) == link, "got %r" % topo["pairs"].get(pair))
        near = hostfacts.nearest_nics([{"index": i, "pci_bus_id": None} for i in range(exp["gpus"])], [], [{"device": "ib?"}], topo)
        for gpu, (nics, link) in exp["nearest_nic"].items():
            got = near.get(gpu) or {}
            check(k, n + " nearest NIC of GPU" + gpu, got.get("nic") in nics and got.get("link") == link, "got %s %s" % (got.get("nic"), got.get("link")))
        for mask, link in exp["worst"].items():
            sel = [int(i) for i in mask.split(",")]
            facts = {"topology": topo, "gpus": [{"index": i} for i in range(exp["gpus"])], "mask": {"selected": [{"cuda_index": a, "physical_index": b} for a, b in enumerate(sel)]}}
            check(k, n + " worst link of GPUs " + mask, contracts.worst_link(facts) == link, "got %r" % contracts.worst_link(facts))
    elif k == "kernlog":
        gs = xid.parse_xid_lines(t.splitlines())
        got = sorted([g["type"], g["bus_id"], g["code"], g["count"], g["action"]] for g in gs)
        for want in exp["groups"]:
            check(k, n + " %s %s %s" % tuple(want[:3]), want[:5] in got, "got %s" % [x for x in got if x[:3] == want[:3]])
            if len(want) > 5:
                at = next((g["first_at"] for g in gs if [g["type"], g["bus_id"], g["code"]] == want[:3]), None)
                check(k, n + " %s %s %s wall time" % tuple(want[:3]), at == want[5], "got %r" % at)
    elif k == "smi_list":
        listed = parse_smi_list(t) if parse_smi_list else None
        check(k, n + " GPUs and MIG UUIDs", listed is not None and [[g["index"], g["uuid"], [m["uuid"] for m in g["mig"]]] for g in listed] == exp["gpus"], "no nvidia-smi -L parser (only its first line kept)")
    elif k == "perf":
        act = parse_active_reasons(t) if parse_active_reasons else None
        act = None if act is None else {("null" if a is None else a): v for a, v in act.items()}
        check(k, n + " active reasons", act == exp["active"], "no reader of the active reasons block")
        check(k, n + " counters", parse_reason_counters(t) == exp["counters"], "got %s" % parse_reason_counters(t))
for kind in ("topo", "kernlog", "smi_list", "perf"):
    print("%-8s files %2d  checks %3d  disagreements %3d" % (kind, sum(1 for e in manifest["files"] if e["kind"] == kind), checks.get(kind, 0), len(bad.get(kind, []))))
for kind, lines in bad.items():
    for l in lines:
        print("  [%s] %s" % (kind, l))
