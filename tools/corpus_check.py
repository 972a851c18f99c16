#!/usr/bin/env python3
"""The corpus checks of tests/unit/test_smi_corpus.py, counted and listed, against whichever agent
PYTHONPATH names: on this tree every check agrees; on an older tree (main before issue 51, which lacks
the new parsers) the same checks run through that tree's own functions, and each disagreement is listed.

    PYTHONPATH=OTHER_TREE python3 tools/corpus_check.py tests/fixtures/corpus

Counts per kind: files, checks (one per expected value of the manifest), disagreements.
"""
import json
import re
import sys
from pathlib import Path

from probe_agent import collect, contracts, hostfacts, xid

NEW = hasattr(hostfacts, "OLD_NAMES")  # this tree (issue 51) or an older one
if NEW:
    from probe_agent.smi_text import parse_active_reasons, parse_reason_counters, parse_smi_list
    from probe_agent.smi_text import parse_topo_matrix
else:
    parse_topo_matrix, parse_reason_counters = collect.parse_topo_matrix, collect.parse_reason_counters
    parse_smi_list = parse_active_reasons = None
KINDS = ("topo", "kernlog", "smi_list", "perf")
checks, bad = {}, {}


def check(kind, name, ok, detail=""):
    checks[kind] = checks.get(kind, 0) + 1
    if not ok:
        bad.setdefault(kind, []).append("%s: %s" % (name, detail))


def differs(got, want):
    return {k: v for k, v in got.items() if want.get(k) != v}


def topo_checks(n, text, exp):
    topo = parse_topo_matrix(text)
    for field in ("cpu_affinity", "numa_affinity"):
        check("topo", "%s %s" % (n, field), topo[field] == exp[field], "got %s" % differs(topo[field], exp[field]))
    unread = sorted(int(x) for x in topo.get("unread", {}))
    check("topo", n + " unread", unread == exp["unread"], "expected unread %s, got %s" % (exp["unread"], unread))
    for pair, link in exp["links"].items():
        check("topo", "%s link %s" % (n, pair), topo["pairs"].get(pair) == link, "got %r" % topo["pairs"].get(pair))
    gpus = [{"index": i, "pci_bus_id": None} for i in range(exp["gpus"])]
    near = hostfacts.nearest_nics(gpus, [], [{"device": "ib?"}], topo)  # a port, as older trees need one
    for gpu, (nics, link) in exp["nearest_nic"].items():
        got = near.get(gpu) or {}
        check("topo", "%s nearest NIC of GPU%s" % (n, gpu), got.get("nic") in nics and got.get("link") == link,
              "got %s %s" % (got.get("nic"), got.get("link")))
    for mask, link in exp["worst"].items():
        chosen = [{"cuda_index": a, "physical_index": int(b)} for a, b in enumerate(mask.split(","))]
        facts = {"topology": topo, "gpus": [{"index": i} for i in range(exp["gpus"])], "mask": {"selected": chosen}}
        worst = contracts.worst_link(facts)
        check("topo", "%s worst link of GPUs %s" % (n, mask), worst == link, "got %r" % worst)


def kernlog_checks(n, text, exp):
    groups = xid.parse_xid_lines(text.splitlines())
    got = sorted([g["type"], g["bus_id"], g["code"], g["count"], g["action"]] for g in groups)
    for want in exp["groups"]:
        name = "%s %s %s %s" % (n, want[0], want[1], want[2])
        check("kernlog", name, want[:5] in got, "got %s" % [x for x in got if x[:3] == want[:3]])
        if len(want) > 5:
            at = next((g["first_at"] for g in groups if [g["type"], g["bus_id"], g["code"]] == want[:3]), None)
            check("kernlog", name + " wall time", at == want[5], "got %r" % at)
    for said in exp.get("said", []):
        name = "%s %s %s %s" % (n, said["group"][0], said["group"][1], said["group"][2])
        g = next((x for x in groups if [x["type"], x["bus_id"], x["code"]] == said["group"]), {})
        check("kernlog", name + " seconds since boot", g.get("first_s") == said["first_s"], "got %r" % g.get("first_s"))
        if "pid" in said:
            ok = re.match(r"pid='?%s'?,\s+name=%s," % (re.escape(said["pid"]), re.escape(said["name"])), g.get("first") or "")
            check("kernlog", name + " pid and name", bool(ok), "got %r" % (g.get("first") or "")[:60])


def smi_list_checks(n, text, exp):
    listed = parse_smi_list(text) if parse_smi_list else None
    read = None if listed is None else [[g["index"], g["uuid"], [m["uuid"] for m in g["mig"]]] for g in listed]
    check("smi_list", n + " GPUs and MIG UUIDs", read == exp["gpus"], "no nvidia-smi -L parser (only its first line kept)"
          if listed is None else "got %s" % read)


def perf_checks(n, text, exp):
    active = parse_active_reasons(text) if parse_active_reasons else None
    active = None if active is None else {("null" if k is None else k): v for k, v in active.items()}
    check("perf", n + " active reasons", active == exp["active"],
          "no reader of the active reasons block" if active is None else "got %s" % active)
    counters = parse_reason_counters(text)
    check("perf", n + " counters", counters == exp["counters"], "got %s" % counters)


def main(corpus):
    manifest = json.loads((corpus / "manifest.json").read_text())
    run = {"topo": topo_checks, "kernlog": kernlog_checks, "smi_list": smi_list_checks, "perf": perf_checks}
    for e in manifest["files"]:
        run[e["kind"]](Path(e["file"]).stem, (corpus / e["file"]).read_text(), e["expected"])
    for kind in KINDS:
        files = sum(1 for e in manifest["files"] if e["kind"] == kind)
        print("%-8s files %2d  checks %3d  disagreements %3d" % (kind, files, checks.get(kind, 0), len(bad.get(kind, []))))
    for kind in KINDS:
        for line in bad.get(kind, []):
            print("  [%s] %s" % (kind, line))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
