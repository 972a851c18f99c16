"""The agent's parsers against real outputs (issue 51): tests/fixtures/corpus holds `nvidia-smi topo -m`
matrices, kernel-log Xid/SXid lines, `nvidia-smi -L` listings with MIG devices and `-q -d PERFORMANCE`
blocks, each verbatim from a public source named in manifest.json with its licence; the expected answers
there were written by hand from each text and NVIDIA's documentation, not from sweep's code.

Every file is checked by the parser that reads its kind as a host does, and every multi-GPU matrix by the
topology contract's worst link for a mask. A matrix cut by its quote is kept as it is: the rows it cuts
must come out unread (with the reason), never filled from another column.
"""
import json
from pathlib import Path

import pytest

from probe_agent.contracts import check_topology, worst_link
from probe_agent.hostfacts import nearest_nics
from probe_agent.mask import resolve_mask, smi_list_gpus
from probe_agent.smi_text import parse_active_reasons, parse_reason_counters, parse_smi_list, parse_topo_matrix
from probe_agent.xid import parse_xid_lines

CORPUS = Path(__file__).parents[1] / "fixtures" / "corpus"
MANIFEST = json.loads((CORPUS / "manifest.json").read_text())
ENTRIES = MANIFEST["files"]
LICENCES = ("Apache-2.0", "MIT", "BSD-3-Clause", "sweep's own recording")


def of_kind(kind):
    return [pytest.param(e, id=Path(e["file"]).stem) for e in ENTRIES if e["kind"] == kind]


def text(entry):
    return (CORPUS / entry["file"]).read_text()


def test_every_file_is_kept_with_its_source_and_a_compatible_licence():
    kinds = {}
    for e in ENTRIES:
        assert (CORPUS / e["file"]).is_file(), e["file"]
        src = e["source"]
        where = src.get("url", "").startswith("https://github.com/") or src.get("commit") or src.get("recorded")
        assert where, e["file"]
        assert any(name in e["licence"] for name in LICENCES), (e["file"], e["licence"])
        kinds[e["kind"]] = kinds.get(e["kind"], 0) + 1
    assert kinds == {"topo": 26, "kernlog": 6, "smi_list": 3, "perf": 4}
    in_dirs = {p.relative_to(CORPUS).as_posix() for p in CORPUS.glob("*/*") if p.is_file()}
    listed = {e["file"] for e in ENTRIES if not e["file"].startswith("..")}
    assert in_dirs == listed, "a file without its manifest entry"


def facts_of(topo, gpus, selected):
    return {"topology": dict(topo, source="nvidia-smi topo -m"), "gpus": [{"index": i} for i in range(gpus)],
            "mask": {"selected": [{"cuda_index": n, "physical_index": i} for n, i in enumerate(selected)]}}


@pytest.mark.parametrize("entry", of_kind("topo"))
def test_topo_matrix_affinities_nics_and_links_are_read_from_their_own_columns(entry):
    exp = entry["expected"]
    topo = parse_topo_matrix(text(entry))
    assert topo["cpu_affinity"] == exp["cpu_affinity"]
    assert topo["numa_affinity"] == exp["numa_affinity"]
    assert sorted(int(k) for k in topo["unread"]) == exp["unread"]
    assert all(r.startswith("GPU%s's row of nvidia-smi topo -m" % k) for k, r in topo["unread"].items())
    rows = set(topo["cpu_affinity"]) | set(topo["unread"]) | set(topo["nics"])
    assert rows == {str(i) for i in range(exp["gpus"])}
    for pair, link in exp["links"].items():
        assert topo["pairs"].get(pair) == link, pair
    near = nearest_nics([{"index": i, "pci_bus_id": None} for i in range(exp["gpus"])], [], None, topo)
    assert set(near) == set(exp["nearest_nic"])
    for gpu, (nics, link) in exp["nearest_nic"].items():
        nic = topo["nic_legend"].get(near[gpu]["nic"], near[gpu]["nic"])
        assert (near[gpu]["nic"] in nics or nic in nics) and near[gpu]["link"] == link, (gpu, near[gpu])


@pytest.mark.parametrize("entry", [e for e in of_kind("topo") if e.values[0]["expected"]["gpus"] > 1])
def test_the_topology_contract_names_the_worst_link_of_a_mask_on_every_multi_gpu_matrix(entry):
    exp = entry["expected"]
    assert exp["worst"], "every multi-GPU matrix checks at least one mask"
    topo = parse_topo_matrix(text(entry))
    for mask, link in exp["worst"].items():
        selected = [int(i) for i in mask.split(",")]
        facts = facts_of(topo, exp["gpus"], selected)
        assert worst_link(facts) == link, mask
        verdict = check_topology(facts)
        if link is None:  # a pair the text does not give: unknown, never a link from another column
            assert verdict["status"] == "unknown", mask
        else:
            assert verdict["status"] in ("ok", "warning") and verdict["evidence"]["worst_link"] == link, mask


@pytest.mark.parametrize("entry", of_kind("kernlog"))
def test_kernel_log_events_are_grouped_and_judged_whatever_the_line_prefix(entry):
    groups = parse_xid_lines(text(entry).splitlines())
    got = [[g["type"], g["bus_id"], g["code"], g["count"], g["action"]] for g in groups]
    want = [g[:5] for g in entry["expected"]["groups"]]
    assert sorted(got) == sorted(want)
    for g in entry["expected"]["groups"]:
        if len(g) > 5:  # the wall time the line itself gives
            assert next(x for x in groups if [x["type"], x["bus_id"], x["code"]] == g[:3])["first_at"] == g[5]


@pytest.mark.parametrize("entry", of_kind("smi_list"))
def test_nvidia_smi_list_gives_gpu_and_mig_uuids_and_a_mask_resolves_against_it(entry):
    listed = parse_smi_list(text(entry))
    assert [[g["index"], g["uuid"], [m["uuid"] for m in g["mig"]]] for g in listed] == entry["expected"]["gpus"]
    mask = entry["expected"]["mask"]
    out = resolve_mask({"CUDA_VISIBLE_DEVICES": mask["CUDA_VISIBLE_DEVICES"]}, smi_list_gpus(listed))
    assert out["state"] == "set" and len(out["selected"]) == 1
    sel = out["selected"][0]
    assert [sel["physical_index"], sel.get("mig_uuid")] == mask["selects"]


@pytest.mark.parametrize("entry", of_kind("perf"))
def test_clock_event_reasons_are_read_in_both_spellings_with_and_without_counters(entry):
    said = text(entry)
    active = {("null" if k is None else k): v for k, v in parse_active_reasons(said).items()}
    assert active == entry["expected"]["active"]
    assert parse_reason_counters(said) == entry["expected"]["counters"]
